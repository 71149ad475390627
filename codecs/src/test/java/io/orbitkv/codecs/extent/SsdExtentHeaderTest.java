package io.orbitkv.codecs.extent;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.quicktheories.QuickTheory.qt;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.lists;
import static org.quicktheories.generators.SourceDSL.longs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.quicktheories.core.Gen;

/**
 * Extent header codec: round trips and corruption detection. The properties run on QuickTheories; a failure prints
 * the shrunk example and "Seed was N", and {@code -DQT_SEED=N} replays exactly that run.
 */
class SsdExtentHeaderTest {

    private static final byte[] NAMESPACE = "namespace-16byte".getBytes(java.nio.charset.StandardCharsets.US_ASCII);

    /** Bytes of any value, in arrays whose length is drawn from {@code lengths}. */
    static Gen<byte[]> byteArrays(Gen<Integer> lengths) {
        Gen<Byte> bytes = integers().between(Byte.MIN_VALUE, Byte.MAX_VALUE).map(Integer::byteValue);
        return lengths.flatMap(length -> lists().of(bytes).ofSize(length).map(list -> {
            byte[] array = new byte[list.size()];
            for (int i = 0; i < array.length; i++) {
                array[i] = list.get(i);
            }
            return array;
        }));
    }

    static Gen<SsdExtentHeader> headers() {
        Gen<byte[]> namespaces = byteArrays(integers().between(SsdExtentHeader.NAMESPACE_BYTES,
                SsdExtentHeader.NAMESPACE_BYTES));
        Gen<byte[]> hashes = byteArrays(integers().between(1, 64));
        Gen<Integer> groups = integers().all();
        Gen<Integer> representations = integers().between(0, 0xFFFF);
        Gen<Long> payloadLengths = longs().between(0, 1L << 40);
        Gen<Long> generations = longs().all();
        Gen<Long> sequences = longs().all();
        Gen<Integer> crcs = integers().all();
        Gen<Object[]> identity = namespaces.zip(groups, hashes, representations, (ns, group, hash, rep) ->
                new Object[] {ns, group, hash, rep});
        return identity.zip(payloadLengths, generations, sequences, crcs, (id, len, gen, seq, crc) ->
                new SsdExtentHeader((byte[]) id[0], (Integer) id[1], (byte[]) id[2], (Integer) id[3], len, gen, true,
                        seq, crc));
    }

    @Test
    void headerRoundTrips() {
        qt().withExamples(300).forAll(headers()).checkAssert(header -> {
            MemorySegment block = MemorySegment.ofArray(new byte[SsdExtentHeader.HEADER_BLOCK_BYTES]);
            header.encode(block);
            assertThat(SsdExtentHeader.decodeHeader(block)).isEqualTo(new ExtentDecodeResult.Valid(header));
            assertThat(header.extentLength() % SsdExtentHeader.EXTENT_ALIGNMENT_BYTES).isZero();
            assertThat(header.extentLength()).isGreaterThanOrEqualTo(SsdExtentHeader.HEADER_BLOCK_BYTES
                    + header.payloadLength());
        });
    }

    @Test
    void anySingleChangedHeaderByteIsDetected() {
        qt().withExamples(500)
                .forAll(headers(), integers().between(0, 4095), integers().between(1, 255))
                .checkAssert((header, position, xorMask) -> {
                    MemorySegment block = MemorySegment.ofArray(new byte[SsdExtentHeader.HEADER_BLOCK_BYTES]);
                    header.encode(block);
                    byte original = block.get(ValueLayout.JAVA_BYTE, position);
                    block.set(ValueLayout.JAVA_BYTE, position, (byte) (original ^ xorMask));

                    ExtentDecodeResult result = SsdExtentHeader.decodeHeader(block);

                    assertThat(result.isValid()).isFalse();
                    if (position < 4) {
                        assertThat(result).isEqualTo(ExtentDecodeResult.NotAnExtent.INSTANCE);
                    } else {
                        assertThat(result).isEqualTo(new ExtentDecodeResult.Corrupt(
                                ExtentDecodeResult.CorruptReason.HEADER_CHECKSUM_MISMATCH));
                    }
                });
    }

    @Test
    void extentRoundTripsAndTruncatedPayloadIsTorn() {
        qt().withExamples(200)
                .forAll(integers().between(1, 20_000), integers().between(1, 20_000), longs().between(0, Long.MAX_VALUE))
                .checkAssert((payloadBytes, missingBytes, generation) -> {
                    byte[] payload = new byte[payloadBytes];
                    new Random(payloadBytes * 31L + generation).nextBytes(payload);
                    SsdExtentHeader header = SsdExtentHeader.committedFor(NAMESPACE, 7, new byte[] {1, 2, 3}, 1,
                            generation, 42, MemorySegment.ofArray(payload));
                    MemorySegment extent = MemorySegment.ofArray(new byte[Math.toIntExact(header.extentLength())]);
                    header.encode(extent);
                    MemorySegment.copy(payload, 0, extent, ValueLayout.JAVA_BYTE, SsdExtentHeader.HEADER_BLOCK_BYTES,
                            payloadBytes);

                    assertThat(SsdExtentHeader.decode(extent)).isEqualTo(new ExtentDecodeResult.Valid(header));

                    long truncatedBytes = SsdExtentHeader.HEADER_BLOCK_BYTES + payloadBytes
                            - Math.min(missingBytes, payloadBytes);
                    assertThat(SsdExtentHeader.decode(extent.asSlice(0, truncatedBytes))).isEqualTo(
                            new ExtentDecodeResult.Torn(ExtentDecodeResult.TornReason.PAYLOAD_TRUNCATED, header));
                });
    }

    @Test
    void anyChangedPayloadByteIsTorn() {
        qt().withExamples(200)
                .forAll(integers().between(1, 9000), integers().between(0, 8999), integers().between(1, 255))
                .checkAssert((payloadBytes, position, xorMask) -> {
                    int changed = position % payloadBytes;
                    MemorySegment payload = MemorySegment.ofArray(new byte[payloadBytes]);
                    payload.fill((byte) 0x5A);
                    SsdExtentHeader header = SsdExtentHeader.committedFor(NAMESPACE, 1, new byte[] {9}, 0, 1, 1,
                            payload);
                    MemorySegment extent = MemorySegment.ofArray(new byte[Math.toIntExact(header.extentLength())]);
                    header.encode(extent);
                    MemorySegment.copy(payload, 0, extent, SsdExtentHeader.HEADER_BLOCK_BYTES, payloadBytes);
                    long changedOffset = SsdExtentHeader.HEADER_BLOCK_BYTES + changed;
                    extent.set(ValueLayout.JAVA_BYTE, changedOffset, (byte) (0x5A ^ xorMask));

                    assertThat(SsdExtentHeader.decode(extent)).isEqualTo(new ExtentDecodeResult.Torn(
                            ExtentDecodeResult.TornReason.PAYLOAD_CHECKSUM_MISMATCH, header));
                });
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
