package io.orbitkv.perf.ssd;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;

/**
 * Bench payloads that depend on their key, so that a read served from the wrong extent fails the store's CRC32C (and
 * the bench's own stamp check) instead of matching a copy of the same bytes.
 *
 * <p>Design note: one page-sized buffer of seeded random bytes; {@link #stamp} writes a key-derived 8-byte value at the
 * start of every 4 KiB block (512 stores per 2 MiB page: nothing next to the 2 MiB copy the write makes anyway) and
 * returns the buffer. The SSD store copies a source into its staging buffer on its role thread right after
 * {@code acquire()} and before anything else runs there, so re-stamping the one buffer for the next key is safe as
 * long as the store is not configured to write straight from the source ({@code writeFromSource}, off in the bench).
 * Not thread-safe: used on the store's role thread.
 */
final class KeyedPayload {

    static final int BLOCK_BYTES = 4096;

    private final MemorySegment buffer;

    /** Fills {@code buffer} (a multiple of 4 KiB) with random bytes from {@code seed}. */
    KeyedPayload(MemorySegment buffer, long seed) {
        if (buffer.byteSize() % BLOCK_BYTES != 0 || buffer.byteSize() == 0) {
            throw new IllegalArgumentException("payload buffer must be a positive multiple of 4096 bytes, got "
                    + buffer.byteSize());
        }
        this.buffer = buffer;
        SplittableRandom random = new SplittableRandom(seed);
        for (long i = 0; i < buffer.byteSize(); i += 8) {
            buffer.set(ValueLayout.JAVA_LONG_UNALIGNED, i, random.nextLong());
        }
    }

    /** The buffer, stamped for {@code keyIndex} (valid until the next stamp). */
    MemorySegment stamp(long keyIndex) {
        for (long block = 0; block < buffer.byteSize() / BLOCK_BYTES; block++) {
            buffer.set(ValueLayout.JAVA_LONG_UNALIGNED, block * BLOCK_BYTES, stampValue(keyIndex, block));
        }
        return buffer;
    }

    /** Whether the first {@code lengthBytes} of {@code page} carry the stamps of {@code keyIndex} in every block. */
    static boolean carries(MemorySegment page, long lengthBytes, long keyIndex) {
        for (long block = 0; block * BLOCK_BYTES + 8 <= lengthBytes; block++) {
            if (page.get(ValueLayout.JAVA_LONG_UNALIGNED, block * BLOCK_BYTES) != stampValue(keyIndex, block)) {
                return false;
            }
        }
        return true;
    }

    /** {@link #carries} for the first and the last whole block only: cheap enough for a timed loop. */
    static boolean spotCheck(MemorySegment page, long lengthBytes, long keyIndex) {
        long lastBlock = lengthBytes / BLOCK_BYTES - 1;
        return lastBlock >= 0
                && page.get(ValueLayout.JAVA_LONG_UNALIGNED, 0) == stampValue(keyIndex, 0)
                && page.get(ValueLayout.JAVA_LONG_UNALIGNED, lastBlock * BLOCK_BYTES) == stampValue(keyIndex, lastBlock);
    }

    static long stampValue(long keyIndex, long block) {
        long x = (keyIndex + 1) * 0x9E3779B97F4A7C15L + block * 0xBF58476D1CE4E5B9L;
        return x ^ (x >>> 31);
    }
}
