package io.orbitkv.cost;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.LongRange;
import net.jqwik.api.constraints.Size;

import java.util.List;
import java.util.OptionalLong;

import static org.assertj.core.api.Assertions.assertThat;

class CostEstimatorProperties {

    record Sample(ObservationOutcome outcome, long nanos) {
    }

    @Provide
    Arbitrary<List<Sample>> samples() {
        return Combinators.combine(Arbitraries.of(ObservationOutcome.class),
                        Arbitraries.longs().between(0, 10_000_000_000L))
                .as(Sample::new).list().ofMaxSize(40);
    }

    @Property(tries = 300)
    void onlySuccessesCountAndWarmUpNeedsExactlyFour(@ForAll("samples") List<Sample> samples) {
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
    }

    @Property(tries = 100)
    void constantSamplesHaveZeroError(@ForAll @LongRange(min = 0, max = 1_000_000_000_000L) long nanos,
                                      @ForAll @IntRange(min = 4, max = 30) int count) {
        CostEstimator estimator = new CostEstimator(new ManualClock());
        CostEstimateKey key = TestKeys.ssdRead(1);
        for (int i = 0; i < count; i++) {
            estimator.train(key, ObservationOutcome.SUCCEEDED, OptionalLong.of(nanos));
        }
        assertThat(estimator.estimate(key).usable()).hasValue(new CostEstimate(nanos, 0, count, 0));
    }

    @Property(tries = 100)
    void expiryBoundaryIsFiveMinutesOfIdleness(@ForAll @LongRange(min = 0, max = 600_000_000_000L) long idleNanos) {
        ManualClock clock = new ManualClock();
        CostEstimator estimator = new CostEstimator(clock);
        CostEstimateKey key = TestKeys.ssdRead(1);
        for (int i = 0; i < 4; i++) {
            estimator.train(key, ObservationOutcome.SUCCEEDED, OptionalLong.of(1_000));
        }
        clock.advanceNanos(idleNanos);
        boolean expired = idleNanos >= CostEstimator.EXPIRY_NANOS;
        assertThat(estimator.estimate(key).usable().isEmpty()).isEqualTo(expired);
    }

    @Property(tries = 200)
    void sizeBucketsAreLog2AndUnknownIsItsOwnBucket(@ForAll @LongRange(min = 0, max = Long.MAX_VALUE) long count) {
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
    }

    @Property(tries = 50)
    void distinctKeysBeyondCapacityKeepTheTableBounded(@ForAll @Size(min = 1, max = 1_200) List<@IntRange(min = 0,
            max = 2_000) Integer> keys) {
        CostEstimator estimator = new CostEstimator(new ManualClock());
        for (int index : keys) {
            estimator.train(TestKeys.ssdRead(index, 64), ObservationOutcome.SUCCEEDED, OptionalLong.of(1));
        }
        assertThat(estimator.size()).isEqualTo((int) Math.min(CostEstimator.MAX_ENTRIES,
                keys.stream().distinct().count()));
    }
}
