package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.OrbitKvException;
import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.model.cost.CostEstimateKey;
import io.orbitkv.model.cost.ObservationOutcome;
import io.orbitkv.model.cost.ObservationRecord;
import io.orbitkv.model.cost.ObservedBytes;
import io.orbitkv.model.cost.RepresentationFamily;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.protocol.engine.Demand;
import io.orbitkv.protocol.engine.ErrorReason;
import io.orbitkv.protocol.engine.GroupDemand;
import io.orbitkv.protocol.engine.InstanceRole;
import io.orbitkv.protocol.engine.QueryReply;
import io.orbitkv.protocol.engine.QueryStatus;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The engine's real demand takes over what its speculative hint prepared, through the real gRPC API: the hint is the
 * request's revision 0 ({@code speculative}, a first use), the real demand its revision 1. Pages 0..3 of "first" are
 * on SSD only (pushed out of the 16 MiB pool), so the hint reads them back. Whether the hint is already RESIDENT or
 * still queued for its start time when the demand arrives, the demand is answered from what the hint prepared: no
 * second plan, no second SSD read, no second DRAM pin. Leases, pinned images and budgets are clean afterwards, and a
 * hint cancelled, or whose session ends, before its demand leaks nothing.
 */
@Timeout(120)
class HintTakeOverIT {
    static final int PAGE = 1 << 20;
    static final int P = 16;
    static final String SSD_READS = "orbitkv_tier_reads_total{tier=\"ssd\"}";
    static final String DRAM_READS = "orbitkv_tier_reads_total{tier=\"dram\"}";

    @RegisterExtension
    final RunningManager running = new RunningManager().with("pool.size", "16MiB").with("ssd.capacity", "96MiB")
            .with("query.speculative-fraction", "0.5").with("cost.observations", "1");

    /** Leaves the 4 pages of "first" on SSD only, the pool full of later prefixes (so DRAM is tight); its chain. */
    List<ByteString> onSsdOnly(EngineSession session) throws Exception {
        List<ByteString> first = PublishQueryRestoreIT.publish(session, "first", 4);
        await().atMost(Duration.ofSeconds(20)).until(() -> running.metric("orbitkv_ssd_keys") >= 4.0);
        PublishQueryRestoreIT.publish(session, "second", 8);
        PublishQueryRestoreIT.publish(session, "third", 8);
        return first;
    }

    static Demand hint(List<ByteString> chain, long firstUseMicros) {
        return real(chain).toBuilder().setRevision(0).setSpeculative(true).setFirstUseMicros(firstUseMicros)
                .setConfidence(1.0f).build();
    }

    static Demand real(List<ByteString> chain) {
        return Demand.newBuilder().setRequestId("r").setRevision(1).setOperationId(11).setPageSizeTokens(P)
                .setValidPrefixTokens(0).setSelectedEndTokens(4L * P).setSelectedGroupId(0)
                .addGroups(GroupDemand.newBuilder().setGroupId(0).addAllBlockHashes(chain)
                        .addRanges(HybridModel.span(0, 4))).build();
    }

    EngineSession register(OrbitKvClient client) {
        return client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await();
    }

    /**
     * The SSD route's estimate for the 4-page batch: 1 ms. With DRAM tight, a hint due in 10 s then waits in the
     * speculative queue until its latest start, about 10 s from now.
     */
    void ssdReadOfFourPagesTakesAMillisecond() {
        CostEstimateKey key = RouteTemplate.HOST_FROM_LOCAL_SSD.costKey(running.manager().planningResources(),
                Optional.empty(), Optional.of(RepresentationFamily.RAW), 4L * PAGE, 4, CompletionTarget.hostReady())
                .orElseThrow();
        long nanos = TimeUnit.MILLISECONDS.toNanos(1);
        await().atMost(Duration.ofSeconds(20)).until(() -> {
            for (int i = 0; i < 16; i++) {
                running.manager().cost().report(ObservationRecord.of(key, ObservationOutcome.SUCCEEDED, nanos,
                        ObservedBytes.logicalOnly(4L * PAGE)));
            }
            return running.manager().cost().estimate(key).await(5, TimeUnit.SECONDS).usable().isPresent();
        });
    }

    double takeOvers(String from) throws Exception {
        return running.metric("orbitkv_queries_takeovers_total{from=\"" + from + "\"}");
    }

    void assertNothingHeld(EngineSession session) throws Exception {
        HybridModel.assertNothingHeld(running, session);
        assertThat(running.metric("orbitkv_leases_speculative_bytes")).as("speculative bytes").isZero();
        assertThat(running.metric("orbitkv_planning_leases")).as("segment leases held by planning").isZero();
        assertThat(running.metric("orbitkv_planning_executing")).as("executions").isZero();
        assertThat(running.metric("orbitkv_planning_queued{medium=\"local_ssd\"}")).as("queued transfers").isZero();
    }

