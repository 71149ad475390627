package io.orbitkv.model.plan;

import io.orbitkv.common.FailureKind;

/**
 * Typed failures of the planning role. Codes are disjoint from engine.proto ErrorReason numbers and the SSD role's
 * 4001.. codes, so they can travel as event-bus failure codes.
 */
public enum PlanningFailure implements FailureKind {
    /** An explicitly requested route cannot run here (capability absent, or it does not serve the target). */
    REQUESTED_ROUTE_UNAVAILABLE(5001),
    /** The completion target cannot be reached here (e.g. engine-restore without a restore role). */
    TARGET_UNAVAILABLE(5002),
    /** Acquisition found evidence stale (evicted, overwritten, fenced): nothing was moved, replan. */
    STALE_EVIDENCE(5003),
    /** A source or destination owner refused admission before any payload moved: replan. */
    SOURCE_REJECTED(5004),
    /** A per-medium transfer queue was full and nothing speculative could make room. */
    QUEUE_FULL(5005),
    /** The preparation was cancelled; everything it held was drained and released. */
    CANCELLED(5006),
    /** Speculative work was dropped before submission (preempted by demand reads or refused). */
    SPECULATION_DROPPED(5007),
    /** Submitted payload movement failed; the work is fenced (terminal) and was not switched to another medium. */
    TRANSFER_FAILED(5008),
    /** The demand handed to planning is inconsistent (a bug in the caller's validation). */
    INVALID_INPUT(5009);

    private final int code;

    PlanningFailure(int code) {
        this.code = code;
    }

    public int code() {
        return code;
    }

    /** Whether a new plan may be made at once: nothing was submitted, so nothing needs fencing first. */
    public boolean beforePayload() {
        return this == STALE_EVIDENCE || this == SOURCE_REJECTED;
    }

    public static PlanningFailure forCode(int code) {
        for (PlanningFailure failure : values()) {
            if (failure.code == code) {
                return failure;
            }
        }
        return null;
    }
}
