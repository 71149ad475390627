package io.orbitkv.planning;

import static io.orbitkv.planning.Fixtures.PAGE_BYTES;
import static io.orbitkv.planning.Fixtures.PAGE_TOKENS;
import static io.orbitkv.planning.Fixtures.PEER_A;
import static io.orbitkv.planning.Fixtures.PEER_B;
import static io.orbitkv.planning.Fixtures.demand;
import static io.orbitkv.planning.Fixtures.dram;
import static io.orbitkv.planning.Fixtures.evidence;
import static io.orbitkv.planning.Fixtures.fullAttention;
import static io.orbitkv.planning.Fixtures.peerDram;
import static io.orbitkv.planning.Fixtures.peerSsd;
import static io.orbitkv.planning.Fixtures.plan;
import static io.orbitkv.planning.Fixtures.ssd;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.model.cost.ResourceId;
import io.orbitkv.model.cost.ResourceKind;
import io.orbitkv.recovery.BlockRange;
import io.orbitkv.recovery.GroupRanges;
import io.orbitkv.recovery.GroupRule;
import io.orbitkv.recovery.RecoveryRules;
import java.util.List;
import org.junit.jupiter.api.Test;
import io.orbitkv.model.plan.BoundaryReason;
import io.orbitkv.model.plan.DemandView;
import io.orbitkv.model.plan.Plan;
import io.orbitkv.model.plan.PlanningException;
import io.orbitkv.model.plan.PlanningFailure;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.model.plan.DemandEvidence;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.model.plan.PlannedPage;
import io.orbitkv.model.plan.PlannedSegment;
import io.orbitkv.model.plan.TimeEstimate;

class PlannerTest {
    private static final CompletionTarget GPU0 = CompletionTarget.engineRestore(
            new ResourceId(ResourceKind.GPU_DEVICE, "gpu0", 1));

    private static List<String> routes(Plan plan) {
        return plan.segments().stream().map(s -> s.route() + s.range().toString()).toList();
    }

    @Test
    void todaysManagerTakesDramFirstThenReadsTheRestFromSsd() {
        Plan plan = plan(demand(fullAttention(), 8),
                evidence().add(0, 0, 4, dram(1)).add(0, 0, 8, ssd(2)).build(),
                RouteCapabilities.localOnly(true)).plan();
        assertThat(plan.boundaryTokens()).isEqualTo(8L * PAGE_TOKENS);
        assertThat(plan.reason()).isEqualTo(BoundaryReason.LONGEST);
        assertThat(routes(plan)).containsExactly("LOCAL_DRAM[0, 4)", "HOST_FROM_LOCAL_SSD[4, 8)");
        assertThat(plan.required()).containsExactly(GroupRanges.of(0, new BlockRange(0, 8)));
        assertThat(plan.requiredBytes()).isEqualTo(8 * PAGE_BYTES);
        assertThat(plan.segments().get(1).pages()).allMatch(p -> p.evidence().equals(ssd(2)));
        assertThat(plan.target()).isEqualTo(CompletionTarget.hostReady());
    }

    @Test
    void withoutTheSsdTierOnlyDramCounts() {
        Plan plan = plan(demand(fullAttention(), 8),
                evidence().add(0, 0, 4, dram(1)).add(0, 0, 8, ssd(2)).build(),
                RouteCapabilities.localOnly(false)).plan();
        assertThat(routes(plan)).containsExactly("LOCAL_DRAM[0, 4)");
    }

    @Test
    void hostMaterializationOrderIsPeerDramThenLocalSsdThenPeerSsd() {
        Plan plan = plan(demand(fullAttention(), 9),
                evidence().add(0, 0, 3, dram(1))
                        .add(0, 3, 6, peerDram(PEER_A, 1)).add(0, 3, 9, ssd(2)).add(0, 0, 9, peerSsd(PEER_B, 3))
                        .build(),
                RouteCapabilities.all()).plan();
        assertThat(routes(plan)).containsExactly("LOCAL_DRAM[0, 3)", "HOST_FROM_PEER_DRAM[3, 6)",
                "HOST_FROM_LOCAL_SSD[6, 9)");
        Plan peerSsdOnly = plan(demand(fullAttention(), 2), evidence().add(0, 0, 2, peerSsd(PEER_B, 3)).build(),
                RouteCapabilities.all()).plan();
        assertThat(routes(peerSsdOnly)).containsExactly("HOST_FROM_PEER_SSD[0, 2)");
        assertThat(peerSsdOnly.segments().getFirst().owner()).contains(PEER_B);
    }

