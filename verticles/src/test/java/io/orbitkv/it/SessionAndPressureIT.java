package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.protocol.engine.*;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

@Timeout(120)
class SessionAndPressureIT {
    static final int PAGE = 1 << 20;

    @RegisterExtension
    final RunningManager running = new RunningManager().with("pool.size", "16MiB").with("session.ttl-ms", "400")
            .with("ssd.enabled", "false"); // DRAM eviction itself: an evicted prefix must stay gone

    static List<PageKey> keys(String seed, int n) throws Exception {
        return PublishQueryRestoreIT.chain(seed, n).stream()
                .map(h -> PageKey.newBuilder().setGroupId(0).setBlockHash(h).build()).toList();
    }

    static int readyBlocks(EngineSession session, List<ByteString> chain) {
        QueryReply reply = session.query(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(chain).build())).await();
        if (reply.getStatus() == QueryStatus.READY) {
            session.release(reply.getLease().getLeaseId()).await();
            return reply.getReadyBlocks();
        }
        return 0;
    }

    @Test
    void aSilentSessionLapsesAndEverythingItHeldIsReleased() throws Exception {
        try (OrbitKvClient client = running.unixClient()) {
            EngineSession silent = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await();
            List<ByteString> hashes = PublishQueryRestoreIT.publish(silent, "lapse", 3);
            QueryReply held = silent.query(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes).build())).await();
            assertThat(held.getStatus()).isEqualTo(QueryStatus.READY);
            silent.allocate(List.of(PageKey.newBuilder().setGroupId(0).setBlockHash(ByteString.copyFromUtf8("open")).build())).await();
            assertThat(running.metric("orbitkv_leases_active")).isEqualTo(1.0);
            silent.abandon(); // no more heartbeats, no unregister: the engine process "died"
            // Its lease ends at once; its slots (the 3 leased pages, the open publish) are quarantined for 2 x ttl,
            // then the open publish's slot is freed.
            await().atMost(Duration.ofSeconds(20)).until(() -> running.metric("orbitkv_instances") == 0.0
                    && running.metric("orbitkv_leases_active") == 0.0 && running.metric("orbitkv_quarantine_events_total") == 4.0);
            await().atMost(Duration.ofSeconds(20)).until(() -> running.metric("orbitkv_quarantine_bytes") == 0.0
                    && running.metric("orbitkv_pool_requested_bytes") == 3.0 * PAGE);
            assertThat(running.metric("orbitkv_images_pinned")).isZero();
            // A live session with heartbeats outlives many ttls.
            try (EngineSession live = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await()) {
                long deadline = System.nanoTime() + Duration.ofMillis(1500).toNanos();
                await().atMost(Duration.ofSeconds(10)).until(() -> System.nanoTime() > deadline);
                assertThat(live.heartbeat().await().getSessionTtlMillis()).isEqualTo(400);
                QueryReply again = live.query(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes).build())).await();
                assertThat(again.getReadyBlocks()).isEqualTo(3);
                live.release(again.getLease().getLeaseId()).await();
            }
        }
    }

    @Test
    void pressureEvictsLeastRecentlyUsedPrefixesButNeverLeasedOnes() throws Exception {
        try (OrbitKvClient client = running.unixClient();
             EngineSession session = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await()) {
            List<ByteString> first = PublishQueryRestoreIT.publish(session, "first", 6);
            QueryReply lease = session.query(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(first).build())).await();
            assertThat(lease.getReadyBlocks()).isEqualTo(6);
            List<ByteString> second = PublishQueryRestoreIT.publish(session, "second", 6);
            // 12 of 16 pages used; publishing 8 more needs room: "second" (unleased) must go, "first" (leased) stays.
            List<ByteString> third = PublishQueryRestoreIT.publish(session, "third", 8);
            assertThat(running.metric("orbitkv_evictions_total")).isGreaterThanOrEqualTo(4.0);
            session.release(lease.getLease().getLeaseId()).await();
            assertThat(readyBlocks(session, first)).as("the leased prefix survived").isEqualTo(6);
            assertThat(readyBlocks(session, second)).as("the unleased, least recently used prefix was evicted").isLessThan(6);
            assertThat(readyBlocks(session, third)).isEqualTo(8);
            // With the leased prefix pinned and 8 pages being written, a publish that cannot fit is refused and
            // evicts nothing that is pinned or being written.
            QueryReply pinned = session.query(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(third).build())).await();
            double evictionsBefore = running.metric("orbitkv_evictions_total");
            AllocatePublishReply open = session.allocate(keys("fourth", 8)).await();
            org.assertj.core.api.Assertions.assertThatThrownBy(() -> session.allocate(keys("fifth", 4)).await())
                    .isInstanceOfSatisfying(io.orbitkv.client.OrbitKvException.class,
                            e -> assertThat(e.reason()).isIn(ErrorReason.POOL_EXHAUSTED, ErrorReason.BUDGET_EXCEEDED));
            assertThat(running.metric("orbitkv_images_pinned")).as("the pinned prefix is intact").isEqualTo(8.0);
            session.abort(open.getPublishId()).await();
            assertThat(running.metric("orbitkv_evictions_total") - evictionsBefore).isLessThanOrEqualTo(8.0);
            RunningManager.assertNoLeasesAfter(session, pinned);
            assertThat(running.metric("orbitkv_images_pinned")).isZero();
        }
    }
}
