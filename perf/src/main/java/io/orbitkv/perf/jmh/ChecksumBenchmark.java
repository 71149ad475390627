package io.orbitkv.perf.jmh;

import io.orbitkv.codecs.extent.Crc32c;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;
import org.openjdk.jmh.annotations.*;

/**
 * Checksums over one 2 MiB page in off-heap memory: {@link Crc32c} (what seal and the SSD extents use), with
 * {@link CRC32} as the reference the JDK offers, and a 2 MiB memcpy as the physical baseline (a checksum reads the
 * page once; a copy reads and writes it once).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class ChecksumBenchmark {
    public static final int BYTES = 2 << 20;

    private Arena arena;
    private MemorySegment page;
    private MemorySegment copy;

    @Setup
    public void setUp() {
        arena = Arena.ofShared();
        page = arena.allocate(BYTES, 4096);
        copy = arena.allocate(BYTES, 4096);
        for (long i = 0; i < BYTES; i += 8) {
            page.set(java.lang.foreign.ValueLayout.JAVA_LONG, i, i * 0x9E3779B97F4A7C15L);
        }
    }

    @TearDown
    public void tearDown() {
        arena.close();
    }

    @Benchmark
    public int crc32c2MiB() {
        return Crc32c.of(page);
    }

    @Benchmark
    public long crc32Reference2MiB() {
        CRC32 crc = new CRC32();
        crc.update(page.asByteBuffer());
        return crc.getValue();
    }

    @Benchmark
    public MemorySegment memcpyBaseline2MiB() {
        return copy.copyFrom(page);
    }
}
