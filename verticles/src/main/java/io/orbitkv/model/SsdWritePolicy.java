package io.orbitkv.model;

/**
 * Which offered pages deserve an SSD write.
 *
 * <p>Design note: SSD write bandwidth and extent capacity are finite, and large one-off prefills should not
 * monopolize them. {@link #REUSE_AWARE} writes a key only once it has been sighted a second time. Sightings are the
 * seal-time offer ({@link SsdStore#offerWrite}) and every report that the resident DRAM image was seen again
 * ({@link SsdStore#noteReuse}: a query hit it in DRAM, or a publish named it again); the write then copies the image
 * that is still in DRAM. A key evicted before its second sighting is written when it is published again. The set of
 * keys sighted once is bounded (LRU), so a stream of unique keys costs bounded memory and simply never reaches the
 * disk.
 */
public enum SsdWritePolicy {
    /** Every offered page is written (subject to queue capacity and the weak source still being resident). */
    ALL,
    /** A page is written on its second sighting; the first one is recorded in a bounded set and dropped. */
    REUSE_AWARE
}
