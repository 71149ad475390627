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

/** With cost observation switched on, real queries train complete-route samples that show on the real /metrics. */
@Timeout(120)
class CostObservationIT {
    static final int PAGE = 64 * 1024;

    @RegisterExtension
    final RunningManager running = new RunningManager().with("cost.observations", "1").with("query.wait-budget-ms", "300");

    @Test
    void hostReadyRoutesAppearOnMetricsWithoutIdentities() throws Exception {
        try (OrbitKvClient client = running.unixClient();
             EngineSession session = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await()) {
            List<ByteString> hashes = PublishQueryRestoreIT.publish(session, "cost", 8);
            for (int i = 0; i < 5; i++) {
                QueryReply reply = session.query(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes).build())).await();
                assertThat(reply.getStatus()).isEqualTo(QueryStatus.READY);
                session.release(reply.getLease().getLeaseId()).await();
            }
            String succeeded = "orbitkv_cost_operations_total{outcome=\"succeeded\",path=\"host_ready_route\"}";
            await().atMost(Duration.ofSeconds(10)).until(() -> running.scrape().contains(succeeded)
                    && running.metric(succeeded) == 5.0);
            String scrape = running.scrape();
            assertThat(scrape).contains("orbitkv_cost_stage_seconds_bucket");
            // Switched off at run time, the same work is no longer observed.
            running.manager().cost().setObservationsEnabled(false);
            QueryReply unobserved = session.query(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes).build())).await();
            session.release(unobserved.getLease().getLeaseId()).await();
            running.manager().cost().setObservationsEnabled(true);
            QueryReply observed = session.query(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes).build())).await();
            session.release(observed.getLease().getLeaseId()).await();
            // The queue is ordered: once the later, observed query is counted, the unobserved one would have been too.
            await().atMost(Duration.ofSeconds(10)).until(() -> running.metric(succeeded) >= 6.0);
            assertThat(running.metric(succeeded)).isEqualTo(6.0);
            // No key, namespace, hash or incarnation ever becomes a label value.
            assertThat(scrape).doesNotContain(hex(hashes.get(0))).doesNotContain("dram-pool");
        }
    }

    @Test
    void aWaitingBudgetThatRunsOutIsCensoredNeverADuration() throws Exception {
        try (OrbitKvClient client = running.unixClient();
             EngineSession session = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await()) {
            List<ByteString> hashes = PublishQueryRestoreIT.publish(session, "slow", 3);
            List<ByteString> longer = new java.util.ArrayList<>(hashes);
            longer.add(PublishQueryRestoreIT.chain("slow-tail", 1).get(0));
            // The 4th page is being written and never sealed: the query waits for it, then settles on 3 pages.
            AllocatePublishReply open = session.allocate(List.of(PageKey.newBuilder().setGroupId(0)
                    .setBlockHash(longer.get(3)).build())).await();
            QueryReply reply = session.query(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(longer).build())).await();
            assertThat(reply.getStatus()).isEqualTo(QueryStatus.READY);
            assertThat(reply.getReadyBlocks()).isEqualTo(3);
            session.release(reply.getLease().getLeaseId()).await();
            session.abort(open.getPublishId()).await();
            String timedOut = "orbitkv_cost_operations_total{outcome=\"timed_out\",path=\"host_ready_route\"}";
            await().atMost(Duration.ofSeconds(10)).until(() -> running.scrape().contains(timedOut) && running.metric(timedOut) >= 1.0);
            // Censored: no total-time sample was recorded for the timed-out route.
            assertThat(running.scrape()).doesNotContain("orbitkv_cost_stage_seconds_count{outcome=\"timed_out\",path=\"host_ready_route\",stage=\"total\"}");
        }
    }

    static String hex(ByteString bytes) {
        return java.util.HexFormat.of().formatHex(bytes.toByteArray());
    }
}
