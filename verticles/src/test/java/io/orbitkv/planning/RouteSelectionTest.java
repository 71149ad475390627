package io.orbitkv.planning;

import static io.orbitkv.planning.Fixtures.PEER_A;
import static io.orbitkv.planning.Fixtures.demand;
import static io.orbitkv.planning.Fixtures.evidence;
import static io.orbitkv.planning.Fixtures.fullAttention;
import static io.orbitkv.planning.Fixtures.peerDram;
import static io.orbitkv.planning.Fixtures.ssd;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.model.cost.CostEstimateKey;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import io.orbitkv.model.plan.Plan;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.model.plan.DemandEvidence;
import io.orbitkv.model.plan.RouteChoice;

/**
 * Measured route selection through the real cost role: the default order (peer DRAM before local SSD for host
 * materialization) changes only with selection on, equal coverage, fresh estimates for every alternative and the 5 %
 * guard; otherwise the comparison goes to shadow.
 */
class RouteSelectionTest {
    private static final int PAGES = 8;
    private static final CostEstimateKey PEER = CostRoleHarness.key(RouteTemplate.HOST_FROM_PEER_DRAM,
            Optional.of(PEER_A), PAGES, CompletionTarget.hostReady());
    private static final CostEstimateKey SSD = CostRoleHarness.key(RouteTemplate.HOST_FROM_LOCAL_SSD,
            Optional.empty(), PAGES, CompletionTarget.hostReady());
    private static final DemandEvidence BOTH = evidence().add(0, 0, PAGES, peerDram(PEER_A, 1))
            .add(0, 0, PAGES, ssd(2)).build();

    private static Plan plan(CostRoleHarness harness, DemandEvidence evidence) throws Exception {
        return CostRoleHarness.join(harness.plan(harness.role(RouteCapabilities.all(), evidence),
                demand(fullAttention(), PAGES))).plan();
    }

    @ParameterizedTest(name = "on the cost loop: {0}")
    @ValueSource(booleans = {false, true})
    void aClearlyFasterEqualCoverageRouteIsTaken(boolean onCostLoop) throws Exception {
        try (CostRoleHarness harness = new CostRoleHarness(true, onCostLoop)) {
            harness.train(PEER, 10_000_000, 4);
            harness.train(SSD, 2_000_000, 4);
            Plan plan = plan(harness, BOTH);
            assertThat(plan.segments()).singleElement().satisfies(segment -> {
                assertThat(segment.route()).isEqualTo(RouteTemplate.HOST_FROM_LOCAL_SSD);
                assertThat(segment.pages()).allMatch(p -> p.evidence().equals(ssd(2)));
            });
            assertThat(plan.choices()).singleElement().satisfies(choice -> {
                assertThat(choice.outcome()).isEqualTo(RouteChoice.Outcome.SWITCHED);
                assertThat(choice.defaultRoute()).isEqualTo(RouteTemplate.HOST_FROM_PEER_DRAM);
                assertThat(choice.defaultOwner()).contains(PEER_A);
                assertThat(choice.chosenOwner()).isEmpty();
            });
            assertThat(harness.planningCount("orbitkv.planning.route.choices", "outcome", "switched")).isEqualTo(1);
        }
    }

    @ParameterizedTest(name = "on the cost loop: {0}")
    @ValueSource(booleans = {false, true})
    void aFasterRouteInsideTheMarginLeavesTheDefault(boolean onCostLoop) throws Exception {
        try (CostRoleHarness harness = new CostRoleHarness(true, onCostLoop)) {
            // 10 ms +- 0: an alternative must be below 10 - 0 - 0.5 = 9.5 ms.
            harness.train(PEER, 10_000_000, 4);
            harness.train(SSD, 9_600_000, 4);
            Plan plan = plan(harness, BOTH);
            assertThat(plan.segments()).singleElement()
                    .satisfies(s -> assertThat(s.route()).isEqualTo(RouteTemplate.HOST_FROM_PEER_DRAM));
            assertThat(plan.choices()).singleElement()
                    .satisfies(c -> assertThat(c.outcome()).isEqualTo(RouteChoice.Outcome.DEFAULT_WITHIN_MARGIN));
        }
    }

    @ParameterizedTest(name = "on the cost loop: {0}")
    @ValueSource(booleans = {false, true})
    void anAlternativeWithoutAFreshEstimateLeavesTheDefault(boolean onCostLoop) throws Exception {
        try (CostRoleHarness harness = new CostRoleHarness(true, onCostLoop)) {
            harness.train(PEER, 10_000_000, 4);
            harness.train(SSD, 1_000_000, 3); // still warming up
            assertThat(plan(harness, BOTH).choices()).singleElement()
                    .satisfies(c -> assertThat(c.outcome()).isEqualTo(RouteChoice.Outcome.DEFAULT_UNKNOWN));
            harness.train(SSD, 1_000_000, 1);
            assertThat(plan(harness, BOTH).choices()).singleElement()
                    .satisfies(c -> assertThat(c.outcome()).isEqualTo(RouteChoice.Outcome.SWITCHED));
            // Five idle minutes expire both estimates: stale evidence is not fresh evidence.
            harness.ticker.advance(TimeUnit.MINUTES.toNanos(5));
            assertThat(plan(harness, BOTH).choices()).singleElement()
                    .satisfies(c -> assertThat(c.outcome()).isEqualTo(RouteChoice.Outcome.DEFAULT_UNKNOWN));
        }
    }

    @ParameterizedTest(name = "on the cost loop: {0}")
    @ValueSource(booleans = {false, true})
    void unequalCoverageIsNoAlternative(boolean onCostLoop) throws Exception {
        try (CostRoleHarness harness = new CostRoleHarness(true, onCostLoop)) {
            harness.train(PEER, 10_000_000, 4);
            harness.train(SSD, 1_000_000, 4);
            DemandEvidence partial = evidence().add(0, 0, PAGES, peerDram(PEER_A, 1)).add(0, 0, PAGES - 1, ssd(2))
                    .build();
            Plan plan = plan(harness, partial);
            assertThat(plan.segments()).singleElement()
                    .satisfies(s -> assertThat(s.route()).isEqualTo(RouteTemplate.HOST_FROM_PEER_DRAM));
            assertThat(plan.choices()).isEmpty();
        }
    }

    @ParameterizedTest(name = "on the cost loop: {0}")
    @ValueSource(booleans = {false, true})
    void withObservationsAloneTheDefaultStandsAndShadowRecordsTheComparison(boolean onCostLoop) throws Exception {
        try (CostRoleHarness harness = new CostRoleHarness(false, onCostLoop)) {
            harness.train(PEER, 10_000_000, 4);
            harness.train(SSD, 2_000_000, 4);
            Plan plan = plan(harness, BOTH);
            assertThat(plan.segments()).singleElement()
                    .satisfies(s -> assertThat(s.route()).isEqualTo(RouteTemplate.HOST_FROM_PEER_DRAM));
            assertThat(plan.choices()).singleElement()
                    .satisfies(c -> assertThat(c.outcome()).isEqualTo(RouteChoice.Outcome.DEFAULT_SELECTION_OFF));
            await().atMost(CostRoleHarness.WAIT_S, TimeUnit.SECONDS).untilAsserted(() -> assertThat(
                    harness.costCount("orbitkv.cost.shadow.decisions", "path", "peer_host_ready_route",
                            "decision", "suggest_alternative")).isEqualTo(1));
        }
    }
}
