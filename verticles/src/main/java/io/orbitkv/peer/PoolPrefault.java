package io.orbitkv.peer;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.util.function.BooleanSupplier;

/**
 * Write-faults a mapping of the pool once, page by page, without changing a byte: an atomic add of zero to one int
 * per 4 KiB page. A fresh mapping costs a page fault at the first write of each page; on a requester that first write
 * would be a receive's recv(2) or copy into a slot, on the event loop in the middle of a transfer.
 *
 * <p>Design note (safety, concurrency): the add is a locked read-modify-write of zero, so it is a write access for the
 * MMU while no value ever changes, even with engines or receives writing the same ints at that moment. The caller owns
 * the mapping and keeps it mapped until this returns; {@code stop} is polled every 2 MiB so an owner that stops waits
 * for at most one more step. Runs on a worker thread (never an event loop).
 */
public final class PoolPrefault {
    static final long PAGE = 4096;
    static final long STEP = 2L << 20;
    private static final VarHandle INT = ValueLayout.JAVA_INT.varHandle();

    private PoolPrefault() {}

    /** Faults the first {@code bytes} (rounded down to 4 KiB) of {@code mapping}; answers the bytes covered. */
    public static long prefault(MemorySegment mapping, long bytes, BooleanSupplier stop) {
        long end = Math.min(bytes, mapping.byteSize()) & ~(PAGE - 1);
        long done = 0;
        while (done < end && !stop.getAsBoolean()) {
            long stepEnd = Math.min(end, done + STEP);
            for (long o = done; o < stepEnd; o += PAGE) {
                INT.getAndAdd(mapping, o, 0);
            }
            done = stepEnd;
        }
        return done;
    }
}
