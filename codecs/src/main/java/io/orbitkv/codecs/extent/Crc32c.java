package io.orbitkv.codecs.extent;

import java.lang.foreign.MemorySegment;
import java.util.Objects;
import java.util.zip.CRC32C;

/**
 * CRC32C (Castagnoli) over memory segments and byte-array slices.
 *
 * <p>Design note: {@link CRC32C} is a JIT intrinsic on x86-64 and aarch64 when fed a {@link java.nio.ByteBuffer}, so
 * segments are viewed through {@link MemorySegment#asByteBuffer()} (no copy, for heap and off-heap segments alike).
 * A {@code ByteBuffer} view is limited to {@link Integer#MAX_VALUE} bytes, so larger segments are fed in slices.
 */
public final class Crc32c {

    private static final long MAX_VIEW_BYTES = Integer.MAX_VALUE - 8;

    private Crc32c() {
    }

    /** CRC32C of the whole segment. */
    public static int of(MemorySegment segment) {
        CRC32C crc = new CRC32C();
        update(crc, segment);
        return (int) crc.getValue();
    }

    /** CRC32C of {@code length} bytes of {@code array} starting at {@code offset}. */
    public static int of(byte[] array, int offset, int length) {
        Objects.checkFromIndexSize(offset, length, array.length);
        CRC32C crc = new CRC32C();
        crc.update(array, offset, length);
        return (int) crc.getValue();
    }

    /** CRC32C of the whole array. */
    public static int of(byte[] array) {
        return of(array, 0, array.length);
    }

    /** Feeds the whole segment into a running checksum (for checksums built from several pieces). */
    public static void update(CRC32C crc, MemorySegment segment) {
        long size = segment.byteSize();
        for (long position = 0; position < size; position += MAX_VIEW_BYTES) {
            long sliceBytes = Math.min(MAX_VIEW_BYTES, size - position);
            crc.update(segment.asSlice(position, sliceBytes).asByteBuffer());
        }
    }
}
