package io.orbitkv.model;

/**
 * One change of what a Manager holds for a key, as its residency stream numbers it: {@code sequence} is per owner
 * (the Manager's incarnation) and strictly increasing. {@code lengthBytes}: the page's stored bytes (-1 when not
 * known); {@code atMillis}: the wall-clock time it was appended, so a peer on another process can measure how long the
 * change took to reach it.
 */
public record ResidencyEvent(long sequence, Change change, StateKey key, long generation, long lengthBytes,
                             long atMillis) {
    public enum Change { DRAM_ADDED, DRAM_REMOVED, SSD_ADDED, SSD_REMOVED }
}
