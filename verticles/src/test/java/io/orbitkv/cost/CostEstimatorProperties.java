package io.orbitkv.cost;

import org.junit.jupiter.api.Test;
import org.quicktheories.QuickTheory;
import org.quicktheories.core.Gen;

import java.util.List;
import java.util.OptionalLong;

import static org.assertj.core.api.Assertions.assertThat;
import static org.quicktheories.generators.SourceDSL.arbitrary;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.lists;
import static org.quicktheories.generators.SourceDSL.longs;
import io.orbitkv.model.cost.CostEstimateKey;
import io.orbitkv.model.cost.ObservationOutcome;
import io.orbitkv.model.cost.SizeBucket;
import io.orbitkv.model.cost.CostEstimate;
import io.orbitkv.model.cost.CostEstimateResult;

/**
 * Invariants of {@link CostEstimator}: warm-up, EWMA bounds, expiry, size buckets and the bounded table. QuickTheories
 * draws the examples from a fresh seed; a failure prints the shrunk example and "Seed was N", and
 * {@code -DQT_SEED=N} replays exactly that run.
 */
class CostEstimatorProperties {

    record Sample(ObservationOutcome outcome, long nanos) {
    }

    static Gen<List<Sample>> samples() {
        return lists().of(arbitrary().enumValues(ObservationOutcome.class)
                        .zip(longs().between(0, 10_000_000_000L), Sample::new))
                .ofSizeBetween(0, 40);
    }

    @Test
    void onlySuccessesCountAndWarmUpNeedsExactlyFour() {
        QuickTheory.qt().withExamples(300).forAll(samples()).checkAssert(samples -> {
            CostEstimator estimator = new CostEstimator(new ManualClock());
            CostEstimateKey key = TestKeys.ssdRead(4096);
            long successes = 0;
            long min = Long.MAX_VALUE;
            long max = Long.MIN_VALUE;
            for (Sample sample : samples) {
                estimator.train(key, sample.outcome(), OptionalLong.of(sample.nanos()));
                if (sample.outcome() == ObservationOutcome.SUCCEEDED) {
                    successes++;
                    min = Math.min(min, sample.nanos());
                    max = Math.max(max, sample.nanos());
                }
            }
            CostEstimateResult result = estimator.estimate(key);
            if (successes == 0) {
                assertThat(result).isEqualTo(new CostEstimateResult.Unavailable(CostEstimateResult.Reason.NO_ENTRY, 0));
            } else if (successes < CostEstimator.WARMUP_SAMPLES) {
                assertThat(result).isEqualTo(
                        new CostEstimateResult.Unavailable(CostEstimateResult.Reason.WARMING_UP, successes));
            } else {
                CostEstimate estimate = result.usable().orElseThrow();
                assertThat(estimate.sampleCount()).isEqualTo(successes);
                // An EWMA is a convex combination of the samples; its error an EWMA of distances between them.
                assertThat(estimate.predictedNanos()).isBetween(min, max);
                assertThat(estimate.errorNanos()).isBetween(0L, max - min);
            }
        });
    }

    @Test
    void constantSamplesHaveZeroError() {
        QuickTheory.qt().withExamples(100)
                .forAll(longs().between(0, 1_000_000_000_000L), integers().between(4, 30))
                .checkAssert((nanos, count) -> {
                    CostEstimator estimator = new CostEstimator(new ManualClock());
                    CostEstimateKey key = TestKeys.ssdRead(1);
                    for (int i = 0; i < count; i++) {
                        estimator.train(key, ObservationOutcome.SUCCEEDED, OptionalLong.of(nanos));
                    }
                    assertThat(estimator.estimate(key).usable()).hasValue(new CostEstimate(nanos, 0, count, 0));
                });
    }

    @Test
    void expiryBoundaryIsFiveMinutesOfIdleness() {
        // Uniform idle times rarely land on the boundary itself: it and its neighbours are drawn one time in four.
        Gen<Long> idleNanos = longs().between(0, 600_000_000_000L).mix(arbitrary().pick(
                CostEstimator.EXPIRY_NANOS - 1, CostEstimator.EXPIRY_NANOS, CostEstimator.EXPIRY_NANOS + 1), 25);
        QuickTheory.qt().withExamples(100).forAll(idleNanos).checkAssert(idle -> {
            ManualClock clock = new ManualClock();
            CostEstimator estimator = new CostEstimator(clock);
            CostEstimateKey key = TestKeys.ssdRead(1);
            for (int i = 0; i < 4; i++) {
                estimator.train(key, ObservationOutcome.SUCCEEDED, OptionalLong.of(1_000));
            }
            clock.advanceNanos(idle);
            boolean expired = idle >= CostEstimator.EXPIRY_NANOS;
            assertThat(estimator.estimate(key).usable().isEmpty()).isEqualTo(expired);
        });
    }

    @Test
    void sizeBucketsAreLog2AndUnknownIsItsOwnBucket() {
        // Uniform longs are almost all above 2^60: one draw in two is a power of two or its neighbour instead.
        Gen<Long> powerEdges = integers().between(0, 62).zip(integers().between(-1, 1),
                (shift, delta) -> Math.max(0, (1L << shift) + delta));
        QuickTheory.qt().withExamples(200)
                .forAll(longs().between(0, Long.MAX_VALUE).mix(powerEdges, 50))
                .checkAssert(count -> {
                    SizeBucket bucket = SizeBucket.of(count);
                    assertThat(bucket.isKnown()).isTrue();
                    assertThat(bucket).isNotEqualTo(SizeBucket.UNKNOWN);
                    if (count == 0) {
                        assertThat(bucket.log2()).isZero();
                    } else {
                        int b = bucket.log2();
                        assertThat(b).isBetween(1, 63);
                        assertThat(count).isGreaterThanOrEqualTo(1L << (b - 1));
                        if (b < 63) {
                            assertThat(count).isLessThan(1L << b);
                        }
                    }
                });
    }

    @Test
    void distinctKeysBeyondCapacityKeepTheTableBounded() {
        QuickTheory.qt().withExamples(50)
                .forAll(lists().of(integers().between(0, 2_000)).ofSizeBetween(1, 1_200))
                .checkAssert(keys -> {
                    CostEstimator estimator = new CostEstimator(new ManualClock());
                    for (int index : keys) {
                        estimator.train(TestKeys.ssdRead(index, 64), ObservationOutcome.SUCCEEDED, OptionalLong.of(1));
                    }
                    assertThat(estimator.size()).isEqualTo((int) Math.min(CostEstimator.MAX_ENTRIES,
                            keys.stream().distinct().count()));
                });
    }
}
