package io.orbitkv.model.cost;

/**
 * The one switching guard every measured choice uses (the cost role's shadow comparisons, the planning role's route
 * and boundary selection): an alternative wins only when its upper bound lies below the current choice's lower bound
 * by more than {@value #MARGIN_FRACTION} of the current mean,
 * <pre>
 *   alternative.mean + alternative.error  &lt;  current.mean - current.error - 0.05 * current.mean
 * </pre>
 * The error is the estimator's empirical margin (EWMA of absolute prediction error), not a calibrated interval, so the
 * margin is what keeps noise from flipping a choice back and forth. Pure arithmetic; safe from any thread.
 */
public final class SwitchGuard {

    /** The declared switching margin, a fraction of the current estimate. */
    public static final double MARGIN_FRACTION = 0.05;

    private SwitchGuard() {
    }

    /**
     * Whether an alternative bounded above by {@code alternativeUpper} is clearly below a current choice with lower
     * bound {@code currentLower} and mean {@code currentMean} (all in the same unit).
     */
    public static boolean clearlyBelow(double alternativeUpper, double currentLower, double currentMean) {
        return alternativeUpper < currentLower - MARGIN_FRACTION * currentMean;
    }

    /** {@link #clearlyBelow} for two estimates: mean plus error of the alternative against the current one's. */
    public static boolean clearlyFaster(CostEstimate current, CostEstimate alternative) {
        return clearlyBelow((double) alternative.predictedNanos() + alternative.errorNanos(),
                (double) current.predictedNanos() - current.errorNanos(), current.predictedNanos());
    }
}
