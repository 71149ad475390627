package io.orbitkv.model;

import java.lang.foreign.MemorySegment;
import java.util.function.Supplier;

/**
 * A weak reference to a DRAM image that an SSD write may copy later.
 *
 * <p>Design note: a queued SSD write must not keep its DRAM image alive (DRAM pressure would then depend on disk
 * speed). The SSD role calls {@link #acquire()} on its own thread once, when the write leaves the queue; null means
 * the image is gone (evicted, or its slot generation changed) and the write is dropped and counted. A non-null segment
 * must stay valid and unchanged until {@link #release()}, which the SSD role calls right after copying it into its
 * own aligned staging buffer (before any I/O is queued). The storage role can implement acquire/release as a short
 * pin of the exact slot generation.
 */
@FunctionalInterface
public interface WeakImageSource {

    /** The image bytes (at least the offered length), or null when the image is no longer resident. */
    MemorySegment acquire();

    /** Ends the access begun by a non-null {@link #acquire()}. */
    default void release() {
    }

    /** A source without a pin: valid when the supplier's segment cannot be reused during the copy. */
    static WeakImageSource of(Supplier<MemorySegment> supplier) {
        return supplier::get;
    }
}
