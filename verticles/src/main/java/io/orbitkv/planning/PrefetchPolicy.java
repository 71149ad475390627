package io.orbitkv.planning;

import java.util.OptionalLong;
import io.orbitkv.model.plan.TimeEstimate;

/**
 * When a transfer should start. Pure arithmetic. (How much speculation a demand's confidence admits is the admission
 * role's decision, next to its byte budgets.)
 *
 * <h2>Deadline</h2>
 * <pre>
 *   latest start = first use - state ready (mean + error) - margin,   margin = max(floor, 5 % of the mean)
 * </pre>
 * A speculative prefetch starts no later than its latest start. When DRAM is plentiful it starts at once (holding the
 * prepared pages a little longer costs nothing); when DRAM is tight it starts at its latest start, not earlier, so the
 * prepared pages occupy the pool no longer than needed. Without a first use or an estimate there is no deadline to
 * aim at: it starts at once (unknown is not "late" and not "far away"). A demand read's latest start orders the
 * transfer queues by slack ({@link TransferScheduler}); a demand without a first use is due now.
 */
final class PrefetchPolicy {

    /** Least margin before first use, whatever the estimate. */
    public static final long MARGIN_FLOOR_NANOS = 1_000_000;
    public static final double MARGIN_FRACTION = 0.05;

    public enum Reason {
        /** No first use or no estimate: no deadline to aim at. */
        START_NOW_NO_DEADLINE,
        /** DRAM is plentiful: start at once, before the latest start. */
        START_NOW,
        /** The latest start has already passed: start at once (it will be late by the difference). */
        START_NOW_LATE,
        /** DRAM is tight: start exactly at the latest start. */
        START_AT_LATEST
    }

    /** When to start: {@code startAtNanos} and the deadline it serves ({@link Long#MAX_VALUE}: none). */
    public record Start(long startAtNanos, long latestStartNanos, Reason reason) {}

    private PrefetchPolicy() {
    }

    /** The latest start for first use {@code firstUseNanos} given the estimated time to the target. */
    public static OptionalLong latestStartNanos(OptionalLong firstUseNanos, TimeEstimate stateReady) {
        if (firstUseNanos.isEmpty() || !stateReady.known()) {
            return OptionalLong.empty();
        }
        long margin = Math.max(MARGIN_FLOOR_NANOS, (long) (MARGIN_FRACTION * stateReady.meanNanos()));
        return OptionalLong.of(firstUseNanos.getAsLong() - stateReady.upperNanos() - margin);
    }

    /** When a speculative prefetch starts (see the class note). */
    public static Start speculativeStart(long nowNanos, OptionalLong firstUseNanos, TimeEstimate stateReady,
                                         boolean dramTight) {
        OptionalLong latest = latestStartNanos(firstUseNanos, stateReady);
        if (latest.isEmpty()) {
            return new Start(nowNanos, Long.MAX_VALUE, Reason.START_NOW_NO_DEADLINE);
        }
        long latestStart = latest.getAsLong();
        if (latestStart <= nowNanos) {
            return new Start(nowNanos, latestStart, Reason.START_NOW_LATE);
        }
        return dramTight ? new Start(latestStart, latestStart, Reason.START_AT_LATEST)
                : new Start(nowNanos, latestStart, Reason.START_NOW);
    }

    /**
     * The slack key of a demand read: its latest start, or now when its first use is unknown (the engine is waiting)
     * and when the estimate is unknown (it cannot be started any later safely).
     */
    public static long demandLatestStartNanos(long nowNanos, OptionalLong firstUseNanos, TimeEstimate stateReady) {
        if (firstUseNanos.isEmpty()) {
            return nowNanos;
        }
        OptionalLong latest = latestStartNanos(firstUseNanos, stateReady);
        return latest.isPresent() ? latest.getAsLong() : Math.min(nowNanos, firstUseNanos.getAsLong());
    }
}