    @Test
    void aResidentHintIsTakenOverWithoutAnotherPlanPinOrRead() throws Exception {
        try (OrbitKvClient client = running.unixClient(); EngineSession session = register(client)) {
            List<ByteString> first = onSsdOnly(session);
            double ssdBefore = running.metric(SSD_READS);
            QueryReply warm = session.demand(hint(first, 20_000)).await();
            assertThat(warm.getStatus()).isEqualTo(QueryStatus.RESIDENT);
            assertThat(running.metric(SSD_READS) - ssdBefore).as("the hint read the 4 pages").isEqualTo(4.0);
            double ssdWarm = running.metric(SSD_READS);
            double dramWarm = running.metric(DRAM_READS);

            QueryReply ready = session.submitDemand(real(first)).await();
            assertThat(ready.getStatus()).as("READY at once, no PENDING round").isEqualTo(QueryStatus.READY);
            assertThat(ready.getBoundaryTokens()).isEqualTo(4L * P);
            assertThat(ready.getLease().getPagesList()).extracting(p -> p.getPosition()).containsExactly(0, 1, 2, 3);
            assertThat(ready.getLease().getLeaseId()).isNotEqualTo(warm.getLease().getLeaseId());
            SsdTierIT.verify(session, ready, "first");
            assertThat(running.metric(SSD_READS)).as("no second SSD read").isEqualTo(ssdWarm);
            assertThat(running.metric(DRAM_READS)).as("no second DRAM pin").isEqualTo(dramWarm);
            assertThat(takeOvers("resident")).isEqualTo(1.0);
            assertThat(running.metric("orbitkv_leases_speculative_bytes")).as("the hint's charge moved").isZero();
            assertThat(running.metric("orbitkv_leases_bytes")).isEqualTo(4.0 * PAGE);

            // The hint's lease ended once, when the demand took it over: it cannot be released again.
            OrbitKvException ended = HybridModel.refused(() -> session.release(warm.getLease().getLeaseId()));
            assertThat(ended.reason()).isEqualTo(ErrorReason.UNKNOWN_LEASE);
            session.release(ready.getLease().getLeaseId()).await();
            assertNothingHeld(session);
        }
    }

    @Test
    void aDemandJoinsAHintStillQueuedInsteadOfReadingAgain() throws Exception {
        try (OrbitKvClient client = running.unixClient(); EngineSession session = register(client)) {
            List<ByteString> first = onSsdOnly(session);
            ssdReadOfFourPagesTakesAMillisecond();
            double ssdBefore = running.metric(SSD_READS);
            QueryReply queued = session.submitDemand(hint(first, TimeUnit.SECONDS.toMicros(10))).await();
            assertThat(queued.getStatus()).isEqualTo(QueryStatus.PENDING);

            long start = System.nanoTime();
            QueryReply ready = session.demand(real(first)).await();
            long waitedMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            assertThat(ready.getStatus()).isEqualTo(QueryStatus.READY);
            assertThat(ready.getBoundaryTokens()).isEqualTo(4L * P);
            // Joined and promoted to a demand read: it did not wait for the hint's start time 10 s away.
            assertThat(waitedMillis).as("waited for the hint's start time").isLessThan(5_000);
            SsdTierIT.verify(session, ready, "first");
            assertThat(running.metric(SSD_READS) - ssdBefore).as("one read of the 4 pages").isEqualTo(4.0);
            assertThat(takeOvers("in_flight")).isEqualTo(1.0);
            assertThat(running.metric("orbitkv_planning_queue_wait_seconds_count{class=\"demand\"}"))
                    .as("the hint's transfer ran as a demand read").isGreaterThanOrEqualTo(1.0);
            session.release(ready.getLease().getLeaseId()).await();
            assertNothingHeld(session);
        }
    }

