package io.orbitkv.model;

import io.orbitkv.model.StateKey;

/** A committed SSD extent appeared or disappeared; the storage role folds these into its residency stream. */
public record SsdResidencyChange(Kind kind, StateKey key, long generation, long lengthBytes, Cause cause) {

    public enum Kind { SSD_ADDED, SSD_REMOVED }

    public enum Cause {
        /** A write committed. */
        COMMITTED,
        /** Found committed by the scan on open. */
        RECOVERED,
        /** The ring reused the extent for another write. */
        OVERWRITTEN,
        /** The payload failed its CRC32C on a read. */
        CORRUPT,
        /** The store closed: nothing on this SSD is served any more (the extents themselves stay on disk). */
        CLOSED
    }
}
