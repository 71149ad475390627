package io.orbitkv.codecs.extent;

import static org.assertj.core.api.Assertions.assertThat;
import static org.quicktheories.QuickTheory.qt;
import static org.quicktheories.generators.SourceDSL.integers;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;

/** CRC32C against the JDK's; the property runs on QuickTheories (a failure prints "Seed was N"; -DQT_SEED=N replays). */
class Crc32cTest {

    @Test
    void matchesTheStandardCheckValue() {
        // The CRC-32C check value for the ASCII string "123456789" (RFC 3720 / iSCSI).
        assertThat(Crc32c.of("123456789".getBytes(StandardCharsets.US_ASCII))).isEqualTo(0xE3069283);
    }

    @Test
    void segmentAndArraySliceAgree() {
        // Arrays of 0..255 bytes of any value, empty ones included.
        qt().withExamples(200)
                .forAll(SsdExtentHeaderTest.byteArrays(integers().between(0, 255)), integers().between(0, 64))
                .checkAssert((bytes, skip) -> {
                    int offset = Math.min(skip, bytes.length);
                    int length = bytes.length - offset;
                    CRC32C reference = new CRC32C();
                    reference.update(bytes, offset, length);
                    int expected = (int) reference.getValue();

                    assertThat(Crc32c.of(bytes, offset, length)).isEqualTo(expected);
                    assertThat(Crc32c.of(MemorySegment.ofArray(bytes).asSlice(offset, length))).isEqualTo(expected);
                    try (Arena arena = Arena.ofConfined()) {
                        MemorySegment offHeap = arena.allocate(Math.max(1, length));
                        MemorySegment.copy(MemorySegment.ofArray(bytes), offset, offHeap, 0, length);
                        assertThat(Crc32c.of(offHeap.asSlice(0, length))).isEqualTo(expected);
                    }
                });
    }
}
