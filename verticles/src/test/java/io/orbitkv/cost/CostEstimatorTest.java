package io.orbitkv.cost;

import org.junit.jupiter.api.Test;

import java.util.OptionalLong;

import static io.orbitkv.model.cost.CostEstimateResult.Reason.EXPIRED;
import static io.orbitkv.model.cost.CostEstimateResult.Reason.NO_ENTRY;
import static io.orbitkv.model.cost.CostEstimateResult.Reason.WARMING_UP;
import static org.assertj.core.api.Assertions.assertThat;
import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.model.cost.CostEstimateKey;
import io.orbitkv.model.cost.CostPath;
import io.orbitkv.model.cost.ObservationOutcome;
import io.orbitkv.model.cost.RepresentationFamily;
import io.orbitkv.model.cost.ResourceId;
import io.orbitkv.model.cost.ResourceKind;
import io.orbitkv.model.cost.CostEstimate;
import io.orbitkv.model.cost.CostEstimateResult;

class CostEstimatorTest {

    private final ManualClock clock = new ManualClock();
    private final CostEstimator estimator = new CostEstimator(clock);
    private final CostEstimateKey key = TestKeys.ssdRead(4096);

    private CostEstimator.TrainingResult success(CostEstimateKey k, long nanos) {
        return estimator.train(k, ObservationOutcome.SUCCEEDED, OptionalLong.of(nanos));
    }

    @Test
    void usableAfterExactlyFourSuccesses() {
        assertThat(estimator.estimate(key)).isEqualTo(new CostEstimateResult.Unavailable(NO_ENTRY, 0));
        for (int i = 1; i <= 3; i++) {
            success(key, 1_000);
            assertThat(estimator.estimate(key)).isEqualTo(new CostEstimateResult.Unavailable(WARMING_UP, i));
        }
        success(key, 1_000);
        assertThat(estimator.estimate(key).usable()).hasValue(new CostEstimate(1_000, 0, 4, 0));
    }

    @Test
    void ewmaMatchesHandComputation() {
        // n1: mean=100, err=0
        // n2: e=|200-100|=100, err=0.2*100=20,           mean=100+0.2*(200-100)=120
        // n3: e=|50-120|=70,   err=0.8*20+0.2*70=30,      mean=0.8*120+0.2*50=106
        // n4: e=|400-106|=294, err=0.8*30+0.2*294=82.8,   mean=0.8*106+0.2*400=164.8
        // n5: e=|100-164.8|=64.8, err=0.8*82.8+0.2*64.8=79.2, mean=0.8*164.8+0.2*100=151.84
        long[] samples = {100, 200, 50, 400};
        for (long sample : samples) {
            success(key, sample);
        }
        assertThat(estimator.estimate(key).usable()).hasValue(new CostEstimate(165, 83, 4, 0));
        CostEstimator.TrainingResult fifth = success(key, 100);
        assertThat(fifth.predictionErrorNanos()).hasValue(65); // round(64.8), against the prior usable mean 164.8
        assertThat(estimator.estimate(key).usable()).hasValue(new CostEstimate(152, 79, 5, 0));
    }

    @Test
    void predictionErrorOnlyReportedOnceThePriorEstimateWasUsable() {
        for (int i = 0; i < 4; i++) {
            assertThat(success(key, 1_000 + i).predictionErrorNanos()).isEmpty();
        }
        assertThat(success(key, 2_000).predictionErrorNanos()).isPresent();
    }

    @Test
    void failuresCancelsTimeoutsAndAbandonsNeverTrain() {
        for (ObservationOutcome outcome : ObservationOutcome.values()) {
            if (outcome != ObservationOutcome.SUCCEEDED) {
                assertThat(estimator.train(key, outcome, OptionalLong.of(5)).training())
                        .isEqualTo(CostEstimator.Training.NOT_SUCCEEDED);
            }
        }
        assertThat(estimator.estimate(key)).isEqualTo(new CostEstimateResult.Unavailable(NO_ENTRY, 0));
        assertThat(estimator.size()).isZero();

        for (int i = 0; i < 4; i++) {
            success(key, 1_000);
        }
        clock.advanceNanos(1_000);
        for (ObservationOutcome outcome : ObservationOutcome.values()) {
            if (outcome != ObservationOutcome.SUCCEEDED) {
                estimator.train(key, outcome, OptionalLong.of(999_999_999L));
            }
        }
        // Unchanged mean, error, count, and age still counts from the last success.
        assertThat(estimator.estimate(key).usable()).hasValue(new CostEstimate(1_000, 0, 4, 1_000));
    }

