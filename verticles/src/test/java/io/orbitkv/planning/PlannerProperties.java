package io.orbitkv.planning;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.recovery.BlockRange;
import io.orbitkv.recovery.GroupAvailability;
import io.orbitkv.recovery.GroupRanges;
import io.orbitkv.recovery.GroupRule;
import io.orbitkv.recovery.RecoveryContract;
import io.orbitkv.model.StateKey;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import io.orbitkv.model.plan.BoundaryReason;
import io.orbitkv.model.plan.DemandView;
import io.orbitkv.model.plan.Plan;
import io.orbitkv.model.plan.PlanningException;
import io.orbitkv.model.plan.PlanningFailure;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.model.plan.ReplicaEvidence;
import io.orbitkv.model.plan.ReplicaSet;
import io.orbitkv.model.plan.PlannedPage;
import io.orbitkv.model.plan.PlannedSegment;
import io.orbitkv.model.plan.RouteChoice;

/**
 * Planner invariants over random hybrid rules, evidence (with fenced peers and unknown formats), capabilities,
 * explicit routes, targets, byte caps, prefill rates, estimates and selection modes. Eligibility is restated here
 * independently of the planner: a route is allowed when executable, serving the target and (with an explicit route)
 * requested or local DRAM; a page is eligible for it when its replica set has that medium's evidence from a current
 * owner.
 */
class PlannerProperties {
    static final int CASES = 1500;

    static java.util.stream.LongStream seeds() {
        return Seeded.seeds(CASES);
    }

    private static boolean allowed(Scenarios.Scenario s, RouteTemplate route) {
        RouteCapabilities capabilities = s.context().capabilities();
        return capabilities.executable(route) && route.serves(s.demand().target())
                && (s.demand().requestedRoute().isEmpty() || route == RouteTemplate.LOCAL_DRAM
                || s.demand().requestedRoute().get() == route);
    }

    private static boolean eligible(Scenarios.Scenario s, RouteTemplate route, ReplicaEvidence evidence) {
        return allowed(s, route) && evidence.medium() == route.medium()
                && evidence.peerOwner().map(s.context().members()::isCurrent).orElse(true);
    }

    private static boolean pageEligible(Scenarios.Scenario s, StateKey key) {
        ReplicaSet set = s.evidence().replicas(key);
        for (RouteTemplate route : RouteTemplate.values()) {
            for (ReplicaEvidence evidence : set.ofMedium(route.medium())) {
                if (eligible(s, route, evidence)) {
                    return true;
                }
            }
        }
        return false;
    }

    private static List<GroupAvailability> eligibleAvailability(Scenarios.Scenario s) {
        List<GroupAvailability> views = new ArrayList<>();
        for (DemandView.GroupKeys group : s.demand().groups()) {
            BitSet bits = new BitSet();
            group.keys().forEach(pk -> {
                if (pageEligible(s, pk.key())) {
                    bits.set(pk.position());
                }
            });
            views.add(GroupAvailability.of(group.groupId(), bits));
        }
        return views;
    }

    private static long requiredBytes(Scenarios.Scenario s, long boundary) {
        long bytes = 0;
        for (GroupRanges ranges : RecoveryContract.requiredRanges(s.demand().rules(), boundary,
                s.demand().validPrefixTokens())) {
            bytes += ranges.pageCount() * s.demand().group(ranges.groupId()).bytesPerPage();
        }
        return bytes;
    }

