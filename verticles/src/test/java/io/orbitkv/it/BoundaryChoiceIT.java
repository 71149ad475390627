package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.model.cost.CostEstimateKey;
import io.orbitkv.model.cost.ObservationOutcome;
import io.orbitkv.model.cost.ObservationRecord;
import io.orbitkv.model.cost.ObservedBytes;
import io.orbitkv.model.cost.RepresentationFamily;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.protocol.engine.BoundaryReason;
import io.orbitkv.protocol.engine.Demand;
import io.orbitkv.protocol.engine.GroupDemand;
import io.orbitkv.protocol.engine.InstanceRole;
import io.orbitkv.protocol.engine.QueryReply;
import io.orbitkv.protocol.engine.QueryStatus;
import io.orbitkv.protocol.engine.RegisterRequest;
import io.orbitkv.protocol.engine.Route;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Boundary choice with a declared prefill rate, through the real gRPC API: pages 0..3 of a prefix are in DRAM, 4..7
 * only on SSD. The planner compares first_token = max(admission, state_ready) + remaining_prefill for the longest legal
 * boundary (8 pages: an SSD read of 4 pages) and the shorter ones (4 pages from DRAM: ready at once; recomputing all).
 * The SSD route's complete-route estimate comes from the cost role, fed here with known samples. When reading the 4
 * pages is estimated slower than recomputing them, the short DRAM boundary wins (EARLIER_FIRST_TOKEN); when it is
 * faster, the longest one stands (LONGEST) and is read back from SSD.
 */
@Timeout(120)
class BoundaryChoiceIT {
    static final int PAGE = 1 << 20;
    static final int P = 16;

    @RegisterExtension
    final RunningManager running = new RunningManager().with("pool.size", "16MiB").with("ssd.capacity", "96MiB")
            .with("cost.observations", "1");

    /** Registers with a prefill rate, leaves pages 0..3 of "first" in DRAM and 4..7 on SSD only; returns its chain. */
    List<ByteString> dramShortSsdLong(EngineSession session) throws Exception {
        List<ByteString> first = PublishQueryRestoreIT.publish(session, "first", 8);
        await().atMost(Duration.ofSeconds(20)).until(() -> running.metric("orbitkv_ssd_keys") >= 8.0);
        // Push "first" out of the 16 MiB pool, then read its first 4 pages back into DRAM.
        PublishQueryRestoreIT.publish(session, "second", 8);
        PublishQueryRestoreIT.publish(session, "third", 8);
        QueryReply back = session.query(List.of(SsdTierIT.chain(first.subList(0, 4)))).await();
        assertThat(back.getStatus()).isEqualTo(QueryStatus.READY);
        session.release(back.getLease().getLeaseId()).await();
        return first;
    }

    /**
     * The SSD route's estimate for a 4-page batch, fed with samples of {@code nanos} until the cost role uses it. The
     * real read-back in {@link #dramShortSsdLong} reports a sample under the same key (its duration depends on the
     * machine's load), so samples are fed in rounds until the estimate is within half of {@code nanos}.
     */
    void ssdReadOfFourPagesTakes(long nanos) {
        CostEstimateKey key = RouteTemplate.HOST_FROM_LOCAL_SSD.costKey(running.manager().planningResources(),
                Optional.empty(), Optional.of(RepresentationFamily.RAW), 4L * PAGE, 4, CompletionTarget.hostReady())
                .orElseThrow();
        await().atMost(Duration.ofSeconds(20)).until(() -> {
            for (int i = 0; i < 16; i++) {
                running.manager().cost().report(ObservationRecord.of(key, ObservationOutcome.SUCCEEDED, nanos,
                        ObservedBytes.logicalOnly(4L * PAGE)));
            }
            return running.manager().cost().estimate(key).await(5, TimeUnit.SECONDS).usable()
                    .filter(e -> Math.abs(e.predictedNanos() - nanos) < nanos / 2).isPresent();
        });
    }

    static Demand demand(List<ByteString> chain, double prefillTokensPerSecond) {
        return Demand.newBuilder().setRequestId("boundary").setRevision(0).setOperationId(7).setPageSizeTokens(P)
                .setValidPrefixTokens(0).setSelectedEndTokens(8L * P).setSelectedGroupId(0)
                .setPrefillTokensPerSecond(prefillTokensPerSecond)
                .addGroups(GroupDemand.newBuilder().setGroupId(0).addAllBlockHashes(chain)
                        .addRanges(HybridModel.span(0, 8))).build();
    }

    EngineSession register(OrbitKvClient client, double prefillTokensPerSecond) {
        return client.register(RegisterRequest.newBuilder().setIdentity(RunningManager.identity("model-a", PAGE))
                .setRole(InstanceRole.DECODE).setPrefillTokensPerSecond(prefillTokensPerSecond).build()).await();
    }

