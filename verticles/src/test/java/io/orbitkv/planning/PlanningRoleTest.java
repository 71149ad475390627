package io.orbitkv.planning;

import static io.orbitkv.planning.Fixtures.PEER_A;
import static io.orbitkv.planning.Fixtures.demand;
import static io.orbitkv.planning.Fixtures.fullAttention;
import static io.orbitkv.planning.Fixtures.key;
import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.vertx.core.Future;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import io.orbitkv.model.plan.DemandView;
import io.orbitkv.model.plan.Plan;
import io.orbitkv.model.plan.PlanningException;
import io.orbitkv.model.plan.PlanningFailure;
import io.orbitkv.model.plan.PreparationResult;
import io.orbitkv.model.plan.PreparationCallbacks;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.model.plan.DemandEvidence;
import io.orbitkv.model.plan.EvidenceSource;
import io.orbitkv.model.plan.ExecutionOwner;
import io.orbitkv.model.plan.PlannedSegment;
import io.orbitkv.model.plan.SegmentLease;
import io.orbitkv.model.plan.Medium;

/**
 * A demand's preparation, the one path admission uses: plan → admit → acquire → execute with bounded replans, against
 * the in-memory owner and discovery over its state, with an admission side that admits every plan.
 */
class PlanningRoleTest {
    private static final int PAGES = 8;
    private final ManualTicker ticker = new ManualTicker();
    private final InMemoryReplicas replicas = new InMemoryReplicas();
    private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    private final AtomicInteger discoveries = new AtomicInteger();

    private PlanningRole role(RouteCapabilities capabilities, EvidenceSource evidence) {
        Map<RouteTemplate, ExecutionOwner> owners = new EnumMap<>(RouteTemplate.class);
        for (RouteTemplate route : RouteTemplate.values()) {
            owners.put(route, replicas);
        }
        PlanExecutor executor = new PlanExecutor(owners, TransferScheduler.Settings.uniform(1 << 30, 0.5, 64), ticker,
                registry, new ManualTimers(ticker));
        return new PlanningRole(capabilities, owner -> owner.equals(PEER_A), Fixtures.RESOURCES, demand -> {
            discoveries.incrementAndGet();
            return evidence.discover(demand);
        }, EstimateSource.NONE, executor, ticker, registry);
    }

    /** Admission's side: every plan's bytes are admitted; progress is not needed here. */
    private static final PreparationCallbacks ADMIT_ALL = new PreparationCallbacks() {
        @Override
        public Future<Boolean> admit(Plan plan) {
            return Future.succeededFuture(true);
        }

        @Override
        public void moving(Stage stage) {
        }

        @Override
        public void copying(Plan plan, List<PreparationResult.HeldGroup> held) {
        }
    };

    private PlanningHandlers handlers;

    private Future<PreparationResult> prepare(PlanningRole role, DemandView demand) {
        handlers = new PlanningHandlers(role, () -> Future.succeededFuture(false));
        return handlers.prepare(new PlanningCommands.Prepare(1, demand, Optional.empty(), 0, ADMIT_ALL));
    }

    private void release() {
        assertThat(handlers.release(1, false).result()).isPositive();
    }

    private void ssdPages() {
        for (int p = 0; p < PAGES; p++) {
            replicas.putSsd(key(0, p));
        }
    }

    private void assertNothingHeld(PlanningRole role) {
        assertThat(replicas.active).isEmpty();
        assertThat(replicas.pinnedKeys()).isZero();
        assertThat(replicas.violations).isEmpty();
        assertThat(role.executor().heldLeases()).isZero();
        if (handlers != null) {
            assertThat(handlers.stats()).isEqualTo(new PlanningCommands.PlanningStats(0, 0, 0));
        }
    }

    private double replans(String cause) {
        return registry.counter("orbitkv.planning.replans", "cause", cause).count();
    }

    private double shortHits() {
        return registry.counter("orbitkv.planning.short.hits").count();
    }

    /** Transfers the scheduler dispatched (each records its queue wait once). */
    private long scheduled() {
        return registry.find("orbitkv.planning.queue.wait").timers().stream().mapToLong(t -> t.count()).sum();
    }

