package io.orbitkv.peer;

import io.orbitkv.nativeio.shm.PoolPages;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.util.function.BooleanSupplier;

/**
 * Write-faults a mapping of the pool once, page by page, without changing a byte: an atomic add of zero to one int
 * per 4 KiB page, or per 2 MiB page when the pool is on huge pages. A fresh mapping costs a page fault at the first write of each page; on a requester that first write
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

    /**
     * The page size to prefault a pool with whose directory gave {@code pages} ({@link PoolPages}, asked once by the
     * Manager): 2 MiB on huge pages, else 4 KiB (which covers huge pages too, one write per 4 KiB).
     */
    public static long pageBytes(PoolPages.Answer pages) {
        return pages.hugePages() ? PoolPages.HUGE_PAGE_BYTES : PAGE;
    }

    /** Faults the first {@code bytes} (rounded down to 4 KiB) of {@code mapping}, 4 KiB pages; answers the bytes covered. */
    public static long prefault(MemorySegment mapping, long bytes, BooleanSupplier stop) {
        return prefault(mapping, bytes, PAGE, stop);
    }

    /**
     * Faults the first {@code bytes} (rounded down to 4 KiB) of {@code mapping} with one write per {@code pageBytes}:
     * 4 KiB, or 2 MiB when the pool is on huge pages (then the first write maps the whole 2 MiB page, so one write
     * per huge page covers it); answers the bytes covered.
     */
    public static long prefault(MemorySegment mapping, long bytes, long pageBytes, BooleanSupplier stop) {
        if (pageBytes < PAGE || Long.bitCount(pageBytes) != 1) {
            throw new IllegalArgumentException("page size must be a power of two of at least 4 KiB, got " + pageBytes);
        }
        long end = Math.min(bytes, mapping.byteSize()) & ~(PAGE - 1);
        long done = 0;
        while (done < end && !stop.getAsBoolean()) {
            long stepEnd = Math.min(end, done + Math.max(STEP, pageBytes));
            for (long o = done; o < stepEnd; o += pageBytes) {
                INT.getAndAdd(mapping, o, 0);
            }
            done = stepEnd;
        }
        return done;
    }
}
