package io.orbitkv.ssd;

/**
 * Told about every finished SSD write by its completion owner (the store's loop): the hook through which the cost role
 * receives SSD write operation samples. Must not block; called on the SSD role's thread unless said otherwise.
 */
public interface SsdOperationObserver {
    SsdOperationObserver NONE = new SsdOperationObserver() {};

    /**
     * A write committed: {@code serviceNanos} from the first submission of its I/O chain to the commit completion;
     * {@code fromSource} when the payload went straight from the DRAM slot (no staging copy); {@code totalNanos} from
     * the offer (the seal) to the commit: the complete save route.
     */
    default void onWriteCommitted(long payloadBytes, long serviceNanos, boolean fromSource, long totalNanos,
                                  boolean otherPathPossible) {}

    /** The staging copy of a write's payload out of its DRAM slot took {@code nanos} (the pool copy path). */
    default void onStagingCopy(long payloadBytes, long nanos) {}

    /** A submitted write failed (I/O error, no space): never a duration. */
    default void onWriteFailed(long payloadBytes, boolean noSpace) {}

    /**
     * A read's payload checksum was computed in {@code nanos}, on the thread that verified it (a verifier thread,
     * or the role thread with {@link SsdSettings#verifierThreads} 0).
     */
    default void onReadVerified(long payloadBytes, long nanos) {}
}