    @Test
    void aLocalDramHitIsPinnedInOneStepWithoutTheTransferQueues() {
        for (int p = 0; p < PAGES; p++) {
            replicas.putDram(key(0, p));
        }
        PlanningRole role = role(RouteCapabilities.localOnly(true), replicas.evidence());
        Future<PreparationResult> result = prepare(role, demand(fullAttention(), PAGES));
        assertThat(result.succeeded()).isTrue();
        assertThat(result.result().kind()).isEqualTo(PreparationResult.Kind.HOST_READY);
        assertThat(result.result().plan().segments()).extracting(s -> s.route() + s.range().toString())
                .containsExactly("LOCAL_DRAM[0, 8)");
        assertThat(result.result().held().getFirst().positions()).containsExactly(0, 1, 2, 3, 4, 5, 6, 7);
        assertThat(shortHits()).isEqualTo(1);
        assertThat(scheduled()).as("the transfer scheduler saw nothing").isZero();
        assertThat(discoveries).hasValue(1);
        assertThat(replicas.pinnedKeys()).isEqualTo(PAGES);
        release();
        assertNothingHeld(role);
    }

    @Test
    void aPlanThatReadsFromSsdGoesTheLongWay() {
        for (int p = 0; p < PAGES / 2; p++) {
            replicas.putDram(key(0, p));
        }
        ssdPages();
        PlanningRole role = role(RouteCapabilities.localOnly(true), replicas.evidence());
        Future<PreparationResult> result = prepare(role, demand(fullAttention(), PAGES));
        assertThat(result.succeeded()).isTrue();
        assertThat(result.result().plan().segments()).extracting(s -> s.route() + s.range().toString())
                .containsExactly("LOCAL_DRAM[0, 4)", "HOST_FROM_LOCAL_SSD[4, 8)");
        assertThat(shortHits()).isZero();
        assertThat(scheduled()).as("the SSD segment went through the transfer queue").isEqualTo(1);
        release();
        assertNothingHeld(role);
    }

    @Test
    void aHitWhosePinGoesStaleIsPlannedAgainHoldingNothingMeanwhile() {
        for (int p = 0; p < PAGES; p++) {
            replicas.putDram(key(0, p));
        }
        // Discovery answers, then page 5 is replaced (a new slot generation) before the pins.
        AtomicInteger calls = new AtomicInteger();
        EvidenceSource racing = demand -> {
            DemandEvidence found = replicas.discover(demand);
            if (calls.getAndIncrement() == 0) {
                replicas.putDram(key(0, 5));
            }
            return Future.succeededFuture(found);
        };
        PlanningRole role = role(RouteCapabilities.localOnly(true), racing);
        Future<PreparationResult> result = prepare(role, demand(fullAttention(), PAGES));
        assertThat(result.result().kind()).isEqualTo(PreparationResult.Kind.HOST_READY);
        assertThat(result.result().plan().boundaryTokens()).isEqualTo(8L * Fixtures.PAGE_TOKENS);
        assertThat(discoveries).hasValue(2);
        assertThat(replans("stale_evidence")).isEqualTo(1);
        assertThat(shortHits()).isEqualTo(2);
        assertThat(replicas.pinnedKeys()).as("the stale attempt's pins were released").isEqualTo(PAGES);
        release();
        assertNothingHeld(role);
    }

    @Test
    void evidenceThatGoesStaleBeforeAcquisitionIsPlannedAgain() {
        ssdPages();
        // Discovery answers, then the ring rewrites page 5 before the plan is acquired.
        AtomicInteger calls = new AtomicInteger();
        EvidenceSource racing = demand -> {
            DemandEvidence found = replicas.discover(demand);
            if (calls.getAndIncrement() == 0) {
                replicas.putSsd(key(0, 5));
            }
            return Future.succeededFuture(found);
        };
        PlanningRole role = role(RouteCapabilities.localOnly(true), racing);
        Future<PreparationResult> result = prepare(role, demand(fullAttention(), PAGES));
        assertThat(result.succeeded()).isTrue();
        assertThat(result.result().kind()).isEqualTo(PreparationResult.Kind.HOST_READY);
        assertThat(result.result().plan().boundaryTokens()).isEqualTo(8L * Fixtures.PAGE_TOKENS);
        assertThat(discoveries).hasValue(2);
        assertThat(replans("stale_evidence")).isEqualTo(1);
        release();
        assertNothingHeld(role);
    }

    @Test
    void replansAreBoundedAndLeaveNothingHeld() {
        ssdPages();
        EvidenceSource alwaysRacing = demand -> {
            DemandEvidence found = replicas.discover(demand);
            replicas.putSsd(key(0, 2));
            return Future.succeededFuture(found);
        };
        PlanningRole role = role(RouteCapabilities.localOnly(true), alwaysRacing);
        Future<PreparationResult> result = prepare(role, demand(fullAttention(), PAGES));
        // Without a waiting deadline there is budget left: try again later, holding nothing.
        assertThat(result.result().kind()).isEqualTo(PreparationResult.Kind.RETRY_LATER);
        assertThat(discoveries).hasValue(PlanningRole.MAX_PLAN_ATTEMPTS);
        assertThat(replans("stale_evidence")).isEqualTo(PlanningRole.MAX_PLAN_ATTEMPTS - 1);
        assertThat(registry.counter("orbitkv.queries.replans").count()).isEqualTo(PlanningRole.MAX_PLAN_ATTEMPTS);
        assertNothingHeld(role);
    }

