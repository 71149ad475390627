package io.orbitkv.perf.trace;

import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/**
 * Turns a trace request's {@code hash_ids} into the chained block hashes an inference engine would publish and query:
 * {@code h[0] = SHA-256(ROOT || id[0])}, {@code h[i] = SHA-256(h[i-1] || id[i])}, where each id is 8 bytes big-endian
 * and {@link #ROOT} is 32 zero bytes.
 *
 * <p>Design note: trace ids already encode the prefix (README: equal ids at the same position imply equal earlier
 * blocks), so chaining adds no information for the simulator, but it makes the replayer's keys look like an engine's
 * (fixed 32-byte digests whose value depends on the whole prefix) and exercises the Manager with realistic key
 * material. Ids are namespace-independent: the same trace replayed under two namespaces yields the same hashes, and
 * the Manager, not the hash, keeps the namespaces apart.
 */
public final class ChainedBlockHashes {

    /** Length of every chained hash in bytes. */
    public static final int HASH_BYTES = 32;

    /** The "previous hash" of a request's first block. */
    private static final byte[] ROOT = new byte[HASH_BYTES];

    private ChainedBlockHashes() {
    }

    /** A copy of the chain root (32 zero bytes). */
    public static byte[] root() {
        return ROOT.clone();
    }

    /** One 32-byte chained hash per id, first block first. */
    public static byte[][] chain(long[] hashIds) {
        return chain(ROOT, hashIds);
    }

    /** Continues a chain from {@code previousHash} (e.g. the hash of a prefix already published). */
    public static byte[][] chain(byte[] previousHash, long[] hashIds) {
        requireHash(previousHash);
        MessageDigest sha256 = newSha256();
        ByteBuffer input = ByteBuffer.allocate(HASH_BYTES + Long.BYTES); // big-endian by default
        byte[][] chained = new byte[hashIds.length][];
        byte[] previous = previousHash;
        for (int i = 0; i < hashIds.length; i++) {
            input.clear();
            input.put(previous).putLong(hashIds[i]);
            previous = sha256.digest(input.array());
            chained[i] = previous;
        }
        return chained;
    }

    /** The chained hash of the block {@code id} that follows {@code previousHash}. */
    public static byte[] next(byte[] previousHash, long id) {
        requireHash(previousHash);
        return chain(previousHash, new long[] {id})[0];
    }

    /** Lower-case hex, for logs and test vectors. */
    public static String toHex(byte[] hash) {
        return HexFormat.of().formatHex(hash);
    }

    private static void requireHash(byte[] hash) {
        if (hash == null || hash.length != HASH_BYTES) {
            throw new IllegalArgumentException("previous hash must be " + HASH_BYTES + " bytes, got "
                    + (hash == null ? "null" : hash.length + " bytes"));
        }
    }

    private static MessageDigest newSha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every Java platform must provide SHA-256", e);
        }
    }
}
