package io.orbitkv.cost;

import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.OptionalLong;

import static io.orbitkv.model.cost.CostPath.SSD_CUFILE_RESTORE_ROUTE;
import static io.orbitkv.model.cost.CostPath.SSD_RESTORE_ROUTE;
import static org.assertj.core.api.Assertions.assertThat;
import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.model.cost.CostEstimateKey;
import io.orbitkv.model.cost.CostPath;
import io.orbitkv.model.cost.ObservationOutcome;
import io.orbitkv.model.cost.RepresentationFamily;
import io.orbitkv.model.cost.ResourceId;
import io.orbitkv.model.cost.ResourceKind;
import io.orbitkv.model.cost.SizeBucket;
import io.orbitkv.model.cost.CostEstimate;
import io.orbitkv.model.cost.CostEstimateResult;
import io.orbitkv.model.cost.ShadowAlternative;
import io.orbitkv.model.cost.ShadowRequest;
import io.orbitkv.model.cost.SwitchGuard;

class ShadowComparatorTest {

    private final CostEstimator estimator = new CostEstimator(new ManualClock());
    private final ShadowComparator comparator = new ShadowComparator(estimator);
    private final CostEstimateKey uring = TestKeys.restore(SSD_RESTORE_ROUTE, TestKeys.GPU0);
    private final CostEstimateKey cufile = TestKeys.restore(SSD_CUFILE_RESTORE_ROUTE, TestKeys.GPU0);

    private void warm(CostEstimateKey key, long nanos) {
        for (int i = 0; i < CostEstimator.WARMUP_SAMPLES; i++) {
            estimator.train(key, ObservationOutcome.SUCCEEDED, OptionalLong.of(nanos));
        }
    }

    private ShadowResult compare(CostEstimateKey current, ShadowAlternative... alternatives) {
        return comparator.compare(new ShadowRequest(current, List.of(alternatives)));
    }

    private static ShadowAlternative eligible(CostEstimateKey key) {
        return ShadowAlternative.when(key, () -> true);
    }

    @Test
    void suggestsAnAlternativeFasterByMoreThanErrorsAndMargin() {
        warm(uring, 1_000_000);
        warm(cufile, 500_000);
        ShadowResult result = compare(uring, eligible(cufile));
        assertThat(result.decision()).isEqualTo(ShadowDecision.SUGGEST_ALTERNATIVE);
        assertThat(result.suggested()).hasValue(cufile);
    }

    @Test
    void marginIsStrictlyMoreThanFivePercentOfTheCurrentEstimate() {
        // current 1000 +- 0: an alternative must be below 1000 - 0 - 50 = 950.
        CostEstimate current = new CostEstimate(1_000, 0, 4, 0);
        assertThat(ShadowComparator.judge(current, new CostEstimate(949, 0, 4, 0)))
                .isEqualTo(ShadowDecision.SUGGEST_ALTERNATIVE);
        assertThat(ShadowComparator.judge(current, new CostEstimate(950, 0, 4, 0)))
                .isEqualTo(ShadowDecision.WITHIN_MARGIN);
        // Errors on both sides widen the guard: 1000 - 100 - 50 = 850 against alt mean + error.
        CostEstimate noisy = new CostEstimate(1_000, 100, 4, 0);
        assertThat(ShadowComparator.judge(noisy, new CostEstimate(700, 100, 4, 0)))
                .isEqualTo(ShadowDecision.SUGGEST_ALTERNATIVE);
        assertThat(ShadowComparator.judge(noisy, new CostEstimate(750, 100, 4, 0)))
                .isEqualTo(ShadowDecision.WITHIN_MARGIN);
        assertThat(ShadowComparator.judge(noisy, new CostEstimate(1_000, 0, 4, 0)))
                .isEqualTo(ShadowDecision.AGREE);
    }

    @Test
    void withinMarginWhenFasterButInsideTheGuard() {
        warm(uring, 1_000_000);
        warm(cufile, 960_000);
        assertThat(compare(uring, eligible(cufile)).decision()).isEqualTo(ShadowDecision.WITHIN_MARGIN);
    }