    @Test
    void aLaggingDirectoryLosesOnlyTheRecordFoundStale() {
        ssdPages();
        for (int p = 0; p < 4; p++) {
            replicas.putPeer(Medium.PEER_DRAM, PEER_A, key(0, p));
        }
        // The directory still advertises page 2's old generation after every refresh.
        DemandEvidence lagging = replicas.discover(demand(fullAttention(), PAGES));
        replicas.putPeer(Medium.PEER_DRAM, PEER_A, key(0, 2));
        PlanningRole role = role(RouteCapabilities.all(), demand -> Future.succeededFuture(lagging));
        Future<PreparationResult> result = prepare(role, demand(fullAttention(), PAGES));
        assertThat(result.succeeded()).isTrue();
        assertThat(result.result().plan().segments()).extracting(s -> s.route() + s.range().toString())
                .containsExactly("HOST_FROM_PEER_DRAM[0, 2)", "HOST_FROM_LOCAL_SSD[2, 3)",
                        "HOST_FROM_PEER_DRAM[3, 4)", "HOST_FROM_LOCAL_SSD[4, 8)");
        release();
        assertNothingHeld(role);
    }

    @Test
    void aFailedTransferIsPlannedAgainOnlyAfterItsWorkIsFenced() {
        ssdPages();
        AtomicInteger failures = new AtomicInteger(1);
        replicas.failSubmit = segment -> failures.getAndDecrement() > 0;
        replicas.holdSubmissions = true;
        PlanningRole role = role(RouteCapabilities.localOnly(true), replicas.evidence());
        Future<PreparationResult> result = prepare(role, demand(fullAttention(), PAGES));
        assertThat(replicas.held).hasSize(1);
        assertThat(discoveries).hasValue(1); // no second plan while the first transfer runs
        replicas.completeHeld(); // fails, is fenced, is released; the replan's transfer is held next
        assertThat(discoveries).hasValue(2);
        assertThat(replans("transfer_failed")).isEqualTo(1);
        replicas.completeHeld();
        assertThat(result.succeeded()).isTrue();
        release();
        assertNothingHeld(role);
    }

    @Test
    void cancelStopsReplanningAndDrains() {
        ssdPages();
        replicas.holdSubmissions = true;
        PlanningRole role = role(RouteCapabilities.localOnly(true), replicas.evidence());
        Future<PreparationResult> result = prepare(role, demand(fullAttention(), PAGES));
        Future<Integer> cancelled = handlers.cancel(1, false);
        assertThat(cancelled.isComplete()).isFalse();
        replicas.completeHeld();
        assertThat(cancelled.result()).as("a dropped transfer held nothing when it ended").isZero();
        assertThat(PlanningException.failureOf(result.cause())).isEqualTo(PlanningFailure.CANCELLED);
        assertThat(discoveries).hasValue(1);
        assertNothingHeld(role);
    }

    @Test
    void failClosedRoutesAreNotReplanned() {
        ssdPages();
        PlanningRole role = role(RouteCapabilities.localOnly(true), replicas.evidence());
        Future<PreparationResult> result = prepare(role, demand(fullAttention(), PAGES)
                .withRequestedRoute(RouteTemplate.HOST_FROM_PEER_SSD));
        assertThat(PlanningException.failureOf(result.cause())).isEqualTo(PlanningFailure.REQUESTED_ROUTE_UNAVAILABLE);
        assertThat(discoveries).hasValue(1);
        assertThat(registry.find("orbitkv.planning.replans").counters()).allMatch(c -> c.count() == 0);
        assertThat(replicas.granted).isEqualTo(List.of());
    }

    @Test
    void aDemandTakesOverWhatItsHintPreparedWithoutPlanningOrReadingAgain() {
        ssdPages();
        PlanningRole role = role(RouteCapabilities.localOnly(true), replicas.evidence());
        DemandView demand = demand(fullAttention(), PAGES);
        Future<PreparationResult> hint = prepare(role, demand.withSpeculation(true, 1f, 0));
        assertThat(hint.result().kind()).isEqualTo(PreparationResult.Kind.HOST_READY);
        int discovered = discoveries.get();
        long granted = replicas.granted.size();

        Future<PreparationResult> ready = handlers.prepare(new PlanningCommands.Prepare(2, demand, Optional.empty(), 1,
                ADMIT_ALL));
        assertThat(ready.result().kind()).isEqualTo(PreparationResult.Kind.HOST_READY);
        assertThat(ready.result().takenOver()).contains(PreparationResult.TakeOver.RESIDENT);
        assertThat(ready.result().plan()).isEqualTo(hint.result().plan());
        assertThat(discoveries).as("no second plan").hasValue(discovered);
        assertThat(replicas.granted).as("no second acquisition").hasSize((int) granted);
        assertThat(handlers.release(1, false).result()).as("the hint holds nothing now").isZero();
        assertThat(handlers.release(2, false).result()).isEqualTo(PAGES);
        assertNothingHeld(role);
    }

