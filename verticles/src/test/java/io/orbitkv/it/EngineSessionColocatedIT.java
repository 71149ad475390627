package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import com.google.protobuf.ByteString;
import io.orbitkv.client.ColocatedChannel;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.OrbitKvException;
import io.orbitkv.protocol.engine.AllocatePublishReply;
import io.orbitkv.protocol.engine.ErrorReason;
import io.orbitkv.protocol.engine.GroupChain;
import io.orbitkv.protocol.engine.InstanceRole;
import io.orbitkv.protocol.engine.LeasedPage;
import io.orbitkv.protocol.engine.PageKey;
import io.orbitkv.protocol.engine.QueryReply;
import io.orbitkv.protocol.engine.QueryStatus;
import io.orbitkv.protocol.engine.ReleaseLeaseReply;
import io.orbitkv.protocol.engine.SealPublishReply;
import io.orbitkv.protocol.engine.SlotStatus;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * An {@link EngineSession} whose per-request calls go over the co-located channel ({@link EngineSession#useColocated}):
 * the whole publish→restore cycle over it against a real Manager, the same typed refusals as over gRPC, and the calls
 * that must stay on gRPC (made on an event loop, or above the channel's frame bound). A closed channel proves which way
 * a call went: a call routed to it fails, one over gRPC succeeds. The Manager's after-test check ({@link RunningManager})
 * asserts no lease, leased byte or pinned image is left.
 */
@Timeout(120)
class EngineSessionColocatedIT {
    static final int PAGE = 64 << 10;

    @RegisterExtension
    final RunningManager running = new RunningManager().with("ssd.enabled", "false")
            .with("engine.colocated-max-frame", "8KiB");

    ColocatedChannel channel() throws Exception {
        return ColocatedChannel.connect(running.manager().colocatedSocket(), running.manager().token());
    }

    static List<PageKey> keys(List<ByteString> hashes) {
        return hashes.stream().map(h -> PageKey.newBuilder().setGroupId(0).setBlockHash(h).build()).toList();
    }

    static GroupChain group(List<ByteString> hashes) {
        return GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes).build();
    }

    static byte pageByte(int position, int i) {
        return (byte) (position * 13 + i * 5 + (i >> 11));
    }

    @Test
    void thePublishRestoreCycleRunsOverTheChannelWithEveryByteRestored() throws Exception {
        int pages = 16;
        List<ByteString> hashes = RunningManager.chain("colocated-cycle", pages);
        try (OrbitKvClient client = running.unixClient();
             EngineSession session = client.register(RunningManager.identity("model-a", PAGE).build(),
                     InstanceRole.PREFILL_AND_DECODE).await();
             ColocatedChannel channel = channel()) {
            assertThat(session.useColocated(channel)).isSameAs(session);
            AllocatePublishReply allocated = session.allocate(keys(hashes)).await();
            assertThat(allocated.getSlotsList()).hasSize(pages)
                    .allSatisfy(slot -> assertThat(slot.getStatus()).isEqualTo(SlotStatus.ALLOCATED));
            byte[] bytes = new byte[PAGE];
            for (int p = 0; p < pages; p++) {
                for (int i = 0; i < PAGE; i++) {
                    bytes[i] = pageByte(p, i);
                }
                MemorySegment.copy(bytes, 0, session.slot(allocated.getSlots(p).getSlot()), ValueLayout.JAVA_BYTE, 0, PAGE);
            }
            SealPublishReply sealed = session.seal(allocated.getPublishId(), List.of()).await();
            assertThat(sealed.getSealedPages()).isEqualTo(pages);

            QueryReply reply = session.submit(List.of(group(hashes)), 0).await();
            assertThat(reply.getStatus()).isEqualTo(QueryStatus.READY);
            assertThat(reply.getReadyBlocks()).isEqualTo(pages);
            byte[] restored = new byte[PAGE];
            for (LeasedPage leased : reply.getLease().getPagesList()) {
                MemorySegment.copy(session.slot(leased.getSlot()), ValueLayout.JAVA_BYTE, 0, restored, 0, PAGE);
                for (int i = 0; i < PAGE; i++) {
                    if (restored[i] != pageByte(leased.getPosition(), i)) {
                        throw new AssertionError("page " + leased.getPosition() + " differs at byte " + i);
                    }
                }
            }
            ReleaseLeaseReply released = session.release(reply.getLease().getLeaseId()).await();
            assertThat(released.getLeaseValid()).isTrue();
            assertThat(released.getReleasedPages()).isEqualTo(pages);
            assertThat(session.invalidReleases()).isZero();
            RunningManager.assertNoLeases(session);

            // The lease above was the channel's: a query answered over it is released when the channel closes.
            QueryReply held = session.submit(List.of(group(hashes)), 0).await();
            assertThat(held.getStatus()).isEqualTo(QueryStatus.READY);
            assertThat(running.metric("orbitkv_leases_active")).isEqualTo(1);
            channel.close();
            await().atMost(Duration.ofSeconds(20)).until(() -> running.metric("orbitkv_leases_active") == 0);
            // A closed channel fails the calls routed to it; detached, the session is back on gRPC.
            assertThat(session.allocate(keys(RunningManager.chain("after-close", 1))).failed()).isTrue();
            session.useColocated(null);
            AllocatePublishReply overGrpc = session.allocate(keys(RunningManager.chain("after-close", 1))).await();
            assertThat(session.abort(overGrpc.getPublishId()).await().getFreedPages()).isEqualTo(1);
            RunningManager.assertNoLeases(session);
        }
    }

    @Test
    void refusalsCarryTheSameTypedReasonsAsOverGrpc() throws Exception {
        try (OrbitKvClient client = running.unixClient();
             EngineSession session = client.register(RunningManager.identity("model-a", PAGE).build(),
                     InstanceRole.PREFILL_AND_DECODE).await();
             ColocatedChannel channel = channel()) {
            ErrorReason seal = reasonOf(() -> session.seal(987_654_321L, List.of()));
            ErrorReason abort = reasonOf(() -> session.abort(987_654_321L));
            ErrorReason release = reasonOf(() -> session.release(123_456_789L));
            ErrorReason poll = reasonOf(() -> session.poll(555_555L));
            session.useColocated(channel);
            assertThat(reasonOf(() -> session.seal(987_654_321L, List.of()))).isEqualTo(seal)
                    .isNotEqualTo(ErrorReason.ERROR_REASON_UNSPECIFIED);
            assertThat(reasonOf(() -> session.abort(987_654_321L))).isEqualTo(abort);
            assertThat(reasonOf(() -> session.release(123_456_789L))).isEqualTo(release);
            assertThat(reasonOf(() -> session.poll(555_555L))).isEqualTo(poll).isEqualTo(ErrorReason.UNKNOWN_TICKET);
            assertThat(channel.ping()).isNotNull(); // the connection goes on after refusals
            RunningManager.assertNoLeases(session);
        }
    }

    @Test
    void callsOnAnEventLoopAndRequestsAboveTheFrameBoundStayOnGrpc() throws Exception {
        List<ByteString> hashes = RunningManager.chain("stays-on-grpc", 2);
        Vertx vertx = Vertx.vertx();
        try (OrbitKvClient client = running.unixClient();
             EngineSession session = client.register(RunningManager.identity("model-a", PAGE).build(),
                     InstanceRole.PREFILL_AND_DECODE).await()) {
            ColocatedChannel closed = channel();
            closed.close();
            session.useColocated(closed);
            // Off a loop the call goes to the (closed) channel and fails...
            assertThat(session.allocate(keys(hashes)).failed()).isTrue();
            // ...on a loop it must not block it: it goes over gRPC and succeeds.
            Promise<AllocatePublishReply> onLoop = Promise.promise();
            vertx.runOnContext(v -> session.allocate(keys(hashes)).onComplete(onLoop));
            AllocatePublishReply allocated = onLoop.future().await(30, TimeUnit.SECONDS);
            assertThat(allocated.getSlotsList()).hasSize(2);
            Promise<Integer> aborted = Promise.promise();
            vertx.runOnContext(v -> session.abort(allocated.getPublishId()).map(r -> r.getFreedPages()).onComplete(aborted));
            assertThat(aborted.future().await(30, TimeUnit.SECONDS)).isEqualTo(2);
            // A query larger than the channel's 8 KiB bound goes over gRPC too (300 hashes of 32 bytes).
            QueryReply miss = session.submit(List.of(group(RunningManager.chain("too-large", 300))), 0).await();
            assertThat(miss.getStatus()).isEqualTo(QueryStatus.MISS);
            session.useColocated(null);
            RunningManager.assertNoLeases(session);
        } finally {
            vertx.close().await(10, TimeUnit.SECONDS);
        }
    }

    @Test
    void aPollWhoseAnswerIsAboveTheFrameBoundIsAskedAgainOverGrpc() throws Exception {
        int pages = 800; // a READY reply of 800 leased pages (about 19 bytes each) is over the 8 KiB bound
        List<ByteString> hashes = RunningManager.chain("large-answer", pages);
        try (OrbitKvClient client = running.unixClient();
             EngineSession session = client.register(RunningManager.identity("model-a", 4096).build(),
                     InstanceRole.PREFILL_AND_DECODE).await();
             ColocatedChannel channel = channel()) {
            session.useColocated(channel);
            AllocatePublishReply allocated = session.allocate(keys(hashes)).await();
            for (int p = 0; p < pages; p++) {
                session.slot(allocated.getSlots(p).getSlot()).fill((byte) p);
            }
            session.seal(allocated.getPublishId(), List.of()).await();
            QueryReply reply = session.submit(List.of(group(hashes)), 0).await(); // over gRPC: the request is too large
            assertThat(reply.getStatus()).isEqualTo(QueryStatus.READY);
            assertThatThrownBy(() -> channel.poll(session.session(), reply.getTicket()))
                    .isInstanceOfSatisfying(OrbitKvException.class,
                            e -> assertThat(e.reason()).isEqualTo(ErrorReason.OVERSIZED_REQUEST));
            QueryReply polled = session.poll(reply.getTicket()).await();
            assertThat(polled.getLease().getLeaseId()).isEqualTo(reply.getLease().getLeaseId());
            assertThat(polled.getLease().getPagesCount()).isEqualTo(pages);
            for (LeasedPage leased : polled.getLease().getPagesList()) {
                assertThat(session.slot(leased.getSlot()).get(ValueLayout.JAVA_BYTE, 4095)).isEqualTo((byte) leased.getPosition());
            }
            assertThat(session.release(reply.getLease().getLeaseId()).await().getLeaseValid()).isTrue();
            RunningManager.assertNoLeases(session);
        }
    }

    private static ErrorReason reasonOf(Supplier<Future<?>> call) {
        Future<?> future = call.get();
        assertThatThrownBy(() -> future.await(30, TimeUnit.SECONDS)).isInstanceOf(OrbitKvException.class);
        return ((OrbitKvException) future.cause()).reason();
    }
}
