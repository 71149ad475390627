package io.orbitkv.common;

/**
 * A refusal a role returns on purpose, as a code its callers' proxy maps back to the same typed exception (engine
 * {@code ErrorReason} numbers for {@link OrbitException}, 4001.. for the SSD role's failures).
 */
public interface TypedFailure {
    int failureCode();

    /** The explanation without the code's name. */
    String detail();
}
