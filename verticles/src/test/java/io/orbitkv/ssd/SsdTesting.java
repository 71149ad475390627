package io.orbitkv.ssd;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.model.StateKey;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import io.orbitkv.model.SsdResidencyChange;

/**
 * Test harness: one store on a dedicated role thread, its residency changes, a test arena for sources and
 * destinations. Every wait is a future with a timeout; nothing sleeps.
 */
final class SsdTesting implements AutoCloseable {

    static final long WAIT_S = 20;
    static final byte[] NAMESPACE = "orbitkv-ssd-test".getBytes(StandardCharsets.US_ASCII);

    final RoleLoop.Dedicated loop = RoleLoop.dedicated("ssd-test-role");
    final List<SsdResidencyChange> changes = new CopyOnWriteArrayList<>();
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    final Arena arena = Arena.ofShared();
    SsdStore store;

    private SsdTesting() {
    }

    static SsdTesting open(SsdSettings settings) throws Exception {
        SsdTesting t = new SsdTesting();
        try {
            t.store = get(SsdStore.open(settings, t.loop, t.changes::add, t.registry));
        } catch (Exception e) {
            t.close();
            throw e;
        }
        return t;
    }

    /** Small extents (64 KiB payload) so tests stay fast; capacity in extents. */
    static SsdSettings small(Path dir, int extents) {
        return new SsdSettings().directory(dir).extentBytes((64 << 10) + 4096)
                .capacityBytes((long) extents * ((64 << 10) + 4096)).writeStagingBuffers(2).queueDepth(8);
    }

    static StateKey key(long index) {
        return StateKey.of(NAMESPACE, 0, ByteBuffer.allocate(8).putLong(index).array());
    }

    static long indexOf(StateKey key) {
        return ByteBuffer.wrap(key.blockHash()).getLong();
    }

    static byte patternByte(long seed, long i) {
        long x = (seed + 1) * 0x9E3779B97F4A7C15L + i * 0xBF58476D1CE4E5B9L;
        return (byte) (x ^ (x >>> 29) ^ (x >>> 47));
    }

    static void fill(MemorySegment segment, long length, long seed) {
        for (long i = 0; i < length; i++) {
            segment.set(ValueLayout.JAVA_BYTE, i, patternByte(seed, i));
        }
    }

    static boolean matches(MemorySegment segment, long length, long seed) {
        for (long i = 0; i < length; i++) {
            if (segment.get(ValueLayout.JAVA_BYTE, i) != patternByte(seed, i)) {
                return false;
            }
        }
        return true;
    }

    /** A source segment holding the pattern for {@code seed}. */
    MemorySegment source(long length, long seed) {
        MemorySegment segment = arena.allocate(length, 4096);
        fill(segment, length, seed);
        return segment;
    }

    /** Offers a write of key(index) with the pattern of index and waits for its outcome. */
    SsdWriteOutcome write(long index, long length) throws Exception {
        MemorySegment source = source(length, index);
        return await(() -> store.offerWrite(key(index), () -> source, length));
    }

    <T> T call(Supplier<T> action) throws Exception {
        CompletableFuture<T> result = new CompletableFuture<>();
        loop.execute(() -> {
            try {
                result.complete(action.get());
            } catch (Throwable t) {
                result.completeExceptionally(t);
            }
        });
        return get(result);
    }

    void run(Runnable action) throws Exception {
        call(() -> {
            action.run();
            return null;
        });
    }

    /** Starts an async action on the role thread and waits for its future. */
    <T> T await(Supplier<? extends CompletableFuture<T>> action) throws Exception {
        CompletableFuture<T> started = call(action::get);
        return get(started);
    }

    static <T> T get(CompletableFuture<T> future) throws Exception {
        try {
            return future.get(WAIT_S, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof Exception cause) {
                throw cause;
            }
            throw e;
        }
    }

    SsdStats stats() throws Exception {
        return call(store::stats);
    }

    double counter(String name, String... tags) {
        var counter = registry.find(name).tags(tags).counter();
        return counter == null ? 0 : counter.count();
    }

    /** Closes the store only (the harness can open another on the same role thread). */
    void closeStore() throws Exception {
        if (store != null) {
            get(store.close());
            store = null;
        }
    }

    SsdTesting reopen(SsdSettings settings) throws Exception {
        closeStore();
        changes.clear();
        registry = new SimpleMeterRegistry();
        store = get(SsdStore.open(settings, loop, changes::add, registry));
        return this;
    }

    @Override
    public void close() throws Exception {
        try {
            closeStore();
        } finally {
            loop.close();
            arena.close();
        }
    }
}
