package io.orbitkv.planning;

import static io.orbitkv.planning.Fixtures.PAGE_BYTES;
import static io.orbitkv.planning.Fixtures.demand;
import static io.orbitkv.planning.Fixtures.fullAttention;
import static io.orbitkv.planning.Fixtures.key;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.model.cost.ResourceId;
import io.orbitkv.model.cost.ResourceKind;
import io.orbitkv.protocol.engine.RestoreRoute;
import io.orbitkv.restore.RestoreCommands;
import io.orbitkv.model.plan.RestoreTarget;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import io.orbitkv.model.plan.DemandView;
import io.orbitkv.model.plan.EngineDestination;
import io.orbitkv.model.plan.Plan;
import io.orbitkv.model.plan.PlanningException;
import io.orbitkv.model.plan.PlanningFailure;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.model.plan.AttemptWindow;
import io.orbitkv.model.plan.ExecutionOwner;
import io.orbitkv.model.plan.PlannedSegment;
import io.orbitkv.model.plan.SegmentLease;
import io.orbitkv.model.plan.Restored;

/**
 * The executor against a real in-memory owner: acquisition in plan order, submission through the scheduler, fencing
 * of submitted work, and that every failure and cancel leaves no lease or pin behind. Futures complete synchronously
 * here (the owner answers at once unless submissions are held), so no event loop is needed.
 */
class PlanExecutorTest {
    private static final int PAGES = 8;
    private final ManualTicker ticker = new ManualTicker();
    private final ManualTimers timers = new ManualTimers(ticker);
    private final InMemoryReplicas replicas = new InMemoryReplicas();
    private PlanExecutor executor;

    @BeforeEach
    void setUp() {
        executor = executor(TransferScheduler.Settings.uniform(1 << 30, 0.5, 64));
        for (int p = 0; p < PAGES; p++) {
            if (p < 4) {
                replicas.putDram(key(0, p));
            }
            replicas.putSsd(key(0, p));
        }
    }

    private PlanExecutor executor(TransferScheduler.Settings settings) {
        Map<RouteTemplate, ExecutionOwner> owners = new EnumMap<>(RouteTemplate.class);
        for (RouteTemplate route : RouteTemplate.values()) {
            owners.put(route, replicas);
        }
        return new PlanExecutor(owners, settings, ticker, new SimpleMeterRegistry(), timers);
    }

    private Plan plan(DemandView demand) {
        return Planner.plan(demand, replicas.discover(demand), Fixtures.context(RouteCapabilities.localOnly(true),
                Planner.SelectionMode.OFF), ticker.nanos(), Planner.EstimateLookup.NONE).plan();
    }

    private PlanExecutor.Preparation prepare(Plan plan) {
        return executor.prepare(plan, PlanExecutor.Schedule.demandNow(ticker.nanos()));
    }

    private void assertNothingHeld() {
        assertThat(replicas.active).isEmpty();
        assertThat(replicas.pinnedKeys()).isZero();
        assertThat(replicas.violations).isEmpty();
        assertThat(executor.heldLeases()).isZero();
        assertThat(executor.livePreparations()).isZero();
    }

    private static PlanningFailure failureOf(Future<?> future) {
        assertThat(future.failed()).as("failed: %s", future).isTrue();
        return PlanningException.failureOf(future.cause());
    }

    @Test
    void aPreparedPlanHoldsEverySegmentHostReadyUntilReleased() {
        Plan plan = plan(demand(fullAttention(), PAGES));
        Future<PreparedPlan> result = prepare(plan).result();
        assertThat(result.succeeded()).isTrue();
        PreparedPlan prepared = result.result();
        assertThat(prepared.leases()).hasSize(2);
        assertThat(prepared.leases()).allSatisfy(lease -> assertThat(lease.hostPages()).hasSize(4));
        assertThat(replicas.pinnedKeys()).isEqualTo(PAGES);
        assertThat(replicas.submits).isEqualTo(1); // the DRAM segment moves nothing
        assertThat(prepared.release().result()).isEqualTo(2);
        assertThat(prepared.release().result()).isZero();
        assertNothingHeld();
    }

