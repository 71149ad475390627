package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.OrbitKvException;
import io.orbitkv.protocol.engine.*;
import io.vertx.core.Future;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Every kind of bad input gets a typed refusal with a clear message and a counter, and changes nothing else: the
 * pool, the images and the leases look the same before and after.
 */
@Timeout(120)
class BadInputIT {
    static final int PAGE = 64 * 1024;

    @RegisterExtension
    final RunningManager running = new RunningManager().with("grpc.max-pages-per-request", "256");

    OrbitKvClient client;
    EngineSession session;
    List<ByteString> published;

    @BeforeEach
    void publishSomething() throws Exception {
        client = running.unixClient();
        session = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await();
        published = PublishQueryRestoreIT.publish(session, "base", 4);
    }

    @AfterEach
    void close() throws Exception {
        RunningManager.assertNoLeases(session);
        session.close();
        client.close();
    }

    /** Runs a bad call and checks its reason, the counter, and that pool and leases did not move. */
    void refused(ErrorReason reason, Supplier<Future<?>> call) throws Exception {
        String counter = "orbitkv_rejections_total{reason=\"" + reason.name().toLowerCase() + "\"}";
        double before = running.metric(counter);
        String[] unchanged = {"orbitkv_pool_used_bytes", "orbitkv_pool_requested_bytes", "orbitkv_images",
                "orbitkv_images_pinned", "orbitkv_leases_active", "orbitkv_instances"};
        double[] values = new double[unchanged.length];
        for (int i = 0; i < unchanged.length; i++) {
            values[i] = running.metric(unchanged[i]);
        }
        assertThatThrownBy(() -> call.get().await())
                .isInstanceOfSatisfying(OrbitKvException.class, e -> {
                    assertThat(e.reason()).isEqualTo(reason);
                    assertThat(e.getMessage()).startsWith(reason.name() + ": ").hasSizeGreaterThan(reason.name().length() + 10);
                });
        assertThat(running.metric(counter)).isEqualTo(before + 1);
        for (int i = 0; i < unchanged.length; i++) {
            assertThat(running.metric(unchanged[i])).as(unchanged[i]).isEqualTo(values[i]);
        }
    }

    SessionRef other(long instance, long epoch) {
        return SessionRef.newBuilder().setInstanceId(instance).setSessionEpoch(epoch).build();
    }

    Future<QueryReply> submitAs(SessionRef as) {
        return client.call(EngineServiceGrpcClient.SubmitQuery, SubmitQueryRequest.newBuilder().setSession(as)
                .setNamespaceId(session.namespace()).addGroups(chain(published)).build());
    }

    @Test
    void unknownInstance() throws Exception {
        refused(ErrorReason.UNKNOWN_INSTANCE, () -> submitAs(other(999_999, session.session().getSessionEpoch())));
    }

    @Test
    void staleSessionEpochAfterAResume() throws Exception {
        SessionRef old = session.session();
        RegisterReply resumed = client.call(EngineServiceGrpcClient.Register, RegisterRequest.newBuilder()
                .setIdentity(session.identity()).setRole(InstanceRole.DECODE)
                .setResumeInstanceId(session.instanceId()).build()).await();
        assertThat(resumed.getInstanceId()).isEqualTo(old.getInstanceId());
        assertThat(resumed.getSessionEpoch()).isNotEqualTo(old.getSessionEpoch());
        refused(ErrorReason.STALE_SESSION_EPOCH, () -> submitAs(old));
        refused(ErrorReason.STALE_SESSION_EPOCH, () -> submitAs(other(old.getInstanceId(), old.getSessionEpoch() + 1)));
        // The resumed session works and still sees the published prefix; then it leaves.
        SessionRef fresh = other(resumed.getInstanceId(), resumed.getSessionEpoch());
        QueryReply reply = submitAs(fresh).await();
        assertThat(reply.getReadyBlocks()).isEqualTo(4);
        client.call(EngineServiceGrpcClient.ReleaseLease, ReleaseLeaseRequest.newBuilder().setSession(fresh)
                .setLeaseId(reply.getLease().getLeaseId()).build()).await();
        client.call(EngineServiceGrpcClient.Unregister, UnregisterRequest.newBuilder().setSession(fresh).build()).await();
        session.abandon();
        session = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await();
    }

    @Test
    void namespaceMismatch() throws Exception {
        refused(ErrorReason.NAMESPACE_MISMATCH, () -> session.submit(SubmitQueryRequest.newBuilder()
                .setNamespaceId(ByteString.copyFrom(new byte[16])).addGroups(chain(published))));
        refused(ErrorReason.NAMESPACE_MISMATCH, () -> client.call(EngineServiceGrpcClient.AllocatePublish, AllocatePublishRequest.newBuilder()
                .setSession(session.session()).setNamespaceId(ByteString.copyFrom(new byte[16]))
                .addPages(PageKey.newBuilder().setGroupId(0).setBlockHash(ByteString.copyFromUtf8("x"))).build()));
    }

