package io.orbitkv.codecs.extent;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Random;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.LongRange;
import org.junit.jupiter.api.Test;

class SsdExtentHeaderTest {

    private static final byte[] NAMESPACE = "namespace-16byte".getBytes(java.nio.charset.StandardCharsets.US_ASCII);

    @Provide
    Arbitrary<SsdExtentHeader> headers() {
        Arbitrary<byte[]> namespaces = Arbitraries.bytes().array(byte[].class).ofSize(SsdExtentHeader.NAMESPACE_BYTES);
        Arbitrary<byte[]> hashes = Arbitraries.bytes().array(byte[].class).ofMinSize(1).ofMaxSize(64);
        Arbitrary<Integer> groups = Arbitraries.integers();
        Arbitrary<Integer> representations = Arbitraries.integers().between(0, 0xFFFF);
        Arbitrary<Long> payloadLengths = Arbitraries.longs().between(0, 1L << 40);
        Arbitrary<Long> generations = Arbitraries.longs();
        Arbitrary<Long> sequences = Arbitraries.longs();
        Arbitrary<Integer> crcs = Arbitraries.integers();
        return Combinators.combine(namespaces, groups, hashes, representations, payloadLengths, generations, sequences,
                crcs).as((ns, group, hash, rep, len, gen, seq, crc) ->
                new SsdExtentHeader(ns, group, hash, rep, len, gen, true, seq, crc));
    }

    @Property(tries = 300)
    void headerRoundTrips(@ForAll("headers") SsdExtentHeader header) {
        MemorySegment block = MemorySegment.ofArray(new byte[SsdExtentHeader.HEADER_BLOCK_BYTES]);
        header.encode(block);
        assertThat(SsdExtentHeader.decodeHeader(block)).isEqualTo(new ExtentDecodeResult.Valid(header));
        assertThat(header.extentLength() % SsdExtentHeader.EXTENT_ALIGNMENT_BYTES).isZero();
        assertThat(header.extentLength()).isGreaterThanOrEqualTo(SsdExtentHeader.HEADER_BLOCK_BYTES
                + header.payloadLength());
    }

    @Property(tries = 500)
    void anySingleChangedHeaderByteIsDetected(@ForAll("headers") SsdExtentHeader header,
                                              @ForAll @IntRange(min = 0, max = 4095) int position,
                                              @ForAll @IntRange(min = 1, max = 255) int xorMask) {
        MemorySegment block = MemorySegment.ofArray(new byte[SsdExtentHeader.HEADER_BLOCK_BYTES]);
        header.encode(block);
        byte original = block.get(ValueLayout.JAVA_BYTE, position);
        block.set(ValueLayout.JAVA_BYTE, position, (byte) (original ^ xorMask));

        ExtentDecodeResult result = SsdExtentHeader.decodeHeader(block);

        assertThat(result.isValid()).isFalse();
        if (position < 4) {
            assertThat(result).isEqualTo(ExtentDecodeResult.NotAnExtent.INSTANCE);
        } else {
            assertThat(result).isEqualTo(
                    new ExtentDecodeResult.Corrupt(ExtentDecodeResult.CorruptReason.HEADER_CHECKSUM_MISMATCH));
        }
    }

    @Property(tries = 200)
    void extentRoundTripsAndTruncatedPayloadIsTorn(@ForAll @IntRange(min = 1, max = 20_000) int payloadBytes,
                                                   @ForAll @IntRange(min = 1, max = 20_000) int missingBytes,
                                                   @ForAll @LongRange(min = 0) long generation) {
        byte[] payload = new byte[payloadBytes];
        new Random(payloadBytes * 31L + generation).nextBytes(payload);
        SsdExtentHeader header = SsdExtentHeader.committedFor(NAMESPACE, 7, new byte[] {1, 2, 3}, 1, generation, 42,
                MemorySegment.ofArray(payload));
        MemorySegment extent = MemorySegment.ofArray(new byte[Math.toIntExact(header.extentLength())]);
        header.encode(extent);
        MemorySegment.copy(payload, 0, extent, ValueLayout.JAVA_BYTE, SsdExtentHeader.HEADER_BLOCK_BYTES,
                payloadBytes);

        assertThat(SsdExtentHeader.decode(extent)).isEqualTo(new ExtentDecodeResult.Valid(header));

        long truncatedBytes = SsdExtentHeader.HEADER_BLOCK_BYTES + payloadBytes - Math.min(missingBytes, payloadBytes);
        assertThat(SsdExtentHeader.decode(extent.asSlice(0, truncatedBytes))).isEqualTo(
                new ExtentDecodeResult.Torn(ExtentDecodeResult.TornReason.PAYLOAD_TRUNCATED, header));
    }