    @Test
    void engineRestoreTakesDeferredLocalSsdBeforeHostMaterialization() {
        DemandView demand = demand(fullAttention(), 4).withTarget(GPU0);
        DemandEvidence found = evidence().add(0, 0, 4, ssd(2)).add(0, 0, 4, peerDram(PEER_A, 1)).build();
        Plan plan = plan(demand, found, RouteCapabilities.all()).plan();
        assertThat(routes(plan)).containsExactly("LOCAL_SSD_URING[0, 4)");
        assertThat(plan.segments().getFirst().target()).isEqualTo(GPU0);
        // Host-ready never uses the direct restore route.
        Plan host = plan(demand(fullAttention(), 4), found, RouteCapabilities.all()).plan();
        assertThat(routes(host)).containsExactly("HOST_FROM_PEER_DRAM[0, 4)");
    }

    @Test
    void anUnavailableTargetOrRequestedRouteFailsClosed() {
        DemandEvidence found = evidence().add(0, 0, 4, ssd(2)).build();
        assertThatThrownBy(() -> plan(demand(fullAttention(), 4).withTarget(GPU0), found,
                RouteCapabilities.localOnly(true)))
                .isInstanceOfSatisfying(PlanningException.class, e -> {
                    assertThat(e.failure()).isEqualTo(PlanningFailure.TARGET_UNAVAILABLE);
                    assertThat(e.detail()).contains("restore role");
                });
        assertThatThrownBy(() -> plan(demand(fullAttention(), 4).withRequestedRoute(RouteTemplate.HOST_FROM_PEER_DRAM),
                found, RouteCapabilities.localOnly(true)))
                .isInstanceOfSatisfying(PlanningException.class, e -> {
                    assertThat(e.failure()).isEqualTo(PlanningFailure.REQUESTED_ROUTE_UNAVAILABLE);
                    assertThat(e.detail()).contains("peer role");
                });
        // An explicit direct SSD restore for a host-ready demand does not become host prefetch.
        assertThatThrownBy(() -> plan(demand(fullAttention(), 4).withRequestedRoute(RouteTemplate.LOCAL_SSD_URING),
                found, RouteCapabilities.all()))
                .isInstanceOfSatisfying(PlanningException.class,
                        e -> assertThat(e.failure()).isEqualTo(PlanningFailure.REQUESTED_ROUTE_UNAVAILABLE));
    }

    @Test
    void anExplicitRouteIsTheOnlyTransferRouteUsed() {
        DemandEvidence found = evidence().add(0, 0, 2, dram(1)).add(0, 2, 6, ssd(2)).add(0, 2, 4, peerSsd(PEER_A, 1))
                .build();
        Plan plan = plan(demand(fullAttention(), 6).withRequestedRoute(RouteTemplate.HOST_FROM_PEER_SSD), found,
                RouteCapabilities.all()).plan();
        // Local SSD holds pages 4 and 5 too, but only DRAM and the requested route may be used.
        assertThat(routes(plan)).containsExactly("LOCAL_DRAM[0, 2)", "HOST_FROM_PEER_SSD[2, 4)");
    }

    @Test
    void peersThatAreNotCurrentMembersAreNotEligible() {
        PeerOwner stale = new PeerOwner(PEER_A.memberId(), PEER_A.incarnation() - 1);
        Plan plan = plan(demand(fullAttention(), 4), evidence().add(0, 0, 2, dram(1)).add(0, 2, 4, peerDram(stale, 1))
                .build(), RouteCapabilities.all()).plan();
        assertThat(routes(plan)).containsExactly("LOCAL_DRAM[0, 2)");
    }

    @Test
    void aPeerRouteKeepsItsOwnerAcrossConsecutivePages() {
        Plan plan = plan(demand(fullAttention(), 6),
                evidence().add(0, 0, 4, peerDram(PEER_A, 1)).add(0, 2, 6, peerDram(PEER_B, 1)).build(),
                RouteCapabilities.all()).plan();
        assertThat(plan.segments()).extracting(s -> s.owner().orElseThrow().memberId() + s.range())
                .containsExactly("manager-a[0, 4)", "manager-b[4, 6)");
    }