    @Test
    void aHintCancelledWhileQueuedLeaksNothingAndItsDemandReadsOnItsOwn() throws Exception {
        try (OrbitKvClient client = running.unixClient(); EngineSession session = register(client)) {
            List<ByteString> first = onSsdOnly(session);
            ssdReadOfFourPagesTakesAMillisecond();
            double ssdBefore = running.metric(SSD_READS);
            QueryReply queued = session.submitDemand(hint(first, TimeUnit.SECONDS.toMicros(10))).await();
            assertThat(queued.getStatus()).isEqualTo(QueryStatus.PENDING);
            session.cancel(queued.getTicket()).await();
            assertNothingHeld(session);
            assertThat(running.metric(SSD_READS)).as("the cancelled hint read nothing").isEqualTo(ssdBefore);

            QueryReply ready = session.demand(real(first)).await();
            assertThat(ready.getStatus()).isEqualTo(QueryStatus.READY);
            SsdTierIT.verify(session, ready, "first");
            assertThat(running.metric(SSD_READS) - ssdBefore).isEqualTo(4.0);
            assertThat(takeOvers("in_flight") + takeOvers("resident")).isZero();
            session.release(ready.getLease().getLeaseId()).await();
            assertNothingHeld(session);
        }
    }

    @Test
    void aQueuedHintWhoseSessionEndsIsDroppedAtOnceAndLeaksNothing() throws Exception {
        try (OrbitKvClient client = running.unixClient(); EngineSession session = register(client)) {
            List<ByteString> first = onSsdOnly(session);
            ssdReadOfFourPagesTakesAMillisecond();
            double ssdBefore = running.metric(SSD_READS);
            QueryReply queued = session.submitDemand(hint(first, TimeUnit.SECONDS.toMicros(10))).await();
            assertThat(queued.getStatus()).isEqualTo(QueryStatus.PENDING);
            // Unregister ends the session (close() then only unmaps the pool).
            long start = System.nanoTime();
            assertThat(session.unregister().await().getCancelledQueries()).isEqualTo(1);
            assertThat(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start))
                    .as("the session's end did not wait for the hint's start time").isLessThan(5_000);
            assertThat(running.metric("orbitkv_leases_active")).isZero();
            assertThat(running.metric("orbitkv_images_pinned")).isZero();
            assertThat(running.metric("orbitkv_leases_speculative_bytes")).isZero();
            assertThat(running.metric("orbitkv_planning_leases")).isZero();
            assertThat(running.metric("orbitkv_planning_executing")).isZero();
            assertThat(running.metric("orbitkv_planning_queued{medium=\"local_ssd\"}")).isZero();
            assertThat(running.metric(SSD_READS)).as("the dropped hint read nothing").isEqualTo(ssdBefore);
        }
    }

    @Test
    void aResidentHintCancelledBeforeItsDemandEndsOnceAndTheDemandPlansAgain() throws Exception {
        try (OrbitKvClient client = running.unixClient(); EngineSession session = register(client)) {
            List<ByteString> first = onSsdOnly(session);
            QueryReply warm = session.demand(hint(first, 20_000)).await();
            assertThat(warm.getStatus()).isEqualTo(QueryStatus.RESIDENT);
            session.cancel(warm.getTicket()).await();
            assertNothingHeld(session);
            assertThat(HybridModel.refused(() -> session.release(warm.getLease().getLeaseId())).reason())
                    .isEqualTo(ErrorReason.UNKNOWN_LEASE);

            QueryReply ready = session.demand(real(first)).await();
            assertThat(ready.getStatus()).isEqualTo(QueryStatus.READY);
            SsdTierIT.verify(session, ready, "first");
            assertThat(takeOvers("in_flight") + takeOvers("resident")).isZero();
            session.release(ready.getLease().getLeaseId()).await();
            assertNothingHeld(session);
        }
    }

    @Test
    void aDemandTheHintDoesNotCoverEndsTheHintsLeaseAndPlansAfresh() throws Exception {
        try (OrbitKvClient client = running.unixClient(); EngineSession session = register(client)) {
            List<ByteString> first = onSsdOnly(session);
            QueryReply warm = session.demand(hint(first, 20_000)).await();
            assertThat(warm.getStatus()).isEqualTo(QueryStatus.RESIDENT);
            // The demand selects only 2 pages: the hint's 4-page boundary lies beyond it.
            Demand shorter = real(first).toBuilder().setSelectedEndTokens(2L * P).clearGroups()
                    .addGroups(GroupDemand.newBuilder().setGroupId(0).addAllBlockHashes(first.subList(0, 2))
                            .addRanges(HybridModel.span(0, 2))).build();
            QueryReply ready = session.demand(shorter).await();
            assertThat(ready.getStatus()).isEqualTo(QueryStatus.READY);
            assertThat(ready.getBoundaryTokens()).isEqualTo(2L * P);
            assertThat(takeOvers("in_flight") + takeOvers("resident")).isZero();
            assertThat(running.metric("orbitkv_leases_bytes")).isEqualTo(2.0 * PAGE);
            session.release(ready.getLease().getLeaseId()).await();
            assertNothingHeld(session);
        }
    }
}
