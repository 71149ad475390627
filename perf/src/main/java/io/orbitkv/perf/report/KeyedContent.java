package io.orbitkv.perf.report;

import com.google.protobuf.ByteString;
import io.orbitkv.client.sim.SyntheticKv;
import java.lang.foreign.MemorySegment;

/**
 * Page bytes that depend on the page's key alone, for the benches' verification: what a bench publishes under a block
 * hash is {@link SyntheticKv}'s stream seeded from that hash, so a reader can regenerate the expected bytes from the key
 * it asked for. A stale page at the same position (an older round's slot, a copy that was skipped) holds another key's
 * stream and mismatches, which position-only content would not.
 */
public final class KeyedContent {
    private KeyedContent() {}

    /** The stream seed of a block hash: FNV-1a over its bytes, then a 64-bit finalizer so close hashes spread. */
    public static long seedOf(ByteString blockHash) {
        long h = 0xcbf29ce484222325L;
        for (int i = 0; i < blockHash.size(); i++) {
            h ^= blockHash.byteAt(i) & 0xff;
            h *= 0x100000001b3L;
        }
        h ^= h >>> 33;
        h *= 0xff51afd7ed558ccdL;
        h ^= h >>> 33;
        return h;
    }

    /** Fills {@code page} with the bytes of {@code blockHash}. */
    public static void fill(MemorySegment page, ByteString blockHash) {
        SyntheticKv.fill(page, seedOf(blockHash), 0, 0);
    }

    /** The offset of the first byte of {@code page} that differs from the bytes of {@code blockHash}, or -1. */
    public static long firstMismatch(MemorySegment page, ByteString blockHash) {
        return SyntheticKv.verify(page, seedOf(blockHash), 0, 0);
    }
}
