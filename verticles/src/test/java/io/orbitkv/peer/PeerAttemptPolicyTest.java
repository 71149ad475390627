package io.orbitkv.peer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.orbitkv.model.plan.TimeEstimate;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class PeerAttemptPolicyTest {
    static final long MS = TimeUnit.MILLISECONDS.toNanos(1);
    static final long NONE = Long.MAX_VALUE;
    static final long LEASE = 10_000 * MS;

    @Test
    void aDemandsRemainingBudgetLessTheFallbackReserveBoundsTheAttempt() {
        PeerAttemptPolicy policy = PeerAttemptPolicy.DEFAULT; // no ceiling, 1 s reserve
        assertThat(policy.attemptNanos(8000 * MS, TimeEstimate.UNKNOWN, LEASE)).isEqualTo(7000 * MS);
        assertThat(policy.attemptNanos(3000 * MS, TimeEstimate.UNKNOWN, LEASE)).isEqualTo(2000 * MS);
        // Under twice the reserve the attempt keeps half of what is left, the fallback the other half.
        assertThat(policy.attemptNanos(1200 * MS, TimeEstimate.UNKNOWN, LEASE)).isEqualTo(600 * MS);
        assertThat(policy.attemptNanos(1, TimeEstimate.UNKNOWN, LEASE)).isEqualTo(1);
        // The source's longest lease caps it.
        assertThat(policy.attemptNanos(60_000 * MS, TimeEstimate.UNKNOWN, LEASE)).isEqualTo(LEASE);
    }

    @Test
    void aSpentBudgetStartsNoAttempt() {
        assertThat(PeerAttemptPolicy.DEFAULT.attemptNanos(0, TimeEstimate.UNKNOWN, LEASE)).isZero();
        assertThat(PeerAttemptPolicy.DEFAULT.attemptNanos(-5 * MS, TimeEstimate.of(MS, 0), LEASE)).isZero();
    }

    @Test
    void withoutADemandBudgetNoReserveIsKeptAndTheCapOrCeilingBounds() {
        assertThat(PeerAttemptPolicy.DEFAULT.attemptNanos(NONE, TimeEstimate.UNKNOWN, 5000 * MS)).isEqualTo(5000 * MS);
        assertThat(new PeerAttemptPolicy(1500, 1000).attemptNanos(NONE, TimeEstimate.UNKNOWN, 5000 * MS))
                .isEqualTo(1500 * MS);
        assertThat(new PeerAttemptPolicy(1500, 1000).attemptNanos(8000 * MS, TimeEstimate.UNKNOWN, LEASE))
                .isEqualTo(1500 * MS);
    }

    @Test
    void aKnownEstimateBoundsTheAttemptAtItsMarginNeverBelowTheFloor() {
        PeerAttemptPolicy policy = PeerAttemptPolicy.DEFAULT;
        // 100 ms +- 20 ms: four times the upper bound.
        assertThat(policy.attemptNanos(8000 * MS, TimeEstimate.of(100 * MS, 20 * MS), LEASE)).isEqualTo(480 * MS);
        // 1 ms: the floor, not 4 ms.
        assertThat(policy.attemptNanos(8000 * MS, TimeEstimate.of(MS, 0), LEASE))
                .isEqualTo(PeerAttemptPolicy.FLOOR_NANOS);
        // A slow route's estimate never stretches the attempt past the budget less the reserve.
        assertThat(policy.attemptNanos(3000 * MS, TimeEstimate.of(5000 * MS, 0), LEASE)).isEqualTo(2000 * MS);
        assertThat(policy.attemptNanos(NONE, TimeEstimate.of(Long.MAX_VALUE / 2, 0), LEASE)).isEqualTo(LEASE);
    }

    @Test
    void theBoundNeverExceedsAnyOfItsLimitsAndAlwaysLeavesTheReserveOrHalf() {
        long seed = System.nanoTime();
        Random random = new Random(seed);
        for (int i = 0; i < 20_000; i++) {
            PeerAttemptPolicy policy = new PeerAttemptPolicy(random.nextInt(3) == 0 ? 0 : 10 + random.nextInt(20_000),
                    random.nextInt(5000));
            long remaining = random.nextInt(5) == 0 ? NONE : random.nextLong(-1000 * MS, 30_000 * MS);
            TimeEstimate expected = random.nextBoolean() ? TimeEstimate.UNKNOWN
                    : TimeEstimate.of(random.nextLong(0, 10_000 * MS), random.nextLong(0, 1000 * MS));
            long cap = 1 + random.nextLong(20_000 * MS);
            long bound = policy.attemptNanos(remaining, expected, cap);
            String why = "seed " + seed + ": " + policy + " remaining " + remaining + " " + expected + " cap " + cap;
            if (remaining <= 0) {
                assertThat(bound).as(why).isZero();
                continue;
            }
            assertThat(bound).as(why).isPositive().isLessThanOrEqualTo(cap);
            if (policy.ceilingMillis() > 0) {
                assertThat(bound).as(why).isLessThanOrEqualTo(policy.ceilingMillis() * MS);
            }
            if (remaining != NONE) {
                long left = remaining - bound;
                assertThat(left).as(why).isGreaterThanOrEqualTo(
                        Math.min(policy.fallbackReserveMillis() * MS, remaining / 2));
            }
            if (expected.known()) {
                assertThat(bound).as(why).isLessThanOrEqualTo(
                        Math.max(PeerAttemptPolicy.FLOOR_NANOS, expected.upperNanos() * PeerAttemptPolicy.MARGIN));
            }
        }
    }

    @Test
    void negativeSettingsAreRefused() {
        assertThatThrownBy(() -> new PeerAttemptPolicy(-1, 0)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new PeerAttemptPolicy(0, -1)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> PeerAttemptPolicy.DEFAULT.attemptNanos(MS, TimeEstimate.UNKNOWN, 0))
                .isInstanceOf(IllegalArgumentException.class);
    }
}
