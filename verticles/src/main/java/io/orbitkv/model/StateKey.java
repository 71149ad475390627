package io.orbitkv.model;

import java.util.Arrays;

/**
 * Identity of one page of state: namespace (16 bytes, derived from the registered identity) + group + the engine's
 * chained block hash. Immutable; the arrays are copied in and never exposed.
 */
public final class StateKey {
    public static final int NAMESPACE_BYTES = 16;
    public static final int MAX_BLOCK_HASH_BYTES = 64;

    private final byte[] namespace;
    private final int groupId;
    private final byte[] blockHash;
    private final int hash;

    private StateKey(byte[] namespace, int groupId, byte[] blockHash) {
        this.namespace = namespace;
        this.groupId = groupId;
        this.blockHash = blockHash;
        this.hash = 31 * (31 * Arrays.hashCode(namespace) + groupId) + Arrays.hashCode(blockHash);
    }

    /** Validates lengths; callers turn the IllegalArgumentException into a typed MALFORMED_REQUEST. */
    public static StateKey of(byte[] namespace, int groupId, byte[] blockHash) {
        return adopt(namespace.clone(), groupId, blockHash.clone());
    }

    /**
     * Like {@link #of} but takes ownership of the arrays instead of copying them (the hot query path builds a key
     * per block): the caller must never modify them afterwards.
     */
    public static StateKey adopt(byte[] namespace, int groupId, byte[] blockHash) {
        if (namespace.length != NAMESPACE_BYTES) {
            throw new IllegalArgumentException("namespace must be " + NAMESPACE_BYTES + " bytes, got " + namespace.length);
        }
        if (blockHash.length == 0 || blockHash.length > MAX_BLOCK_HASH_BYTES) {
            throw new IllegalArgumentException("block hash must be 1.." + MAX_BLOCK_HASH_BYTES + " bytes, got " + blockHash.length);
        }
        if (groupId < 0) {
            throw new IllegalArgumentException("group id must not be negative");
        }
        return new StateKey(namespace, groupId, blockHash);
    }

    public int groupId() {
        return groupId;
    }

    public byte[] namespace() {
        return namespace.clone();
    }

    public byte[] blockHash() {
        return blockHash.clone();
    }

    public boolean inNamespace(byte[] other) {
        return Arrays.equals(namespace, other);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof StateKey k && k.hash == hash && k.groupId == groupId
                && Arrays.equals(k.namespace, namespace) && Arrays.equals(k.blockHash, blockHash);
    }

    @Override
    public int hashCode() {
        return hash;
    }

    /**
     * Deliberately says nothing about the namespace or the block hash: keys identify content, and exception messages
     * reach logs. Compare keys with {@link #equals}, never by their string.
     */
    @Override
    public String toString() {
        return "StateKey[group " + groupId + ", " + blockHash.length + "-byte hash]";
    }
}
