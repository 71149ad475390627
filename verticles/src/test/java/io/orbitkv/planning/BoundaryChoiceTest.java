package io.orbitkv.planning;

import static io.orbitkv.planning.Fixtures.PAGE_TOKENS;
import static io.orbitkv.planning.Fixtures.demand;
import static io.orbitkv.planning.Fixtures.dram;
import static io.orbitkv.planning.Fixtures.evidence;
import static io.orbitkv.planning.Fixtures.fullAttention;
import static io.orbitkv.planning.Fixtures.ssd;
import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.model.cost.CostEstimateKey;
import java.util.List;
import java.util.Optional;
import java.util.OptionalDouble;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import io.orbitkv.model.plan.BoundaryReason;
import io.orbitkv.model.plan.DemandView;
import io.orbitkv.model.plan.Plan;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.model.plan.DemandEvidence;
import io.orbitkv.model.plan.PlannedSegment;
import io.orbitkv.model.plan.TimeEstimate;

/**
 * Boundary choice by earliest first token, with state-ready times from the real cost role: pages 0-3 resident in DRAM,
 * pages 4-7 only on SSD, and a measured SSD route of 20 ms for those four pages.
 */
class BoundaryChoiceTest {
    private static final int PAGES = 8;
    private static final long SSD_ROUTE_NANOS = 20_000_000;
    private static final CostEstimateKey SSD_FOUR_PAGES = CostRoleHarness.key(RouteTemplate.HOST_FROM_LOCAL_SSD,
            Optional.empty(), 4, CompletionTarget.hostReady());
    private static final DemandEvidence SPLIT = evidence().add(0, 0, 4, dram(1)).add(0, 4, PAGES, ssd(2)).build();

    private static Plan plan(CostRoleHarness harness, DemandView demand, DemandEvidence evidence) throws Exception {
        return CostRoleHarness.join(harness.plan(harness.role(RouteCapabilities.localOnly(true), evidence), demand)).plan();
    }

    @ParameterizedTest(name = "on the cost loop: {0}")
    @ValueSource(booleans = {false, true})
    void aShortDramBoundaryBeatsALongerSsdOneWhenRecomputingTheDifferenceIsFaster(boolean onCostLoop) throws Exception {
        try (CostRoleHarness harness = new CostRoleHarness(false, onCostLoop)) {
            harness.train(SSD_FOUR_PAGES, SSD_ROUTE_NANOS, 4);
            // 10,000 tokens/s: recomputing the 64 tokens of pages 4-7 takes 6.4 ms, reading them 20 ms.
            Plan plan = plan(harness, demand(fullAttention(), PAGES).withPrefillRate(10_000), SPLIT);
            assertThat(plan.boundaryTokens()).isEqualTo(4L * PAGE_TOKENS);
            assertThat(plan.reason()).isEqualTo(BoundaryReason.EARLIER_FIRST_TOKEN);
            assertThat(plan.longestLegalTokens()).isEqualTo(8L * PAGE_TOKENS);
            assertThat(plan.segments()).extracting(PlannedSegment::route).containsExactly(RouteTemplate.LOCAL_DRAM);
            assertThat(plan.stateReady()).isEqualTo(TimeEstimate.NONE);
            assertThat(harness.planningCount("orbitkv.planning.plans", "reason", "earlier_first_token")).isEqualTo(1);
        }
    }

    @ParameterizedTest(name = "on the cost loop: {0}")
    @ValueSource(booleans = {false, true})
    void theLongerSsdBoundaryWinsWhenRecomputingIsSlower(boolean onCostLoop) throws Exception {
        try (CostRoleHarness harness = new CostRoleHarness(false, onCostLoop)) {
            harness.train(SSD_FOUR_PAGES, SSD_ROUTE_NANOS, 4);
            // 1,000 tokens/s: recomputing 64 tokens takes 64 ms, reading them 20 ms.
            Plan plan = plan(harness, demand(fullAttention(), PAGES).withPrefillRate(1_000), SPLIT);
            assertThat(plan.boundaryTokens()).isEqualTo(8L * PAGE_TOKENS);
            assertThat(plan.reason()).isEqualTo(BoundaryReason.LONGEST);
            assertThat(plan.stateReady()).isEqualTo(TimeEstimate.of(SSD_ROUTE_NANOS, 0));
        }
    }

