package io.orbitkv.planning;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.recovery.GroupRule;
import io.orbitkv.recovery.RecoveryRules;
import io.orbitkv.model.StateKey;
import io.vertx.core.Future;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import io.orbitkv.model.plan.DemandView;
import io.orbitkv.model.plan.Plan;
import io.orbitkv.model.plan.PlanningException;
import io.orbitkv.model.plan.PlanningFailure;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.model.plan.ExecutionOwner;
import io.orbitkv.model.plan.PlannedPage;
import io.orbitkv.model.plan.PlannedSegment;
import io.orbitkv.model.plan.Medium;

/**
 * Executor invariants against the in-memory owner under random faults: evidence going stale between planning and
 * acquisition, refused sources, failed transfers, held submissions, cancellation at random moments, tight queues and
 * speculative transfers. Whatever happens: no lease or pin outlives the preparation (or the prepared plan's release),
 * no lease ever covers a page outside the plan's required ranges, nothing is released while its submission runs, and
 * a failure before payload never submitted anything.
 */
class PlanExecutorProperties {
    static final int CASES = 800;

    static java.util.stream.LongStream seeds() {
        return Seeded.seeds(CASES);
    }

    @ParameterizedTest(name = "seed {0}")
    @MethodSource("seeds")
    void revalidationFailuresAndCancelsNeverLeaveALeaseBehind(long seed) {
        Seeded.check(seed, random -> run(random));
    }

    private static void run(Random random) {
        ManualTicker ticker = new ManualTicker();
        ManualTimers timers = new ManualTimers(ticker);
        InMemoryReplicas replicas = new InMemoryReplicas();
        RecoveryRules rules = Scenarios.rules(random);
        int pages = 1 + random.nextInt(12);
        for (GroupRule rule : rules.groups()) {
            for (int p = 0; p < pages; p++) {
                StateKey key = Fixtures.key(rule.groupId(), p);
                if (random.nextInt(3) > 0) {
                    replicas.putDram(key);
                }
                if (random.nextInt(3) > 0) {
                    replicas.putSsd(key);
                }
                if (random.nextInt(4) == 0) {
                    replicas.putPeer(random.nextBoolean() ? Medium.PEER_DRAM : Medium.PEER_SSD,
                            random.nextBoolean() ? Fixtures.PEER_A : Fixtures.PEER_B, key);
                }
            }
        }
        DemandView demand = Fixtures.demand(rules, pages);
        Plan plan = Planner.plan(demand, replicas.discover(demand), Fixtures.context(RouteCapabilities.all()
                        .withEngineRestore(java.util.Optional.empty()), Planner.SelectionMode.OFF), ticker.nanos(),
                Planner.EstimateLookup.NONE).plan();

        // Faults after planning, before acquisition.
        if (random.nextInt(3) == 0) {
            for (PlannedSegment segment : plan.segments()) {
                for (PlannedPage page : segment.pages()) {
                    if (random.nextInt(8) == 0) {
                        switch (page.evidence().medium()) {
                            case LOCAL_DRAM -> replicas.evictDram(page.key());
                            case LOCAL_SSD -> replicas.putSsd(page.key());
                            case PEER_DRAM, PEER_SSD -> replicas.putPeer(page.evidence().medium(),
                                    page.evidence().peerOwner().orElseThrow(), page.key());
                        }
                    }
                }
            }
        }
        int rejectOneIn = random.nextInt(4) == 0 ? 1 + random.nextInt(3) : 0;
        replicas.rejectAcquire = segment -> rejectOneIn > 0 && random.nextInt(rejectOneIn) == 0;
        replicas.failSubmit = segment -> random.nextInt(5) == 0;
        replicas.holdSubmissions = random.nextBoolean();

        Map<RouteTemplate, ExecutionOwner> owners = new EnumMap<>(RouteTemplate.class);
        for (RouteTemplate route : RouteTemplate.values()) {
            owners.put(route, replicas);
        }
        long limit = 1 + random.nextInt(4 * 8192);
        PlanExecutor executor = new PlanExecutor(owners, TransferScheduler.Settings.uniform(limit,
                random.nextDouble(), 1 + random.nextInt(4)), ticker, new SimpleMeterRegistry(), timers);
        boolean speculative = random.nextBoolean();
        long now = ticker.nanos();
        PlanExecutor.Schedule schedule = speculative
                ? new PlanExecutor.Schedule(TransferScheduler.TransferClass.SPECULATIVE, now + 1_000_000,
                now + random.nextInt(2_000_000), 0)
                : PlanExecutor.Schedule.demandNow(now);
        PlanExecutor.Preparation preparation = executor.prepare(plan, schedule);
        // A competing demand read of the same plan shape may preempt speculation in a tiny queue.
        PlanExecutor.Preparation competitor = random.nextInt(3) == 0
                ? executor.prepare(plan, PlanExecutor.Schedule.demandNow(now)) : null;
        boolean cancel = random.nextInt(3) == 0;
        for (int step = 0; step < 50; step++) {
            if (cancel && random.nextInt(3) == 0) {
                preparation.cancel();
            }
            timers.advance(random.nextInt(1_000_000));
            if (!replicas.held.isEmpty()) {
                replicas.held.poll().run();
            }
            if (preparation.result().isComplete() && (competitor == null || competitor.result().isComplete())) {
                break;
            }
        }
        while (!replicas.held.isEmpty()) {
            replicas.held.poll().run();
        }
        timers.advance(10_000_000);
        while (!replicas.held.isEmpty()) {
            replicas.held.poll().run();
        }
        for (PlanExecutor.Preparation p : competitor == null ? List.of(preparation) : List.of(preparation, competitor)) {
            Future<PreparedPlan> result = p.result();
            assertThat(result.isComplete()).as("preparation finished").isTrue();
            if (result.failed()) {
                PlanningFailure failure = PlanningException.failureOf(result.cause());
                assertThat(failure).isNotNull().isIn(PlanningFailure.STALE_EVIDENCE, PlanningFailure.SOURCE_REJECTED,
                        PlanningFailure.TRANSFER_FAILED, PlanningFailure.CANCELLED, PlanningFailure.SPECULATION_DROPPED,
                        PlanningFailure.QUEUE_FULL);
            } else {
                assertThat(result.result().leases()).hasSize(plan.segments().size());
                result.result().release();
            }
        }
        // Nothing left behind, nothing leased outside the plan, no release during a submission.
        assertThat(replicas.active).isEmpty();
        assertThat(replicas.pinnedKeys()).isZero();
        assertThat(replicas.violations).isEmpty();
        assertThat(executor.heldLeases()).isZero();
        assertThat(executor.livePreparations()).isZero();
        for (PlannedSegment granted : replicas.granted) {
            assertThat(plan.segments()).contains(granted);
        }
        assertThat(executor.scheduler().outstandingBytes(Medium.LOCAL_SSD)).isZero();
        for (Medium medium : Medium.values()) {
            assertThat(executor.scheduler().queued(medium)).isZero();
        }
    }
}