    @Test
    void aDemandTheHintDoesNotServeReleasesItAndPlansAfresh() {
        ssdPages();
        PlanningRole role = role(RouteCapabilities.localOnly(true), replicas.evidence());
        DemandView demand = demand(fullAttention(), PAGES);
        Future<PreparationResult> hint = prepare(role, demand.withSpeculation(true, 1f, 0));
        assertThat(hint.result().kind()).isEqualTo(PreparationResult.Kind.HOST_READY);
        int discovered = discoveries.get();

        // An explicit route the hint did not ask for: its preparation is released, the demand plans on its own.
        Future<PreparationResult> ready = handlers.prepare(new PlanningCommands.Prepare(2,
                demand.withRequestedRoute(RouteTemplate.HOST_FROM_LOCAL_SSD), Optional.empty(), 1, ADMIT_ALL));
        assertThat(ready.result().kind()).isEqualTo(PreparationResult.Kind.HOST_READY);
        assertThat(ready.result().takenOver()).isEmpty();
        assertThat(discoveries).hasValue(discovered + 1);
        assertThat(handlers.release(1, false).result()).as("released before the demand planned").isZero();
        assertThat(handlers.release(2, false).result()).isEqualTo(PAGES);
        assertNothingHeld(role);
    }

    @Test
    void aPeerThatRefusedIsLeftOutOfPlansForAWhileSoTheReplanTakesLocalSsd() {
        DemandEvidence both = Fixtures.evidence().add(0, 0, PAGES, Fixtures.peerDram(PEER_A, 1))
                .add(0, 0, PAGES, Fixtures.ssd(2)).build();
        ExecutionOwner refusing = new ExecutionOwner() {
            @Override
            public Future<SegmentLease> acquire(PlannedSegment segment) {
                return Future.failedFuture(new PlanningException(PlanningFailure.SOURCE_REJECTED, "unreachable",
                        segment.pages().getFirst()));
            }

            @Override
            public Future<SegmentLease> submit(SegmentLease lease) {
                throw new AssertionError("never acquired");
            }

            @Override
            public Future<Boolean> release(SegmentLease lease) {
                throw new AssertionError("never acquired");
            }
        };
        Map<RouteTemplate, ExecutionOwner> owners = new EnumMap<>(RouteTemplate.class);
        for (RouteTemplate route : RouteTemplate.values()) {
            owners.put(route, route == RouteTemplate.HOST_FROM_PEER_DRAM ? refusing : replicas);
        }
        PlanExecutor executor = new PlanExecutor(owners, TransferScheduler.Settings.uniform(1 << 30, 0.5, 64), ticker,
                registry, new ManualTimers(ticker));
        PlanningRole role = new PlanningRole(RouteCapabilities.all(), owner -> owner.equals(PEER_A), Fixtures.RESOURCES,
                demand -> Future.succeededFuture(both), EstimateSource.NONE, executor, ticker, registry);
        DemandView demand = demand(fullAttention(), PAGES);

        Plan first = role.plan(demand).result().plan();
        assertThat(first.segments()).allMatch(s -> s.route() == RouteTemplate.HOST_FROM_PEER_DRAM);
        Future<PreparedPlan> refused = role.execute(demand, first, false).result();
        assertThat(PlanningException.failureOf(refused.cause())).isEqualTo(PlanningFailure.SOURCE_REJECTED);
        assertThat(registry.counter("orbitkv.planning.peers.avoided").count()).isEqualTo(1);

        // The replan does not ask the same source again: local SSD covers the demand.
        assertThat(role.plan(demand).result().plan().segments())
                .allMatch(s -> s.route() == RouteTemplate.HOST_FROM_LOCAL_SSD);
        // Once the avoidance ends, the default order (peer DRAM first) stands again.
        ticker.advance(PlanningRole.PEER_AVOID_NANOS);
        assertThat(role.plan(demand).result().plan().segments())
                .allMatch(s -> s.route() == RouteTemplate.HOST_FROM_PEER_DRAM);
        assertThat(executor.heldLeases()).isZero();
    }
}
