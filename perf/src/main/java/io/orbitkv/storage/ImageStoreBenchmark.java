package io.orbitkv.storage;

import io.orbitkv.model.StateKey;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.*;
import io.orbitkv.model.AllocateResult;
import io.orbitkv.model.PositionedKey;
import io.orbitkv.model.GroupProbe;
import io.orbitkv.model.ExactPin;

/**
 * The index lookup of a query: {@link ImageStore#lookupAndPin} of a {@code chainBlocks}-block chain that is fully
 * resident, then {@link ImageStore#unpin}, on a store populated with 4,096 sealed 64 KiB images in an Arena-allocated
 * 256 MiB pool segment. This is the storage role's share of a READY query, per request (not per page). It lives in
 * the storage package because the store is package-private.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class ImageStoreBenchmark {
    private static final long PAGE_BYTES = 64 << 10;
    private static final int IMAGES = 4096;

    @Param({"32"})
    public int chainBlocks;

    private Arena arena;
    private ImageStore store;
    private List<List<StateKey>> chains;
    private List<GroupProbe> probes;

    @Setup
    public void setUp() {
        arena = Arena.ofShared();
        long poolBytes = PAGE_BYTES * IMAGES;
        MemorySegment pool = arena.allocate(poolBytes, 4096);
        store = new ImageStore(new PoolAllocator(poolBytes, 2L << 20), pool, poolBytes, new ResidencyStream(1, 1 << 16),
                new ImageStore.Listener() {});
        byte[] namespace = new byte[StateKey.NAMESPACE_BYTES];
        namespace[0] = 7;
        List<StateKey> keys = new ArrayList<>(IMAGES);
        for (int i = 0; i < IMAGES; i++) {
            keys.add(StateKey.of(namespace, 0, ByteBuffer.allocate(32).putLong(0x5EED).putLong(i).array()));
        }
        for (int start = 0; start < IMAGES; start += 256) {
            List<StateKey> batch = keys.subList(start, start + 256);
            AllocateResult allocated = store.allocate(1, batch, Collections.nCopies(batch.size(), PAGE_BYTES));
            store.seal(1, allocated.publishId(), List.of(), List.of());
        }
        chains = List.of(keys.subList(IMAGES / 2, IMAGES / 2 + chainBlocks));
        List<PositionedKey> positioned = new ArrayList<>(chainBlocks);
        for (int p = 0; p < chainBlocks; p++) {
            positioned.add(new PositionedKey(p, chains.get(0).get(p)));
        }
        probes = List.of(new GroupProbe(0, positioned));
    }

    @TearDown
    public void tearDown() {
        arena.close();
    }

    /** What a query does to the index: probe the metadata, pin the chosen pages exactly, and (on release) unpin. */
    @Benchmark
    public int probePinUnpin() {
        int sealed = store.probe(probes).get(0).sealed().cardinality();
        ExactPin pin = store.pinExact(chains);
        store.unpin(pin.pinned());
        return sealed + pin.pinned().get(0).size();
    }
}
