package io.orbitkv.ssd;

/** Why an offered SSD write was not committed; each is a counter label ({@code orbitkv.ssd.writes.dropped}). */
enum SsdDropReason {
    /** The weak source returned null: the DRAM image was evicted before the write could copy it. */
    SOURCE_EVICTED,
    /** The write queue of the SSD role was full; the caller was not blocked. */
    QUEUE_FULL,
    /** {@link SsdWritePolicy#REUSE_AWARE}: first sighting of the key, recorded and not written. */
    NOT_YET_REUSED,
    /** The key is already committed on SSD or a write of it is queued or in flight. */
    ALREADY_PRESENT,
    /** The page is larger than the extent payload capacity, or the source is shorter than announced. */
    INVALID_SIZE,
    /** No region has room and none can be reclaimed: each holds a page pinned by a lease or a write in progress. */
    NO_EXTENT,
    /** The device reported ENOSPC (a sparse shard on a full file system). */
    NO_SPACE,
    /** Any other I/O failure of the write. */
    IO_ERROR,
    /** The store closed before the write committed. */
    CLOSED
}
