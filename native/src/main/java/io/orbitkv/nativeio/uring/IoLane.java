package io.orbitkv.nativeio.uring;

/**
 * Submission lanes of {@link IoUringFileIo}. Restore reads feed requests that an engine is waiting on, so they go
 * first; writes (spilling DRAM images to SSD) are background work that must still make progress.
 */
public enum IoLane {
    /** Reads an engine is waiting for: submitted before queued writes. */
    RESTORE,
    /** Background writes (and their syncs): submitted when no restore waits, or when the starvation bound is hit. */
    WRITE
}
