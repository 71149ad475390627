package io.orbitkv.storage;

import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.*;

/**
 * {@link PoolAllocator} allocate + free of one page-sized slot on a half-full 1 GiB pool (2 MiB chunks): the
 * storage role's per-page cost when a publish arrives and when an image is evicted.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class AllocatorBenchmark {
    @Param({"262144"})
    public long pageBytes;

    private PoolAllocator allocator;

    @Setup
    public void setUp() {
        allocator = new PoolAllocator(1L << 30, 2L << 20);
        long half = (1L << 29) / pageBytes;
        for (long i = 0; i < half; i++) {
            allocator.allocate(pageBytes); // half full: the free slot lives in a partially used span
        }
    }

    @Benchmark
    public long allocateFree() {
        PoolAllocator.Slot slot = allocator.allocate(pageBytes);
        allocator.free(slot);
        return slot.generation();
    }
}
