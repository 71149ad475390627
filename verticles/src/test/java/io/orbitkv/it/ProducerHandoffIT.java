package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.OrbitKvException;
import io.orbitkv.protocol.engine.AllocatePublishReply;
import io.orbitkv.protocol.engine.AllocatePublishRequest;
import io.orbitkv.protocol.engine.BlockSpan;
import io.orbitkv.protocol.engine.Demand;
import io.orbitkv.protocol.engine.ErrorReason;
import io.orbitkv.protocol.engine.GroupDemand;
import io.orbitkv.protocol.engine.InstanceRole;
import io.orbitkv.protocol.engine.LeasedPage;
import io.orbitkv.protocol.engine.PageKey;
import io.orbitkv.protocol.engine.Producer;
import io.orbitkv.protocol.engine.PublishSlot;
import io.orbitkv.protocol.engine.QueryReply;
import io.orbitkv.protocol.engine.QueryStatus;
import io.orbitkv.protocol.engine.SlotStatus;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Producer-to-consumer readiness (P/D) on one Manager, two engine sessions over the real gRPC door: a consumer's demand
 * naming a producer session and request waits (PENDING, WAITING_FOR_PRODUCER, holding nothing) until that session
 * seals the pages under that request, then is READY with the producer's bytes; the same keys sealed by another session
 * do not satisfy it; a producer that unregisters or lapses, or a budget that runs out, answers MISS; bad producers are
 * refused typed. RunningManager checks after each test that no lease, pinned byte or outstanding query is left.
 */
@Timeout(120)
class ProducerHandoffIT {
    static final int PAGE = 64 << 10;
    static final int PAGE_TOKENS = 16;
    static final long BUDGET_MS = 15_000;
    static final java.util.concurrent.atomic.AtomicLong OPERATIONS = new java.util.concurrent.atomic.AtomicLong();

    @RegisterExtension
    final RunningManager running = new RunningManager().with("ssd.enabled", "false")
            .with("query.wait-budget-ms", String.valueOf(BUDGET_MS)).with("session.ttl-ms", "1500");

    private static EngineSession register(OrbitKvClient client, InstanceRole role) {
        return client.register(RunningManager.identity("pd-model", PAGE).build(), role).await();
    }

    static Producer producer(EngineSession session, String requestId) {
        return Producer.newBuilder().setInstanceId(session.instanceId())
                .setSessionEpoch(session.session().getSessionEpoch()).setRequestId(requestId).build();
    }

    static Demand demand(String requestId, List<ByteString> hashes, Producer producer, long maxWaitMillis) {
        Demand.Builder d = Demand.newBuilder().setRequestId(requestId).setOperationId(OPERATIONS.incrementAndGet())
                .setPageSizeTokens(PAGE_TOKENS).setSelectedEndTokens((long) hashes.size() * PAGE_TOKENS)
                .addGroups(GroupDemand.newBuilder().setGroupId(0).addAllBlockHashes(hashes)
                        .addRanges(BlockSpan.newBuilder().setStart(0).setEnd(hashes.size())))
                .setMaxWaitMicros(maxWaitMillis * 1000);
        if (producer != null) {
            d.setProducer(producer);
        }
        return d.build();
    }

    /** Publishes the chain's pages under {@code requestId} (bytes from {@code seed}); answers the pages' CRC32C. */
    static List<Integer> publish(EngineSession session, List<ByteString> hashes, String seed, String requestId) {
        List<PageKey> keys = hashes.stream().map(h -> PageKey.newBuilder().setGroupId(0).setBlockHash(h).build()).toList();
        AllocatePublishReply allocated = session.allocate(AllocatePublishRequest.newBuilder().addAllPages(keys)
                .setRequestId(requestId)).await();
        List<Integer> crcs = new ArrayList<>();
        for (int i = 0; i < allocated.getSlotsCount(); i++) {
            PublishSlot slot = allocated.getSlots(i);
            if (slot.getStatus() == SlotStatus.ALLOCATED) {
                MemorySegment target = session.slot(slot.getSlot());
                PublishQueryRestoreIT.fill(target, (seed + i).hashCode());
                crcs.add(PublishQueryRestoreIT.crc(target));
            }
        }
        session.seal(allocated.getPublishId(), crcs).await();
        return crcs;
    }