    @Test
    void anEngineRestorePlanBecomesHostReadyThenItsDeviceCopyRunsAndItsSourcesOutliveTheCopies() {
        Promise<Restored> copies = Promise.promise();
        List<RestoreCommands.SourcePage> copied = new ArrayList<>();
        List<EngineDestination> cancelled = new ArrayList<>();
        RestoreOwner restore = new RestoreOwner() {
            @Override
            public Future<Restored> restore(EngineDestination destination,
                                                            List<RestoreCommands.SourcePage> sources) {
                copied.addAll(sources);
                return copies.future();
            }

            @Override
            public void cancel(EngineDestination destination) {
                cancelled.add(destination);
            }
        };
        Map<RouteTemplate, ExecutionOwner> owners = new EnumMap<>(RouteTemplate.class);
        for (RouteTemplate route : RouteTemplate.values()) {
            owners.put(route, replicas);
        }
        CompletionTarget device = CompletionTarget.engineRestore(new ResourceId(ResourceKind.GPU_DEVICE, "cuda:0", 1));
        DemandView demand = demand(fullAttention(), PAGES).withTarget(device);
        Plan plan = Planner.plan(demand, replicas.discover(demand), Fixtures.context(
                RouteCapabilities.localOnly(true).withEngineRestore(Optional.empty()), Planner.SelectionMode.OFF),
                ticker.nanos(), Planner.EstimateLookup.NONE).plan();
        assertThat(plan.target()).as("the plan carries the engine-restore target").isEqualTo(device);
        assertThat(plan.movesPayloadToHost()).isTrue();
        assertThatThrownBy(() -> prepare(plan)).as("no restore owner here")
                .isInstanceOfSatisfying(PlanningException.class,
                        e -> assertThat(e.failure()).isEqualTo(PlanningFailure.TARGET_UNAVAILABLE));

        executor = new PlanExecutor(owners, restore, TransferScheduler.Settings.uniform(1 << 30, 0.5, 64), ticker,
                new SimpleMeterRegistry(), timers);
        PreparedPlan prepared = prepare(plan).result().result();
        assertThat(replicas.submits).as("only the SSD read back: DRAM pages are host-ready as they are").isEqualTo(1);
        EngineDestination destination = new EngineDestination(1, 2,
                new RestoreTarget(1, RestoreRoute.CUDA_IPC, List.of(), 0));
        Future<Restored> restored = prepared.restore(destination);
        assertThat(copied).extracting(RestoreCommands.SourcePage::position).containsExactly(0, 1, 2, 3, 4, 5, 6, 7);
        assertThat(prepared.restore(destination).failed()).as("one device copy per plan").isTrue();

        Future<Integer> released = prepared.release();
        prepared.cancelRestore();
        assertThat(cancelled).containsExactly(destination);
        assertThat(released.isComplete()).as("the copies still read the sources").isFalse();
        assertThat(replicas.pinnedKeys()).isEqualTo(PAGES);
        copies.complete(new Restored(RestoreRoute.CUDA_IPC, PAGES, PAGES * PAGE_BYTES));
        assertThat(restored.succeeded()).isTrue();
        assertThat(released.result()).isEqualTo(2);
        assertNothingHeld();
    }

    @Test
    void staleEvidenceFailsBeforePayloadAndReleasesWhatWasAcquired() {
        Plan plan = plan(demand(fullAttention(), PAGES));
        long regenerated = replicas.putSsd(key(0, 6)); // the ring rewrote page 6's extent after discovery
        Future<PreparedPlan> result = prepare(plan).result();
        assertThat(failureOf(result)).isEqualTo(PlanningFailure.STALE_EVIDENCE);
        PlanningException stale = (PlanningException) result.cause();
        assertThat(stale.page()).hasValueSatisfying(page -> {
            assertThat(page.position()).isEqualTo(6);
            assertThat(page.evidence()).isNotEqualTo(Fixtures.ssd(regenerated));
        });
        assertThat(PlanningFailure.STALE_EVIDENCE.beforePayload()).isTrue();
        assertThat(replicas.granted).hasSize(1); // the DRAM segment, released again
        assertThat(replicas.submits).isZero();
        assertNothingHeld();
    }