    @ParameterizedTest(name = "seed {0}")
    @MethodSource("seeds")
    void plansAreLegalTileTheirRequiredRangesAndUseOnlyEligibleRoutes(long seed) {
        Seeded.check(seed, random -> {
            Scenarios.Scenario s = Scenarios.scenario(random, seed);
            DemandView demand = s.demand();
            boolean targetUnavailable = demand.target().intent() == io.orbitkv.model.cost.CompletionTarget.Intent.ENGINE_RESTORE
                    && s.context().capabilities().engineRestoreCause().isPresent();
            boolean requestedUnavailable = demand.requestedRoute().isPresent()
                    && !(s.context().capabilities().executable(demand.requestedRoute().get())
                    && demand.requestedRoute().get().serves(demand.target()));
            Plan plan;
            try {
                plan = Planner.plan(demand, s.evidence(), s.context(), s.nowNanos(), s.estimates()).plan();
            } catch (PlanningException e) {
                // Fail closed exactly when the target or the requested route cannot run here.
                assertThat(e.failure()).isIn(PlanningFailure.TARGET_UNAVAILABLE,
                        PlanningFailure.REQUESTED_ROUTE_UNAVAILABLE);
                assertThat(e.failure() == PlanningFailure.TARGET_UNAVAILABLE ? targetUnavailable
                        : requestedUnavailable && !targetUnavailable).isTrue();
                return;
            }
            assertThat(targetUnavailable || requestedUnavailable).as("should have failed closed").isFalse();
            long origin = demand.validPrefixTokens();
            long end = demand.selectedEndTokens();
            List<GroupAvailability> availability = eligibleAvailability(s);
            List<Long> legal = RecoveryContract.legalBoundaries(demand.rules(), availability, origin, end);

            // Boundary choice never returns an illegal boundary, nor one beyond the byte cap.
            long b = plan.boundaryTokens();
            assertThat(b == origin || legal.contains(b)).as("boundary %d legal in %s", b, legal).isTrue();
            assertThat(plan.requiredBytes()).isLessThanOrEqualTo(demand.byteCapBytes());
            long longestAffordable = legal.stream().filter(x -> requiredBytes(s, x) <= demand.byteCapBytes())
                    .mapToLong(Long::longValue).max().orElse(origin);
            if (demand.prefillTokensPerSecond().isEmpty()) {
                assertThat(b).isEqualTo(longestAffordable);
            } else {
                assertThat(b).isLessThanOrEqualTo(longestAffordable);
            }
            assertThat(plan.reason() == BoundaryReason.EARLIER_FIRST_TOKEN).isEqualTo(b != longestAffordable);

            // The plan leases exactly the required pages: never outside, never missing one.
            Set<Long> required = new HashSet<>();
            if (b != origin) {
                for (GroupRanges ranges : RecoveryContract.requiredRanges(demand.rules(), b, origin)) {
                    for (BlockRange range : ranges.ranges()) {
                        for (int p = range.startInclusive(); p < range.endExclusive(); p++) {
                            required.add(((long) ranges.groupId() << 32) | p);
                        }
                    }
                }
            }
            Set<Long> planned = new HashSet<>();
            for (PlannedSegment segment : plan.segments()) {
                // Selection never returns an ineligible route, and every page relies on evidence it really has.
                assertThat(allowed(s, segment.route())).as("route %s allowed", segment.route()).isTrue();
                assertThat(segment.target()).isEqualTo(demand.target());
                for (PlannedPage page : segment.pages()) {
                    assertThat(planned.add(((long) segment.groupId() << 32) | page.position())).isTrue();
                    assertThat(eligible(s, segment.route(), page.evidence())).isTrue();
                    assertThat(s.evidence().replicas(page.key()).ofMedium(segment.medium())).contains(page.evidence());
                    assertThat(page.key()).isEqualTo(Fixtures.key(segment.groupId(), page.position()));
                }
            }
            assertThat(planned).isEqualTo(required);

            // Default order unless a guarded switch says otherwise: without selection each page takes the first
            // route of the order that can serve it.
            if (s.context().selection() != Planner.SelectionMode.SELECT) {
                assertThat(plan.choices()).noneMatch(c -> c.outcome() == RouteChoice.Outcome.SWITCHED);
                for (PlannedSegment segment : plan.segments()) {
                    for (PlannedPage page : segment.pages()) {
                        RouteTemplate first = null;
                        for (RouteTemplate route : RouteTemplate.DEFAULT_ORDER) {
                            boolean has = s.evidence().replicas(page.key()).ofMedium(route.medium()).stream()
                                    .anyMatch(ev -> eligible(s, route, ev));
                            if (has) {
                                first = route;
                                break;
                            }
                        }
                        assertThat(segment.route()).isEqualTo(first);
                    }
                }
            }
            for (GroupRule rule : demand.rules().groups()) {
                assertThat(plan.segments().stream().filter(x -> x.groupId() == rule.groupId()).count())
                        .isLessThanOrEqualTo(Math.max(0, (end - origin) / demand.rules().pageSizeTokens()));
            }
        });
    }
}
