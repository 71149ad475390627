package io.orbitkv.model.cost;

/**
 * The two kinds of timing samples. They measure different intervals and are never added together: a route total
 * already contains the waiting and service time of the operations inside it.
 */
public enum SampleKind {
    /** Submission to completion of one I/O, copy or codec step: service time. */
    OPERATION,
    /** Enqueue to a declared completion target: inclusive total time of a complete route. */
    ROUTE
}