    @Test
    void aRejectedSourceReleasesEarlierSegments() {
        replicas.rejectAcquire = segment -> segment.route() == RouteTemplate.HOST_FROM_LOCAL_SSD;
        assertThat(failureOf(prepare(plan(demand(fullAttention(), PAGES))).result()))
                .isEqualTo(PlanningFailure.SOURCE_REJECTED);
        assertNothingHeld();
    }

    @Test
    void aFailedTransferIsFencedAndNeverTriedThroughAnotherMedium() {
        replicas.failSubmit = segment -> true;
        replicas.holdSubmissions = true;
        Plan plan = plan(demand(fullAttention(), PAGES));
        Future<PreparedPlan> result = prepare(plan).result();
        assertThat(result.isComplete()).isFalse();
        replicas.completeHeld();
        assertThat(failureOf(result)).isEqualTo(PlanningFailure.TRANSFER_FAILED);
        assertThat(replicas.acquires).isEqualTo(plan.segments().size());
        assertThat(replicas.submits).isEqualTo(1);
        assertNothingHeld();
    }

    @Test
    void acquiredCompletesOnceEveryLeaseIsHeldAndBeforeAnyTransferFinishes() {
        replicas.holdSubmissions = true;
        PlanExecutor.Preparation preparation = prepare(plan(demand(fullAttention(), PAGES)));
        // Both segments hold their leases; the SSD segment's read is submitted and held: RESERVED, not yet host-ready.
        assertThat(preparation.acquired().result()).isTrue();
        assertThat(replicas.active).hasSize(2);
        assertThat(preparation.result().isComplete()).isFalse();
        replicas.completeHeld();
        assertThat(preparation.result().succeeded()).isTrue();
        assertThat(preparation.result().result().release().result()).isEqualTo(2);
        assertNothingHeld();
    }

    @Test
    void acquiredIsFalseWhenAnAcquisitionIsRefused() {
        replicas.rejectAcquire = segment -> segment.route() != RouteTemplate.LOCAL_DRAM;
        PlanExecutor.Preparation preparation = prepare(plan(demand(fullAttention(), PAGES)));
        assertThat(preparation.acquired().result()).isFalse();
        assertThat(failureOf(preparation.result())).isEqualTo(PlanningFailure.SOURCE_REJECTED);
        assertNothingHeld();
    }

    @Test
    void cancelDrainsSubmittedWorkBeforeReleasing() {
        replicas.holdSubmissions = true;
        PlanExecutor.Preparation preparation = prepare(plan(demand(fullAttention(), PAGES)));
        Future<Void> cancelled = preparation.cancel();
        assertThat(cancelled.isComplete()).isFalse();
        assertThat(replicas.cancelHints).isEqualTo(1);
        assertThat(replicas.active).hasSize(2); // the submitted read keeps its sources and slots
        replicas.completeHeld();
        assertThat(cancelled.succeeded()).isTrue();
        assertThat(failureOf(preparation.result())).isEqualTo(PlanningFailure.CANCELLED);
        assertNothingHeld();
    }

    @Test
    void cancelWhileQueuedReleasesAtOnceWithoutSubmitting() {
        executor = executor(TransferScheduler.Settings.uniform(4 * PAGE_BYTES, 0.5, 64));
        replicas.holdSubmissions = true;
        PlanExecutor.Preparation first = prepare(plan(demand(fullAttention(), PAGES)));
        DemandView other = Fixtures.demand(io.orbitkv.recovery.RecoveryRules.of(Fixtures.PAGE_TOKENS,
                io.orbitkv.recovery.GroupRule.fullAttention(1)), 4);
        for (int p = 0; p < 4; p++) {
            replicas.putSsd(key(1, p));
        }
        PlanExecutor.Preparation second = prepare(plan(other));
        assertThat(replicas.submits).isEqualTo(1); // the medium holds 4 pages: the second read waits
        assertThat(second.cancel().succeeded()).isTrue();
        assertThat(failureOf(second.result())).isEqualTo(PlanningFailure.CANCELLED);
        assertThat(replicas.active).hasSize(2); // only the first preparation's leases remain
        replicas.completeHeld();
        assertThat(first.result().result().release().succeeded()).isTrue();
        assertThat(replicas.submits).isEqualTo(1);
        assertNothingHeld();
    }