    static QueryReply settle(EngineSession session, QueryReply first) {
        AtomicReference<QueryReply> last = new AtomicReference<>(first);
        await().atMost(Duration.ofMillis(BUDGET_MS + 10_000)).pollInterval(Duration.ofMillis(10))
                .until(() -> last.updateAndGet(r -> r.getStatus() != QueryStatus.PENDING ? r
                        : session.poll(r.getTicket()).await()).getStatus() != QueryStatus.PENDING);
        return last.get();
    }

    private void assertWaiting(EngineSession consumer, QueryReply reply) throws Exception {
        QueryReply polled = consumer.poll(reply.getTicket()).await();
        assertThat(polled.getStatus()).isEqualTo(QueryStatus.PENDING);
        assertThat(polled.getDetail()).isEqualTo(QueryStatus.WAITING_FOR_PRODUCER);
        assertThat(running.metric("orbitkv_leases_active")).as("a waiting demand holds no lease").isZero();
        assertThat(running.metric("orbitkv_leases_bytes")).as("nor leased bytes").isZero();
        assertThat(running.metric("orbitkv_producer_waiting")).isEqualTo(1.0);
    }

    @Test
    void aConsumerWaitsForItsProducersSealAndReadsItsBytes() throws Exception {
        try (OrbitKvClient client = running.unixClient();
             EngineSession prefill = register(client, InstanceRole.PREFILL);
             EngineSession decode = register(client, InstanceRole.DECODE)) {
            List<ByteString> hashes = RunningManager.chain("pd-ready", 4);
            QueryReply first = decode.submitDemand(demand("req-a", hashes, producer(prefill, "req-a"), BUDGET_MS)).await();
            assertThat(first.getStatus()).isEqualTo(QueryStatus.PENDING);
            assertThat(first.getDetail()).isEqualTo(QueryStatus.WAITING_FOR_PRODUCER);
            long poolUsedWaiting = decode.stats().await().getPoolBytesUsed();
            assertThat(poolUsedWaiting).as("waiting takes no pool bytes").isZero();
            assertWaiting(decode, first);

            List<Integer> crcs = publish(prefill, hashes, "pd-ready", "req-a");
            QueryReply ready = settle(decode, first);
            assertThat(ready.getStatus()).isEqualTo(QueryStatus.READY);
            assertThat(ready.getReadyBlocks()).isEqualTo(4);
            List<LeasedPage> pages = ready.getLease().getPagesList();
            assertThat(pages).hasSize(4);
            for (LeasedPage page : pages) {
                assertThat(PublishQueryRestoreIT.crc(decode.slot(page.getSlot())))
                        .as("page %d holds the producer's bytes", page.getPosition()).isEqualTo(crcs.get(page.getPosition()));
            }
            assertThat(decode.release(ready.getLease().getLeaseId()).await().getLeaseValid()).isTrue();
            assertThat(running.metric("orbitkv_producer_waits_total{outcome=\"satisfied\"}")).isEqualTo(1.0);
            assertThat(running.metric("orbitkv_producer_waiting")).isZero();
            RunningManager.assertNoLeases(decode);
        }
    }

    @Test
    void anotherSessionsPagesDoNotSatisfyItAndAnEndedProducerIsAMissHoldingNothing() throws Exception {
        try (OrbitKvClient client = running.unixClient();
             EngineSession decode = register(client, InstanceRole.DECODE);
             EngineSession other = register(client, InstanceRole.PREFILL)) {
            EngineSession prefill = register(client, InstanceRole.PREFILL);
            List<ByteString> hashes = RunningManager.chain("pd-other", 4);
            QueryReply first = decode.submitDemand(demand("req-b", hashes, producer(prefill, "req-b"), BUDGET_MS)).await();
            // The same keys under the same request id, sealed by another session: still waiting.
            publish(other, hashes, "pd-other", "req-b");
            assertWaiting(decode, first);
            long poolUsed = decode.stats().await().getPoolBytesUsed();
            assertThat(poolUsed).as("the other session's four pages").isPositive();

            long ending = System.nanoTime();
            prefill.close();
            QueryReply miss = settle(decode, first);
            assertThat(miss.getStatus()).isEqualTo(QueryStatus.MISS);
            assertThat(Duration.ofNanos(System.nanoTime() - ending)).isLessThan(Duration.ofMillis(BUDGET_MS));
            assertThat(running.metric("orbitkv_producer_waits_total{outcome=\"producer_ended\"}")).isEqualTo(1.0);
            assertThat(running.metric("orbitkv_producer_waiting")).isZero();
            assertThat(decode.stats().await().getPoolBytesUsed()).as("the wait added no pool bytes").isEqualTo(poolUsed);
            RunningManager.assertNoLeases(decode);
        }
    }

