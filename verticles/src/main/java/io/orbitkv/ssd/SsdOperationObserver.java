package io.orbitkv.ssd;

/**
 * Told about every finished SSD write by its completion owner (the store's loop): the hook through which the cost role
 * receives SSD write operation samples. Must not block; called on the SSD role's thread.
 */
public interface SsdOperationObserver {
    SsdOperationObserver NONE = new SsdOperationObserver() {};

    /** A write committed: {@code serviceNanos} from the first submission of its I/O chain to the commit completion. */
    default void onWriteCommitted(long payloadBytes, long serviceNanos) {}

    /** A submitted write failed (I/O error, no space): never a duration. */
    default void onWriteFailed(long payloadBytes, boolean noSpace) {}
}