    @Test
    void descriptorOutsideThePool() throws Exception {
        AllocatePublishReply open = session.allocate(List.of(PageKey.newBuilder().setGroupId(0)
                .setBlockHash(ByteString.copyFromUtf8("outside")).build())).await();
        PoolDescriptor granted = open.getSlots(0).getSlot();
        refused(ErrorReason.DESCRIPTOR_OUTSIDE_POOL, () -> session.seal(SealPublishRequest.newBuilder()
                .setPublishId(open.getPublishId())
                .addWritten(granted.toBuilder().setOffset(session.registration().getPool().getSizeBytes()))));
        refused(ErrorReason.DESCRIPTOR_OUTSIDE_POOL, () -> session.seal(SealPublishRequest.newBuilder()
                .setPublishId(open.getPublishId()).addWritten(granted.toBuilder().setRegionId(9))));
        // The publish is still open and seals with its real descriptor.
        assertThat(session.seal(SealPublishRequest.newBuilder().setPublishId(open.getPublishId()).addWritten(granted))
                .await().getSealedPages()).isEqualTo(1);
    }

    @Test
    void doubleReleaseAndUnknownLeaseTicketAndPublish() throws Exception {
        QueryReply reply = session.query(List.of(chain(published))).await();
        long lease = reply.getLease().getLeaseId();
        assertThat(session.release(lease).await().getReleasedPages()).isEqualTo(4);
        refused(ErrorReason.UNKNOWN_LEASE, () -> session.release(lease));
        refused(ErrorReason.UNKNOWN_TICKET, () -> session.poll(123_456));
        refused(ErrorReason.UNKNOWN_TICKET, () -> session.cancel(123_456));
        refused(ErrorReason.UNKNOWN_PUBLISH, () -> session.seal(987_654, List.of()));
        refused(ErrorReason.UNKNOWN_PUBLISH, () -> session.abort(987_654));
    }

    @Test
    void oversizedRequests() throws Exception {
        List<PageKey> tooMany = new ArrayList<>();
        for (int i = 0; i < 257; i++) {
            tooMany.add(PageKey.newBuilder().setGroupId(0).setBlockHash(ByteString.copyFromUtf8("k" + i)).build());
        }
        refused(ErrorReason.OVERSIZED_REQUEST, () -> session.allocate(tooMany));
        List<ByteString> longChain = new ArrayList<>(Collections.nCopies(257, ByteString.copyFromUtf8("h")));
        refused(ErrorReason.OVERSIZED_REQUEST, () -> session.submit(List.of(chain(longChain)), 0));
        // Beyond the gRPC message limit (16 MiB by default) the transport refuses before the Manager reads it.
        ByteString huge = ByteString.copyFrom(new byte[17 << 20]);
        assertThatThrownBy(() -> session.allocate(List.of(PageKey.newBuilder().setGroupId(0).setBlockHash(huge).build())).await())
                .isInstanceOf(Exception.class);
    }

    @Test
    void malformedRequests() throws Exception {
        refused(ErrorReason.MALFORMED_REQUEST, () -> session.allocate(List.of(PageKey.newBuilder().setGroupId(0)
                .setBlockHash(ByteString.EMPTY).build())));
        refused(ErrorReason.MALFORMED_REQUEST, () -> session.allocate(List.of(PageKey.newBuilder().setGroupId(0)
                .setBlockHash(ByteString.copyFrom(new byte[65])).build())));
        refused(ErrorReason.MALFORMED_REQUEST, () -> session.allocate(List.of(PageKey.newBuilder().setGroupId(7)
                .setBlockHash(ByteString.copyFromUtf8("x")).build())));
        refused(ErrorReason.MALFORMED_REQUEST, () -> session.submit(List.of(), 0));
        refused(ErrorReason.MALFORMED_REQUEST, () -> session.submit(List.of(chain(published), chain(published)), 0));
        refused(ErrorReason.INVALID_IDENTITY, () -> client.register(RunningManager.identity("", PAGE).build(), InstanceRole.DECODE));
        refused(ErrorReason.INVALID_IDENTITY, () -> client.register(RunningManager.identity("m", PAGE).setTpRank(2).setTpSize(2).build(), InstanceRole.DECODE));
        refused(ErrorReason.INVALID_IDENTITY, () -> client.register(RunningManager.identity("m", 0).build(), InstanceRole.DECODE));
    }