    @ParameterizedTest(name = "on the cost loop: {0}")
    @ValueSource(booleans = {false, true})
    void withoutARateOrAnEstimateTheLongestBoundaryStands(boolean onCostLoop) throws Exception {
        try (CostRoleHarness harness = new CostRoleHarness(false, onCostLoop)) {
            harness.train(SSD_FOUR_PAGES, SSD_ROUTE_NANOS, 4);
            assertThat(plan(harness, demand(fullAttention(), PAGES), SPLIT).boundaryTokens())
                    .isEqualTo(8L * PAGE_TOKENS);
        }
        try (CostRoleHarness harness = new CostRoleHarness(false, onCostLoop)) {
            // A rate but no measured SSD route: unknown is not zero, and not infinite either: the default stays.
            Plan plan = plan(harness, demand(fullAttention(), PAGES).withPrefillRate(1e9), SPLIT);
            assertThat(plan.boundaryTokens()).isEqualTo(8L * PAGE_TOKENS);
            assertThat(plan.reason()).isEqualTo(BoundaryReason.LONGEST);
            assertThat(plan.stateReady().known()).isFalse();
        }
    }

    @ParameterizedTest(name = "on the cost loop: {0}")
    @ValueSource(booleans = {false, true})
    void recomputingFromTheOriginWinsWhenEveryRestoreIsSlower(boolean onCostLoop) throws Exception {
        try (CostRoleHarness harness = new CostRoleHarness(false, onCostLoop)) {
            CostEstimateKey allEight = CostRoleHarness.key(RouteTemplate.HOST_FROM_LOCAL_SSD, Optional.empty(), PAGES,
                    CompletionTarget.hostReady());
            harness.train(allEight, 1_000_000_000, 4);
            Plan plan = plan(harness, demand(fullAttention(), PAGES).withPrefillRate(100_000),
                    evidence().add(0, 0, PAGES, ssd(2)).build());
            assertThat(plan.isRecompute()).isTrue();
            assertThat(plan.reason()).isEqualTo(BoundaryReason.EARLIER_FIRST_TOKEN);
            assertThat(plan.segments()).isEmpty();
        }
    }

    @ParameterizedTest(name = "on the cost loop: {0}")
    @ValueSource(booleans = {false, true})
    void stateReadyHiddenBehindAdmissionKeepsTheLongestBoundary(boolean onCostLoop) throws Exception {
        try (CostRoleHarness harness = new CostRoleHarness(false, onCostLoop)) {
            harness.train(SSD_FOUR_PAGES, SSD_ROUTE_NANOS, 4);
            // The engine uses the state in 50 ms: the 20 ms read is done by then, recomputation would add 6.4 ms.
            DemandView later = demand(fullAttention(), PAGES).withPrefillRate(10_000)
                    .withFirstUse(harness.ticker.nanos() + 50_000_000);
            assertThat(plan(harness, later, SPLIT).boundaryTokens()).isEqualTo(8L * PAGE_TOKENS);
        }
    }

    @Test
    void theGuardKeepsTheDefaultUnlessTheFirstTokenIsClearlyEarlier() {
        long end = 8L * PAGE_TOKENS;
        List<BoundaryChooser.Candidate> candidates = List.of(
                new BoundaryChooser.Candidate(end, TimeEstimate.of(10_000_000, 1_000_000)),
                new BoundaryChooser.Candidate(4L * PAGE_TOKENS, TimeEstimate.NONE),
                new BoundaryChooser.Candidate(0, TimeEstimate.NONE));
        // Default lower bound 9 ms, margin 0.5 ms: a candidate must finish before 8.5 ms at its upper bound.
        // 64 tokens at 64/8.4e-3 tokens/s take 8.4 ms: clearly earlier.
        assertThat(BoundaryChooser.choose(candidates, end, end, OptionalDouble.of(64 / 8.4e-3), end, 0))
                .isEqualTo(new BoundaryChooser.Choice(4L * PAGE_TOKENS, BoundaryReason.EARLIER_FIRST_TOKEN));
        // 8.6 ms is faster than the 10 ms mean but inside the guard.
        assertThat(BoundaryChooser.choose(candidates, end, end, OptionalDouble.of(64 / 8.6e-3), end, 0))
                .isEqualTo(new BoundaryChooser.Choice(end, BoundaryReason.LONGEST));
        // A default below the longest legal boundary is there because of the byte cap.
        assertThat(BoundaryChooser.choose(candidates, end, 16L * PAGE_TOKENS, OptionalDouble.empty(), end, 0).reason())
                .isEqualTo(BoundaryReason.BUDGET);
    }
}