    @Test
    void aLapsedProducerOrASpentBudgetIsAMiss() throws Exception {
        try (OrbitKvClient client = running.unixClient();
             EngineSession decode = register(client, InstanceRole.DECODE);
             EngineSession silent = register(client, InstanceRole.PREFILL)) {
            EngineSession lapsing = register(client, InstanceRole.PREFILL);
            List<ByteString> hashes = RunningManager.chain("pd-lapse", 2);
            QueryReply first = decode.submitDemand(demand("req-c", hashes, producer(lapsing, "req-c"), BUDGET_MS)).await();
            long abandoned = System.nanoTime();
            lapsing.abandon(); // no heartbeat, no unregister: the session lapses after its 1.5 s ttl
            QueryReply miss = settle(decode, first);
            assertThat(miss.getStatus()).isEqualTo(QueryStatus.MISS);
            assertThat(Duration.ofNanos(System.nanoTime() - abandoned)).isLessThan(Duration.ofMillis(BUDGET_MS));
            assertThat(running.metric("orbitkv_producer_waits_total{outcome=\"producer_ended\"}")).isEqualTo(1.0);

            // A live producer that never publishes: MISS once the demand's own 400 ms budget is spent.
            QueryReply waiting = decode.submitDemand(demand("req-d", hashes, producer(silent, "req-d"), 400)).await();
            assertThat(settle(decode, waiting).getStatus()).isEqualTo(QueryStatus.MISS);
            assertThat(running.metric("orbitkv_producer_waits_total{outcome=\"budget_spent\"}")).isEqualTo(1.0);
            RunningManager.assertNoLeases(decode);
        }
    }

    @Test
    void badProducersAreRefusedTypedAndAdmitNothing() throws Exception {
        try (OrbitKvClient client = running.unixClient();
             EngineSession decode = register(client, InstanceRole.DECODE);
             EngineSession prefill = register(client, InstanceRole.PREFILL)) {
            List<ByteString> hashes = RunningManager.chain("pd-bad", 2);
            List<Demand> bad = List.of(
                    demand("bad-1", hashes, producer(decode, "r"), 1000),                                  // itself
                    demand("bad-2", hashes, producer(prefill, "r").toBuilder().setSessionEpoch(0).build(), 1000),
                    demand("bad-3", hashes, producer(prefill, "").toBuilder().build(), 1000),
                    demand("bad-4", hashes, producer(prefill, "x".repeat(129)), 1000),
                    demand("bad-5", hashes, producer(prefill, "r").toBuilder().setMember("Not/A-Member").build(), 1000),
                    demand("bad-6", hashes, producer(prefill, "r").toBuilder().setMember("manager-9").build(), 1000),
                    demand("bad-7", hashes, producer(prefill, "r"), 1000).toBuilder().setSpeculative(true).build());
            for (Demand d : bad) {
                assertThatThrownBy(() -> decode.submitDemand(d).await()).as(d.getRequestId())
                        .isInstanceOfSatisfying(OrbitKvException.class,
                                e -> assertThat(e.reason()).isEqualTo(ErrorReason.INVALID_PRODUCER));
            }
            assertThat(decode.stats().await().getSessionOutstandingQueries()).isZero();
            assertThatThrownBy(() -> prefill.allocate(AllocatePublishRequest.newBuilder().setRequestId("y".repeat(129))
                    .addPages(PageKey.newBuilder().setGroupId(0).setBlockHash(hashes.getFirst()))).await())
                    .isInstanceOfSatisfying(OrbitKvException.class,
                            e -> assertThat(e.reason()).isEqualTo(ErrorReason.MALFORMED_REQUEST));
            assertThat(decode.stats().await().getPoolBytesUsed()).isZero();
        }
    }
}
