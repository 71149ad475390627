package io.orbitkv.nativeio.testing;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Off-heap test buffers with an owner: every arena made here is counted until closed, so a test can assert that no
 * native memory outlives it ({@link #liveArenas()} back to zero).
 */
public final class TrackedArenas implements AutoCloseable {

    private static final AtomicInteger LIVE_ARENAS = new AtomicInteger();

    private final Arena arena = Arena.ofShared();
    private boolean closed;

    public TrackedArenas() {
        LIVE_ARENAS.incrementAndGet();
    }

    /** A zeroed segment of {@code bytes} at a 4096-aligned address. */
    public MemorySegment allocateAligned(long bytes) {
        return arena.allocate(bytes, 4096);
    }

    public static int liveArenas() {
        return LIVE_ARENAS.get();
    }

    public boolean isAlive() {
        return arena.scope().isAlive();
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            arena.close();
            LIVE_ARENAS.decrementAndGet();
        }
    }
}