    @Test
    void aShortDramBoundaryBeatsALongerSsdOneWhenRecomputingTheDifferenceIsFaster() throws Exception {
        // Registered rate 3200 tokens/s: recomputing pages 4..7 (64 tokens) takes 20 ms; reading them takes ~2 s.
        try (OrbitKvClient client = running.unixClient(); EngineSession session = register(client, 3200)) {
            List<ByteString> first = dramShortSsdLong(session);
            ssdReadOfFourPagesTakes(TimeUnit.SECONDS.toNanos(2));
            double ssdReadsBefore = running.metric("orbitkv_tier_reads_total{tier=\"ssd\"}");
            QueryReply ready = session.demand(demand(first, 0)).await();
            assertThat(ready.getStatus()).isEqualTo(QueryStatus.READY);
            assertThat(ready.getBoundaryTokens()).as("the DRAM boundary").isEqualTo(4L * P);
            assertThat(ready.getBoundaryReason()).isEqualTo(BoundaryReason.EARLIER_FIRST_TOKEN);
            assertThat(ready.getLease().getPagesList()).extracting(p -> p.getPosition()).containsExactly(0, 1, 2, 3);
            SsdTierIT.verify(session, ready, "first");
            assertThat(running.metric("orbitkv_tier_reads_total{tier=\"ssd\"}")).as("nothing read from SSD")
                    .isEqualTo(ssdReadsBefore);
            session.release(ready.getLease().getLeaseId()).await();
            RunningManager.assertNoLeases(session);
        }
    }

    @Test
    void theLongerSsdBoundaryWinsWhenReadingIsFasterThanRecomputing() throws Exception {
        // Registered 3200 tokens/s, overridden by the demand: 16 tokens/s, so recomputing 64 tokens takes 4 s; the
        // read is estimated at 1 ms.
        try (OrbitKvClient client = running.unixClient(); EngineSession session = register(client, 3200)) {
            List<ByteString> first = dramShortSsdLong(session);
            ssdReadOfFourPagesTakes(TimeUnit.MILLISECONDS.toNanos(1));
            QueryReply ready = session.demand(demand(first, 16)).await();
            assertThat(ready.getStatus()).isEqualTo(QueryStatus.READY);
            assertThat(ready.getBoundaryTokens()).as("the longest boundary, through SSD").isEqualTo(8L * P);
            assertThat(ready.getBoundaryReason()).isEqualTo(BoundaryReason.LONGEST);
            SsdTierIT.verify(session, ready, "first");
            // The SSD read went through the planning role's transfer queue as a demand read.
            assertThat(running.metric("orbitkv_planning_queue_wait_seconds_count{class=\"demand\"}"))
                    .isGreaterThanOrEqualTo(1.0);
            assertThat(running.metric("orbitkv_planning_outstanding_bytes{medium=\"local_ssd\"}")).isZero();
            session.release(ready.getLease().getLeaseId()).await();
            RunningManager.assertNoLeases(session);
        }
    }

    @Test
    void withoutARateTheLongestBoundaryStandsWhateverTheEstimates() throws Exception {
        try (OrbitKvClient client = running.unixClient(); EngineSession session = register(client, 0)) {
            List<ByteString> first = dramShortSsdLong(session);
            ssdReadOfFourPagesTakes(TimeUnit.SECONDS.toNanos(2));
            QueryReply ready = session.demand(demand(first, 0)).await();
            assertThat(ready.getBoundaryTokens()).isEqualTo(8L * P);
            assertThat(ready.getBoundaryReason()).isEqualTo(BoundaryReason.LONGEST);
            session.release(ready.getLease().getLeaseId()).await();
            RunningManager.assertNoLeases(session);
        }
    }

    @Test
    void anExplicitRouteThatCannotRunFailsClosedAndAnExecutableOneIsUsed() throws Exception {
        try (OrbitKvClient client = running.unixClient(); EngineSession session = register(client, 0)) {
            List<ByteString> first = dramShortSsdLong(session);
            double ssdReadsBefore = running.metric("orbitkv_tier_reads_total{tier=\"ssd\"}");
            io.orbitkv.client.OrbitKvException refused = HybridModel.refused(() -> session.submitDemand(
                    demand(first, 0).toBuilder().setRequestedRoute(Route.ROUTE_HOST_FROM_PEER_DRAM).build()));
            assertThat(refused.reason()).isEqualTo(io.orbitkv.protocol.engine.ErrorReason.ROUTE_UNAVAILABLE);
            assertThat(refused.getMessage()).contains("peer");
            RunningManager.assertNoLeases(session);
            assertThat(running.metric("orbitkv_tier_reads_total{tier=\"ssd\"}")).as("nothing read for it")
                    .isEqualTo(ssdReadsBefore);
            // Local SSD is executable here: the demand uses it (and DRAM), reaching the longest boundary.
            QueryReply ready = session.demand(demand(first, 0).toBuilder().setRevision(1)
                    .setRequestedRoute(Route.ROUTE_HOST_FROM_LOCAL_SSD).build()).await();
            assertThat(ready.getBoundaryTokens()).isEqualTo(8L * P);
            SsdTierIT.verify(session, ready, "first");
            session.release(ready.getLease().getLeaseId()).await();
            RunningManager.assertNoLeases(session);
        }
    }
}