    /** uint32/uint64 fields are compared unsigned: a value of 2^31/2^63 or more is out of range, never negative. */
    @Test
    void unsignedFieldsAreCheckedAsUnsigned() throws Exception {
        long twoTo63Plus4096 = Long.MIN_VALUE + 4096;
        refused(ErrorReason.INVALID_IDENTITY, () -> client.register(identityWithPage(twoTo63Plus4096).build(), InstanceRole.DECODE));
        refused(ErrorReason.INVALID_IDENTITY, () -> client.register(RunningManager.identity("m", PAGE).setTpRank(-1).build(),
                InstanceRole.DECODE));
        refused(ErrorReason.INVALID_IDENTITY, () -> client.register(RunningManager.identity("m", PAGE).setPageSizeTokens(-16)
                .build(), InstanceRole.DECODE));
        refused(ErrorReason.INVALID_IDENTITY, () -> client.register(RunningManager.identity("m", PAGE).setPpSize(-1).setPpRank(5)
                .build(), InstanceRole.DECODE));
        assertThatThrownBy(() -> client.register(identityWithPage(twoTo63Plus4096).build(), InstanceRole.DECODE).await())
                .hasMessageContaining("9223372036854779904");
        refused(ErrorReason.INVALID_DEMAND, () -> session.submitDemand(demand(published.size()).setValidPrefixTokens(Long.MIN_VALUE + 16).build()));
        refused(ErrorReason.INVALID_DEMAND, () -> session.submitDemand(demand(published.size()).setSelectedEndTokens(-16).build()));
        refused(ErrorReason.INVALID_DEMAND, () -> session.submitDemand(demand(published.size()).setFirstUseMicros(Long.MIN_VALUE).build()));
        refused(ErrorReason.INVALID_DEMAND, () -> session.submitDemand(demand(published.size()).setPageSizeTokens(-16).build()));
        refused(ErrorReason.INVALID_DEMAND, () -> session.submitDemand(demand(published.size()).setGroups(0,
                GroupDemand.newBuilder().setGroupId(0).addAllBlockHashes(published)
                        .addRanges(BlockSpan.newBuilder().setStart(Integer.MIN_VALUE + 1).setEnd(Integer.MIN_VALUE + 2))).build()));
        AllocatePublishReply open = session.allocate(List.of(PageKey.newBuilder().setGroupId(0)
                .setBlockHash(ByteString.copyFromUtf8("unsigned")).build())).await();
        refused(ErrorReason.DESCRIPTOR_OUTSIDE_POOL, () -> session.seal(SealPublishRequest.newBuilder().setPublishId(open.getPublishId())
                .addWritten(open.getSlots(0).getSlot().toBuilder().setOffset(Long.MIN_VALUE))));
        refused(ErrorReason.DESCRIPTOR_OUTSIDE_POOL, () -> session.seal(SealPublishRequest.newBuilder().setPublishId(open.getPublishId())
                .addWritten(open.getSlots(0).getSlot().toBuilder().setLength(-PAGE))));
        session.abort(open.getPublishId()).await();
    }

    /** max_wait_micros of 2^64 - 1 is "as long as the configured budget allows", not a negative (expired) wait. */
    @Test
    void aHugeUnsignedMaxWaitIsALongWaitNotAnExpiredOne() throws Exception {
        List<ByteString> writing = PublishQueryRestoreIT.chain("being-written", 2);
        AllocatePublishReply open = session.allocate(writing.stream()
                .map(h -> PageKey.newBuilder().setGroupId(0).setBlockHash(h).build()).toList()).await();
        QueryReply reply = session.submitDemand(Demand.newBuilder().setRequestId("wait").setRevision(1).setOperationId(3)
                .setPageSizeTokens(16).setSelectedEndTokens(32).setSelectedGroupId(0).setMaxWaitMicros(-1L)
                .addGroups(GroupDemand.newBuilder().setGroupId(0).addAllBlockHashes(writing)
                        .addRanges(BlockSpan.newBuilder().setStart(0).setEnd(2))).build()).await();
        assertThat(reply.getStatus()).as("the pages are being written and the wait has not run out").isEqualTo(QueryStatus.PENDING);
        session.cancel(reply.getTicket()).await();
        session.abort(open.getPublishId()).await();
    }

    static InstanceIdentity.Builder identityWithPage(long bytesPerPage) {
        return RunningManager.identity("m", PAGE).setGroups(0, GroupSpec.newBuilder().setGroupId(0)
                .setKind(GroupKind.FULL_ATTENTION).setBytesPerPage(bytesPerPage));
    }

    /** A valid demand for the first {@code pages} published pages, to break one field at a time. */
    Demand.Builder demand(int pages) {
        return Demand.newBuilder().setRequestId("u").setRevision(1).setOperationId(5).setPageSizeTokens(16)
                .setSelectedEndTokens(16L * pages).setSelectedGroupId(0)
                .addGroups(GroupDemand.newBuilder().setGroupId(0).addAllBlockHashes(published.subList(0, pages))
                        .addRanges(BlockSpan.newBuilder().setStart(0).setEnd(pages)));
    }

    @Test
    void unauthenticatedCallersAreRefusedOnBothDoors() throws Exception {
        try (OrbitKvClient intruder = OrbitKvClient.connectUnix(running.manager().unixSocket(), "wrong-token-0000000000");
             OrbitKvClient tcpIntruder = OrbitKvClient.connectTcp("127.0.0.1", running.manager().grpcTcpPort(), "")) {
            refused(ErrorReason.UNAUTHENTICATED_CALLER, intruder::ping);
            refused(ErrorReason.UNAUTHENTICATED_CALLER, () -> tcpIntruder.register(RunningManager.identity("m", PAGE).build(), InstanceRole.DECODE));
        }
    }

    static GroupChain chain(List<ByteString> hashes) {
        return GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes).build();
    }
}
