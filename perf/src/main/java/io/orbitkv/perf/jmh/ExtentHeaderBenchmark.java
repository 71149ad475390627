package io.orbitkv.perf.jmh;

import io.orbitkv.codecs.extent.ExtentDecodeResult;
import io.orbitkv.codecs.extent.SsdExtentHeader;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.*;

/** {@link SsdExtentHeader} encode into and decode from a 4 KiB header block (per SSD extent written or read). */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class ExtentHeaderBenchmark {
    private Arena arena;
    private MemorySegment block;
    private MemorySegment encoded;
    private SsdExtentHeader header;

    @Setup
    public void setUp() {
        arena = Arena.ofShared();
        block = arena.allocate(SsdExtentHeader.HEADER_BLOCK_BYTES, 4096);
        encoded = arena.allocate(SsdExtentHeader.HEADER_BLOCK_BYTES, 4096);
        byte[] namespace = new byte[SsdExtentHeader.NAMESPACE_BYTES];
        byte[] hash = new byte[32];
        for (int i = 0; i < hash.length; i++) {
            hash[i] = (byte) (i * 31);
        }
        header = new SsdExtentHeader(namespace, 0, hash, 1, 2 << 20, 42, true, 7, 0x1234_5678);
        header.encode(encoded);
    }

    @TearDown
    public void tearDown() {
        arena.close();
    }

    @Benchmark
    public MemorySegment encode() {
        header.encode(block);
        return block;
    }

    @Benchmark
    public ExtentDecodeResult decodeHeader() {
        return SsdExtentHeader.decodeHeader(encoded);
    }
}
