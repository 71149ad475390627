package io.orbitkv.model;

import io.orbitkv.model.StateKey;

/**
 * Metadata-only lookup result: whether {@code key} has a committed extent and, if so, its exact generation and payload
 * length. It is evidence, not a grant: reads must acquire a lease for this generation.
 */
public record SsdEntry(StateKey key, boolean present, long generation, long lengthBytes) {

    public static SsdEntry absent(StateKey key) {
        return new SsdEntry(key, false, -1, -1);
    }
}
