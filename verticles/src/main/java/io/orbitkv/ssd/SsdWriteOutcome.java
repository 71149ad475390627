package io.orbitkv.ssd;

import io.orbitkv.model.StateKey;

/** How an offered write ended: committed under {@code generation}, or dropped for {@code dropReason}. */
public record SsdWriteOutcome(StateKey key, boolean committed, long generation, long lengthBytes,
                              SsdDropReason dropReason) {

    static SsdWriteOutcome committed(StateKey key, long generation, long lengthBytes) {
        return new SsdWriteOutcome(key, true, generation, lengthBytes, null);
    }

    static SsdWriteOutcome dropped(StateKey key, SsdDropReason reason) {
        return new SsdWriteOutcome(key, false, -1, -1, reason);
    }
}
