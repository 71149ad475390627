package io.orbitkv.model;

import io.orbitkv.model.StateKey;

/**
 * An exact-generation pin of one committed extent: while it is held the ring never overwrites the extent. Obtained from
 * {@link SsdStore#acquireLease}, ended by {@link SsdStore#release}.
 */
public record SsdLease(long leaseId, StateKey key, long generation, long lengthBytes) {
}
