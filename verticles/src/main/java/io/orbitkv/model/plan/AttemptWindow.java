package io.orbitkv.model.plan;

import java.util.Objects;
import io.orbitkv.model.plan.TimeEstimate;

/**
 * What an execution owner is told about the time of one acquisition: how long the demand may still wait from the
 * moment of the acquisition (a duration, so no clock crosses a role boundary), and the plan's expected time from its
 * decision to its target. An owner whose submitted work can hang on another host (a stopped peer) bounds its attempt
 * with it so that the fallback route still fits in the same waiting budget; owners of local routes ignore it.
 *
 * @param remainingNanos what is left of the demand's waiting budget; {@link Long#MAX_VALUE}: the demand names none;
 *                       zero or negative: spent
 * @param expected       the plan's estimated time to its target ({@link Plan#stateReady}); unknown when the planner had
 *                       no usable estimate
 */
public record AttemptWindow(long remainingNanos, TimeEstimate expected) {
    /** No waiting budget and no estimate: the owner applies its own configured bound. */
    public static final AttemptWindow UNBOUNDED = new AttemptWindow(Long.MAX_VALUE, TimeEstimate.UNKNOWN);

    public AttemptWindow {
        Objects.requireNonNull(expected, "expected");
    }

    /** Whether the demand names a waiting budget. */
    public boolean bounded() {
        return remainingNanos != Long.MAX_VALUE;
    }
}