    @Property(tries = 200)
    void anyChangedPayloadByteIsTorn(@ForAll @IntRange(min = 1, max = 9000) int payloadBytes,
                                     @ForAll @IntRange(min = 0, max = 8999) int position,
                                     @ForAll @IntRange(min = 1, max = 255) int xorMask) {
        int changed = position % payloadBytes;
        MemorySegment payload = MemorySegment.ofArray(new byte[payloadBytes]);
        payload.fill((byte) 0x5A);
        SsdExtentHeader header = SsdExtentHeader.committedFor(NAMESPACE, 1, new byte[] {9}, 0, 1, 1, payload);
        MemorySegment extent = MemorySegment.ofArray(new byte[Math.toIntExact(header.extentLength())]);
        header.encode(extent);
        MemorySegment.copy(payload, 0, extent, SsdExtentHeader.HEADER_BLOCK_BYTES, payloadBytes);
        long changedOffset = SsdExtentHeader.HEADER_BLOCK_BYTES + changed;
        extent.set(ValueLayout.JAVA_BYTE, changedOffset, (byte) (0x5A ^ xorMask));

        assertThat(SsdExtentHeader.decode(extent)).isEqualTo(
                new ExtentDecodeResult.Torn(ExtentDecodeResult.TornReason.PAYLOAD_CHECKSUM_MISMATCH, header));
    }

    @Test
    void zeroedBlockIsNotAnExtent() {
        assertThat(SsdExtentHeader.decodeHeader(MemorySegment.ofArray(new byte[4096])))
                .isEqualTo(ExtentDecodeResult.NotAnExtent.INSTANCE);
    }

    @Test
    void shortHeaderBlockIsTorn() {
        assertThat(SsdExtentHeader.decodeHeader(MemorySegment.ofArray(new byte[100])))
                .isEqualTo(new ExtentDecodeResult.Torn(ExtentDecodeResult.TornReason.HEADER_TRUNCATED, null));
    }

    @Test
    void uncommittedHeaderIsTorn() {
        SsdExtentHeader header = new SsdExtentHeader(NAMESPACE, 1, new byte[] {1}, 0, 10, 3, false, 0, 0);
        MemorySegment block = MemorySegment.ofArray(new byte[4096]);
        header.encode(block);
        assertThat(SsdExtentHeader.decodeHeader(block)).isEqualTo(
                new ExtentDecodeResult.Torn(ExtentDecodeResult.TornReason.NOT_COMMITTED, header));
    }

    @Test
    void headerWorksInAlignedOffHeapMemory() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment payload = arena.allocate(8192, 4096);
            payload.fill((byte) 3);
            SsdExtentHeader header = SsdExtentHeader.committedFor(NAMESPACE, 2, new byte[64], 5, 9, 10, payload);
            MemorySegment extent = arena.allocate(header.extentLength(), 4096);
            header.encode(extent);
            MemorySegment.copy(payload, 0, extent, 4096, 8192);
            assertThat(header.extentLength()).isEqualTo(12288);
            assertThat(SsdExtentHeader.decode(extent)).isEqualTo(new ExtentDecodeResult.Valid(header));
        }
    }

    @Test
    void rejectsInvalidFieldsAtConstruction() {
        assertThatThrownBy(() -> new SsdExtentHeader(new byte[15], 0, new byte[1], 0, 0, 0, true, 0, 0))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new SsdExtentHeader(NAMESPACE, 0, new byte[0], 0, 0, 0, true, 0, 0))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new SsdExtentHeader(NAMESPACE, 0, new byte[65], 0, 0, 0, true, 0, 0))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new SsdExtentHeader(NAMESPACE, 0, new byte[1], 0x10000, 0, 0, true, 0, 0))
                .isInstanceOf(IllegalArgumentException.class);
    }
}
