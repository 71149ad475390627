package io.orbitkv.model.plan;

/** Why a plan restores to its boundary (the engine sees it in its reply). */
public enum BoundaryReason {
    /** The longest legal boundary: no prefill rate, no usable estimates, or nothing clearly earlier. */
    LONGEST,
    /**
     * A shorter boundary (recomputation from the valid-prefix origin included) gives a clearly earlier first token:
     * restoring the difference would take longer than recomputing it.
     */
    EARLIER_FIRST_TOKEN,
    /** The longest legal boundary needs more bytes than this demand may lease: the longest that fits. */
    BUDGET
}
