package io.orbitkv.model.plan;

import io.orbitkv.model.cost.CostEstimate;

/**
 * A duration from the decision point (nanos) with its empirical error, or unknown. Unknown is never zero: a candidate
 * whose time is unknown cannot win a comparison, and a comparison against an unknown default keeps the default.
 */
public record TimeEstimate(boolean known, long meanNanos, long errorNanos) {
    public static final TimeEstimate UNKNOWN = new TimeEstimate(false, 0, 0);
    /** Exactly nothing to wait for (nothing moves). */
    public static final TimeEstimate NONE = new TimeEstimate(true, 0, 0);

    public TimeEstimate {
        if (known && (meanNanos < 0 || errorNanos < 0)) {
            throw new IllegalArgumentException("negative estimate " + meanNanos + " +- " + errorNanos);
        }
    }

    public static TimeEstimate of(long meanNanos, long errorNanos) {
        return new TimeEstimate(true, meanNanos, errorNanos);
    }

    public static TimeEstimate of(CostEstimate estimate) {
        return of(estimate.predictedNanos(), estimate.errorNanos());
    }

    public long upperNanos() {
        return meanNanos + errorNanos;
    }

    public long lowerNanos() {
        return Math.max(0, meanNanos - errorNanos);
    }

    /**
     * The later of two parallel branches: both must finish. Unknown if either is; the error is the larger one (the
     * branches' errors are not independent enough to add or to average).
     */
    public TimeEstimate latest(TimeEstimate other) {
        if (!known || !other.known) {
            return UNKNOWN;
        }
        return of(Math.max(meanNanos, other.meanNanos), Math.max(errorNanos, other.errorNanos));
    }

    @Override
    public String toString() {
        return known ? meanNanos + "+-" + errorNanos + "ns" : "unknown";
    }
}