    @Test
    void hybridGroupsGetExactlyTheirRequiredPages() {
        RecoveryRules rules = RecoveryRules.of(PAGE_TOKENS, GroupRule.fullAttention(0),
                GroupRule.slidingWindow(1, 2L * PAGE_TOKENS), GroupRule.recurrent(2, 4L * PAGE_TOKENS));
        DemandEvidence found = evidence().add(0, 0, 8, dram(1)).add(1, 0, 8, ssd(2))
                .add(2, 3, 4, dram(3)).add(2, 7, 8, ssd(4)).build();
        Plan plan = plan(demand(rules, 8), found, RouteCapabilities.localOnly(true)).plan();
        assertThat(plan.boundaryTokens()).isEqualTo(8L * PAGE_TOKENS);
        assertThat(routes(plan)).containsExactly("LOCAL_DRAM[0, 8)", "HOST_FROM_LOCAL_SSD[6, 8)",
                "HOST_FROM_LOCAL_SSD[7, 8)");
        assertThat(plan.segments()).extracting(PlannedSegment::groupId).containsExactly(0, 1, 2);
        assertThat(plan.requiredBytes()).isEqualTo(11 * PAGE_BYTES);
    }

    @Test
    void theByteCapChoosesTheLongestBoundaryThatFits() {
        DemandEvidence found = evidence().add(0, 0, 8, dram(1)).build();
        Plan capped = plan(demand(fullAttention(), 8).withByteCap(5 * PAGE_BYTES + 1), found,
                RouteCapabilities.localOnly(true)).plan();
        assertThat(capped.boundaryTokens()).isEqualTo(5L * PAGE_TOKENS);
        assertThat(capped.reason()).isEqualTo(BoundaryReason.BUDGET);
        assertThat(capped.longestLegalTokens()).isEqualTo(8L * PAGE_TOKENS);
        Plan nothing = plan(demand(fullAttention(), 8).withByteCap(PAGE_BYTES - 1), found,
                RouteCapabilities.localOnly(true)).plan();
        assertThat(nothing.isRecompute()).isTrue();
        assertThat(nothing.reason()).isEqualTo(BoundaryReason.BUDGET);
    }

    @Test
    void noEvidenceIsARecomputePlanHoldingNothing() {
        Plan plan = plan(demand(fullAttention(), 4), DemandEvidence.none(), RouteCapabilities.all()).plan();
        assertThat(plan.isRecompute()).isTrue();
        assertThat(plan.segments()).isEmpty();
        assertThat(plan.reason()).isEqualTo(BoundaryReason.LONGEST);
        assertThat(plan.stateReady()).isEqualTo(TimeEstimate.NONE);
    }

    @Test
    void withoutObservationsAMovingPlanHasNoReadyTime() {
        Plan dramOnly = plan(demand(fullAttention(), 2), evidence().add(0, 0, 2, dram(1)).build(),
                RouteCapabilities.all()).plan();
        assertThat(dramOnly.stateReady()).isEqualTo(TimeEstimate.NONE);
        Plan withSsd = plan(demand(fullAttention(), 2), evidence().add(0, 0, 1, dram(1)).add(0, 1, 2, ssd(1)).build(),
                RouteCapabilities.all()).plan();
        assertThat(withSsd.stateReady().known()).isFalse();
    }

    @Test
    void aPlanRejectsSegmentsOutsideItsRequiredRanges() {
        PlannedSegment inside = new PlannedSegment(0, new BlockRange(0, 1), RouteTemplate.LOCAL_DRAM,
                List.of(new PlannedPage(0, Fixtures.key(0, 0), dram(1))), PAGE_BYTES, CompletionTarget.hostReady());
        PlannedSegment outside = new PlannedSegment(0, new BlockRange(1, 2), RouteTemplate.LOCAL_DRAM,
                List.of(new PlannedPage(1, Fixtures.key(0, 1), dram(1))), PAGE_BYTES, CompletionTarget.hostReady());
        List<GroupRanges> one = List.of(GroupRanges.of(0, new BlockRange(0, 1)));
        assertThatThrownBy(() -> new Plan(0, PAGE_TOKENS, BoundaryReason.LONGEST, CompletionTarget.hostReady(), one,
                List.of(inside, outside), 2 * PAGE_BYTES, PAGE_TOKENS, TimeEstimate.NONE, List.of()))
                .hasMessageContaining("outside the required ranges");
        assertThatThrownBy(() -> new Plan(0, 2 * PAGE_TOKENS, BoundaryReason.LONGEST, CompletionTarget.hostReady(),
                List.of(GroupRanges.of(0, new BlockRange(0, 2))), List.of(inside), PAGE_BYTES, PAGE_TOKENS,
                TimeEstimate.NONE, List.of()))
                .hasMessageContaining("in no segment");
        // A segment reading evidence of another medium than its route's cannot be built.
        assertThatThrownBy(() -> new PlannedSegment(0, new BlockRange(0, 1), RouteTemplate.HOST_FROM_LOCAL_SSD,
                List.of(new PlannedPage(0, Fixtures.key(0, 0), dram(1))), PAGE_BYTES, CompletionTarget.hostReady()))
                .isInstanceOf(IllegalArgumentException.class);
    }
}
