package io.orbitkv.ssd;

/**
 * Which offered pages deserve an SSD write.
 *
 * <p>Design note: SSD write bandwidth and extent capacity are finite, and large one-off prefills should not
 * monopolize them. {@link #REUSE_AWARE} writes a key only once it has been sighted a second time (offered again, or
 * reported reused through {@link SsdStore#noteReuse}); the set of keys sighted once is bounded (LRU), so a stream of
 * unique keys costs bounded memory and simply never reaches the disk.
 */
public enum SsdWritePolicy {
    /** Every offered page is written (subject to queue capacity and the weak source still being resident). */
    ALL,
    /** A page is written on its second sighting; the first one is recorded in a bounded set and dropped. */
    REUSE_AWARE
}
