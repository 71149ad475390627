package io.orbitkv.client.sim;

import com.google.protobuf.ByteString;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.List;

/**
 * Deterministic synthetic KV: page bytes and chained block hashes that any process can regenerate from (seed,
 * group, position), so an engine simulator can verify every byte it gets back without keeping a copy.
 */
public final class SyntheticKv {
    private SyntheticKv() {}

    /** Chained block hashes: h[i] = SHA-256(h[i-1] || seed || i), 32 bytes each. */
    public static List<ByteString> chain(long seed, int blocks) {
        List<ByteString> hashes = new ArrayList<>(blocks);
        byte[] previous = new byte[32];
        try {
            for (int i = 0; i < blocks; i++) {
                MessageDigest sha = MessageDigest.getInstance("SHA-256");
                sha.update(previous);
                sha.update(ByteBuffer.allocate(16).putLong(seed).putLong(i).array());
                previous = sha.digest();
                hashes.add(ByteString.copyFrom(previous));
            }
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
        return hashes;
    }

    private static long stateOf(long seed, int group, int position) {
        long x = seed * 0x9E3779B97F4A7C15L ^ ((long) group << 32 | position) * 0xBF58476D1CE4E5B9L;
        return x == 0 ? 1 : x;
    }

    /** The page's word stream: xorshift64 from the (seed, group, position) state. */
    private static final class Words {
        private long x;

        Words(long seed, int group, int position) {
            x = stateOf(seed, group, position);
        }

        long next() {
            x ^= x << 13;
            x ^= x >>> 7;
            x ^= x << 17;
            return x;
        }

        /** The last word's bytes fill a tail shorter than a word. */
        byte tailByte(long offset) {
            return (byte) (x >>> (8 * (offset % 8)));
        }
    }

    /** Fills a page with the stream for (seed, group, position). */
    public static void fill(MemorySegment page, long seed, int group, int position) {
        Words words = new Words(seed, group, position);
        long count = page.byteSize() / 8;
        for (long w = 0; w < count; w++) {
            page.set(ValueLayout.JAVA_LONG_UNALIGNED, w * 8, words.next());
        }
        for (long off = count * 8; off < page.byteSize(); off++) {
            page.set(ValueLayout.JAVA_BYTE, off, words.tailByte(off));
        }
    }

    /** Returns the offset of the first wrong byte, or -1 when the page holds exactly the expected stream. */
    public static long verify(MemorySegment page, long seed, int group, int position) {
        Words words = new Words(seed, group, position);
        long count = page.byteSize() / 8;
        for (long w = 0; w < count; w++) {
            if (page.get(ValueLayout.JAVA_LONG_UNALIGNED, w * 8) != words.next()) {
                return w * 8;
            }
        }
        for (long off = count * 8; off < page.byteSize(); off++) {
            if (page.get(ValueLayout.JAVA_BYTE, off) != words.tailByte(off)) {
                return off;
            }
        }
        return -1;
    }
}