    @Test
    void speculationWaitsForItsStartTimeAndADemandReadCanDropIt() {
        executor = executor(TransferScheduler.Settings.uniform(1 << 30, 0.5, 1));
        Plan plan = plan(demand(fullAttention(), PAGES));
        long start = ticker.nanos() + 5_000_000;
        PlanExecutor.Preparation speculative = executor.prepare(plan,
                new PlanExecutor.Schedule(TransferScheduler.TransferClass.SPECULATIVE, start, start, 0));
        assertThat(replicas.submits).isZero();
        assertThat(timers.armed()).isEqualTo(1);
        timers.advance(5_000_000);
        assertThat(speculative.result().succeeded()).isTrue();
        assertThat(speculative.result().result().release().succeeded()).isTrue();
        for (int p = 4; p < PAGES; p++) {
            replicas.evictDram(key(0, p)); // the prefetched pages left DRAM again
        }

        // Queued again for later; a demand read for the same medium finds the one queue slot taken and drops it.
        PlanExecutor.Preparation dropped = executor.prepare(plan(demand(fullAttention(), PAGES)),
                new PlanExecutor.Schedule(TransferScheduler.TransferClass.SPECULATIVE, Long.MAX_VALUE,
                        ticker.nanos() + 1_000_000_000L, 0));
        PlanExecutor.Preparation demandRead = prepare(plan(demand(fullAttention(), PAGES)));
        assertThat(failureOf(dropped.result())).isEqualTo(PlanningFailure.SPECULATION_DROPPED);
        assertThat(demandRead.result().succeeded()).isTrue();
        assertThat(demandRead.result().result().release().succeeded()).isTrue();
        assertNothingHeld();
    }

    @Test
    void aRecomputePlanPreparesNothing() {
        Plan plan = plan(demand(fullAttention(), PAGES).withByteCap(0));
        assertThat(plan.isRecompute()).isTrue();
        Future<PreparedPlan> result = prepare(plan).result();
        assertThat(result.result().leases()).isEmpty();
        assertThat(replicas.acquires).isZero();
        assertNothingHeld();
    }

    @Test
    void eachAcquisitionIsToldWhatIsLeftOfTheDemandsWaitingBudgetAndThePlansEstimate() {
        List<AttemptWindow> windows = new ArrayList<>();
        ExecutionOwner recording = new ExecutionOwner() {
            @Override
            public Future<SegmentLease> acquire(PlannedSegment segment) {
                throw new AssertionError("the executor asks with the window");
            }

            @Override
            public Future<SegmentLease> acquire(PlannedSegment segment, AttemptWindow window) {
                windows.add(window);
                ticker.advance(1_000_000); // the next segment is acquired 1 ms later
                return replicas.acquire(segment);
            }

            @Override
            public Future<SegmentLease> submit(SegmentLease lease) {
                return replicas.submit(lease);
            }

            @Override
            public Future<Boolean> release(SegmentLease lease) {
                return replicas.release(lease);
            }
        };
        Map<RouteTemplate, ExecutionOwner> owners = new EnumMap<>(RouteTemplate.class);
        for (RouteTemplate route : RouteTemplate.values()) {
            owners.put(route, recording);
        }
        PlanExecutor windowed = new PlanExecutor(owners, TransferScheduler.Settings.uniform(1 << 30, 0.5, 64), ticker,
                new SimpleMeterRegistry(), timers);
        Plan plan = plan(demand(fullAttention(), PAGES));
        assertThat(plan.segments()).hasSize(2);
        long deadline = ticker.nanos() + 3_000_000_000L;
        PreparedPlan prepared = windowed.prepare(plan, PlanExecutor.Schedule.demandNow(ticker.nanos()),
                deadline).result().result();
        assertThat(windows).extracting(AttemptWindow::remainingNanos).containsExactly(3_000_000_000L, 2_999_000_000L);
        assertThat(windows).extracting(AttemptWindow::expected).containsOnly(plan.stateReady());
        assertThat(prepared.release().result()).isEqualTo(2);

        // Without a deadline: unbounded.
        windows.clear();
        windowed.prepare(plan, PlanExecutor.Schedule.demandNow(ticker.nanos())).result().result().release();
        assertThat(windows).allSatisfy(w -> assertThat(w.bounded()).isFalse());
        assertThat(replicas.active).isEmpty();
        assertThat(windowed.heldLeases()).isZero();
    }
}