    @Test
    void successWithoutDurationDoesNotTrain() {
        assertThat(estimator.train(key, ObservationOutcome.SUCCEEDED, OptionalLong.empty()).training())
                .isEqualTo(CostEstimator.Training.NO_DURATION);
        assertThat(estimator.size()).isZero();
    }

    @Test
    void expiresAfterFiveIdleMinutesAndWarmsUpAgainFromZero() {
        for (int i = 0; i < 4; i++) {
            success(key, 1_000);
        }
        clock.advanceNanos(CostEstimator.EXPIRY_NANOS - 1);
        assertThat(estimator.estimate(key).usable()).isPresent();
        clock.advanceNanos(1);
        assertThat(estimator.estimate(key)).isEqualTo(new CostEstimateResult.Unavailable(EXPIRED, 4));

        CostEstimator.TrainingResult restart = success(key, 3_000);
        assertThat(restart.restartedExpired()).isTrue();
        assertThat(restart.predictionErrorNanos()).isEmpty();
        assertThat(estimator.estimate(key)).isEqualTo(new CostEstimateResult.Unavailable(WARMING_UP, 1));
        success(key, 3_000);
        success(key, 3_000);
        assertThat(estimator.estimate(key)).isEqualTo(new CostEstimateResult.Unavailable(WARMING_UP, 3));
        success(key, 3_000);
        // The old 1000 ns evidence is gone: first sample after expiry set the mean, error 0.
        assertThat(estimator.estimate(key).usable()).hasValue(new CostEstimate(3_000, 0, 4, 0));
    }

    @Test
    void evictsTheEntryUpdatedLongestAgoAtThe513thKey() {
        for (int i = 0; i < CostEstimator.MAX_ENTRIES; i++) {
            assertThat(success(TestKeys.ssdRead(i, 4096), 10).evictedOldest()).isFalse();
            clock.advanceNanos(1);
        }
        assertThat(estimator.size()).isEqualTo(512);
        // Key 0 is refreshed, so key 1 is now the entry updated longest ago; lookups do not refresh.
        success(TestKeys.ssdRead(0, 4096), 10);
        estimator.estimate(TestKeys.ssdRead(1, 4096));

        CostEstimator.TrainingResult added = success(TestKeys.ssdRead(512, 4096), 10);
        assertThat(added.evictedOldest()).isTrue();
        assertThat(estimator.size()).isEqualTo(512);
        assertThat(estimator.estimate(TestKeys.ssdRead(1, 4096)))
                .isEqualTo(new CostEstimateResult.Unavailable(NO_ENTRY, 0));
        assertThat(estimator.estimate(TestKeys.ssdRead(0, 4096))).isInstanceOf(CostEstimateResult.Unavailable.class)
                .extracting(r -> ((CostEstimateResult.Unavailable) r).reason()).isEqualTo(WARMING_UP);
        assertThat(estimator.estimate(TestKeys.ssdRead(512, 4096)))
                .isEqualTo(new CostEstimateResult.Unavailable(WARMING_UP, 1));
    }

    @Test
    void engineRestoreForDeviceOneNeverUsesDeviceZeroEvidence() {
        CostEstimateKey device0 = TestKeys.restore(CostPath.SSD_RESTORE_ROUTE, TestKeys.GPU0);
        CostEstimateKey device1 = TestKeys.restore(CostPath.SSD_RESTORE_ROUTE, TestKeys.GPU1);
        CostEstimateKey device0Restarted = TestKeys.restore(CostPath.SSD_RESTORE_ROUTE,
                new ResourceId(ResourceKind.GPU_DEVICE, TestKeys.GPU0.name(), TestKeys.GPU0.incarnation() + 1));
        CostEstimateKey hostReady = CostEstimateKey.route(CostPath.SSD_RESTORE_ROUTE, TestKeys.STORE,
                RepresentationFamily.RAW, device0.bytes(), device0.fragments(), CompletionTarget.hostReady());
        for (int i = 0; i < 8; i++) {
            success(device0, 5_000);
        }
        assertThat(estimator.estimate(device0).usable()).isPresent();
        assertThat(device1).isNotEqualTo(device0);
        for (CostEstimateKey other : new CostEstimateKey[] {device1, device0Restarted, hostReady}) {
            assertThat(estimator.estimate(other)).isEqualTo(new CostEstimateResult.Unavailable(NO_ENTRY, 0));
        }
    }
}
