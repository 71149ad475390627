package io.orbitkv.common;

/** A kind of typed failure: an enum constant with a stable numeric code that travels as the event-bus failure code. */
public interface FailureKind {
    /** Stable, disjoint from engine.proto ErrorReason numbers and from every other kind's codes. */
    int code();

    String name();
}