    @Test
    void agreesWhenTheCurrentPathIsFastest() {
        warm(uring, 1_000_000);
        warm(cufile, 1_200_000);
        ShadowResult result = compare(uring, eligible(cufile));
        assertThat(result.decision()).isEqualTo(ShadowDecision.AGREE);
        assertThat(result.suggested()).isEmpty();
    }

    @Test
    void alternativesWhoseRequirementFailsAreNotConsidered() {
        warm(uring, 1_000_000);
        warm(cufile, 1_000);
        ShadowResult result = compare(uring, ShadowAlternative.when(cufile, () -> false));
        assertThat(result.decision()).isEqualTo(ShadowDecision.AGREE);
        assertThat(result.verdicts()).isEmpty();
    }

    @Test
    void incomparableForADifferentTargetResourceOrShape() {
        warm(uring, 1_000_000);
        CostEstimateKey otherDevice = TestKeys.restore(SSD_CUFILE_RESTORE_ROUTE, TestKeys.GPU1);
        CostEstimateKey otherBytes = TestKeys.restore(SSD_CUFILE_RESTORE_ROUTE, TestKeys.GPU0, SizeBucket.of(1L << 30));
        CostEstimateKey hostReady = CostEstimateKey.route(SSD_CUFILE_RESTORE_ROUTE, TestKeys.STORE,
                RepresentationFamily.RAW, uring.bytes(), uring.fragments(), CompletionTarget.hostReady());
        CostEstimateKey otherStore = CostEstimateKey.route(SSD_CUFILE_RESTORE_ROUTE,
                new ResourceId(ResourceKind.SSD_STORE, "ssd-store-1", 1), RepresentationFamily.RAW,
                uring.bytes(), uring.fragments(), uring.target());
        for (CostEstimateKey alternative : List.of(otherDevice, otherBytes, hostReady, otherStore)) {
            warm(alternative, 1_000);
            ShadowResult result = compare(uring, eligible(alternative));
            assertThat(result.decision()).as(alternative.toString()).isEqualTo(ShadowDecision.INCOMPARABLE);
        }
    }

    @Test
    void unknownShapeNeverCompares() {
        CostEstimateKey unknownUring = TestKeys.restore(SSD_RESTORE_ROUTE, TestKeys.GPU0, SizeBucket.UNKNOWN);
        CostEstimateKey unknownCufile = TestKeys.restore(SSD_CUFILE_RESTORE_ROUTE, TestKeys.GPU0, SizeBucket.UNKNOWN);
        warm(unknownUring, 1_000_000);
        warm(unknownCufile, 1_000);
        assertThat(compare(unknownUring, eligible(unknownCufile)).decision()).isEqualTo(ShadowDecision.INCOMPARABLE);
    }

    @Test
    void unknownWhenEitherSideHasNoUsableEstimate() {
        estimator.train(uring, ObservationOutcome.SUCCEEDED, OptionalLong.of(1_000_000)); // warming up
        warm(cufile, 1_000);
        assertThat(compare(uring, eligible(cufile)).decision()).isEqualTo(ShadowDecision.UNKNOWN);

        warm(uring, 1_000_000);
        CostEstimateKey unobserved = TestKeys.restore(SSD_CUFILE_RESTORE_ROUTE, TestKeys.GPU0, SizeBucket.of(1L << 21));
        CostEstimateKey unobservedCurrent = TestKeys.restore(SSD_RESTORE_ROUTE, TestKeys.GPU0, SizeBucket.of(1L << 21));
        warm(unobservedCurrent, 1_000_000);
        ShadowResult result = compare(unobservedCurrent, eligible(unobserved));
        assertThat(result.decision()).isEqualTo(ShadowDecision.UNKNOWN);
        assertThat(result.verdicts()).containsExactly(new ShadowResult.Verdict(unobserved, ShadowDecision.UNKNOWN));
    }

    @Test
    void picksTheSafestSuggestionAndReportsEveryVerdict() {
        CostEstimateKey pool = CostEstimateKey.route(CostPath.HOST_READY_ROUTE, TestKeys.STORE,
                RepresentationFamily.RAW, uring.bytes(), uring.fragments(), uring.target());
        warm(uring, 1_000_000);
        warm(cufile, 400_000);
        warm(pool, 300_000);
        ShadowResult result = compare(uring, eligible(cufile), eligible(pool), eligible(uring));
        assertThat(result.decision()).isEqualTo(ShadowDecision.SUGGEST_ALTERNATIVE);
        assertThat(result.suggested()).hasValue(pool);
        assertThat(result.verdicts()).extracting(ShadowResult.Verdict::decision)
                .containsExactly(ShadowDecision.SUGGEST_ALTERNATIVE, ShadowDecision.SUGGEST_ALTERNATIVE);
    }

    @Test
    void shadowNeverTrainsOrChangesEstimates() {
        warm(uring, 1_000_000);
        warm(cufile, 500_000);
        CostEstimateResult before = estimator.estimate(uring);
        int sizeBefore = estimator.size();
        compare(uring, eligible(cufile), eligible(TestKeys.restore(SSD_CUFILE_RESTORE_ROUTE, TestKeys.GPU1)));
        assertThat(estimator.estimate(uring)).isEqualTo(before);
        assertThat(estimator.size()).isEqualTo(sizeBefore);
    }

    @Test
    void routeAlternativesFromOtherSourcesAreComparableOnlyInTheirOwnScope() {
        ResourceId peer = new ResourceId(ResourceKind.PEER_MANAGER, "manager-a", 3);
        CostEstimateKey local = CostEstimateKey.route(CostPath.HOST_READY_ROUTE, TestKeys.STORE,
                RepresentationFamily.RAW, SizeBucket.of(1 << 20), SizeBucket.of(8), CompletionTarget.hostReady());
        CostEstimateKey remote = CostEstimateKey.route(CostPath.PEER_HOST_READY_ROUTE, peer, RepresentationFamily.RAW,
                SizeBucket.of(1 << 20), SizeBucket.of(8), CompletionTarget.hostReady());
        warm(local, 4_000_000);
        warm(remote, 1_000_000);
        // Same-work scope: another resource is another piece of work.
        assertThat(compare(local, eligible(remote)).decision()).isEqualTo(ShadowDecision.INCOMPARABLE);
        ShadowResult routes = comparator.compare(ShadowRequest.routes(local, List.of(eligible(remote))));
        assertThat(routes.decision()).isEqualTo(ShadowDecision.SUGGEST_ALTERNATIVE);
        assertThat(routes.suggested()).hasValue(remote);
        // Still never across completion targets or shapes.
        CostEstimateKey otherTarget = CostEstimateKey.route(CostPath.PEER_HOST_READY_ROUTE, peer,
                RepresentationFamily.RAW, SizeBucket.of(1 << 20), SizeBucket.of(8),
                CompletionTarget.engineRestore(TestKeys.GPU0));
        CostEstimateKey otherShape = CostEstimateKey.route(CostPath.PEER_HOST_READY_ROUTE, peer,
                RepresentationFamily.RAW, SizeBucket.of(1 << 21), SizeBucket.of(8), CompletionTarget.hostReady());
        warm(otherTarget, 1);
        warm(otherShape, 1);
        assertThat(comparator.compare(ShadowRequest.routes(local, List.of(eligible(otherTarget), eligible(otherShape))))
                .decision()).isEqualTo(ShadowDecision.INCOMPARABLE);
        // Operation samples never compare across resources, whatever the scope.
        assertThat(ShadowComparator.comparable(ShadowRequest.Scope.ROUTE_ALTERNATIVES, TestKeys.ssdRead(0, 4096),
                TestKeys.ssdRead(1, 4096))).isFalse();
    }

    @Test
    void theGuardIsSharedWithThePlanner() {
        assertThat(ShadowComparator.MARGIN_FRACTION).isEqualTo(SwitchGuard.MARGIN_FRACTION);
        assertThat(SwitchGuard.clearlyBelow(949, 1_000, 1_000)).isTrue();
        assertThat(SwitchGuard.clearlyBelow(950, 1_000, 1_000)).isFalse();
    }
}
