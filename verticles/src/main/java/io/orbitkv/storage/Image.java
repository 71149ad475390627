package io.orbitkv.storage;

import java.util.concurrent.atomic.AtomicInteger;
import io.orbitkv.model.StateKey;
import io.orbitkv.model.ImageState;
import io.orbitkv.model.ImageRef;

/**
 * One pool slot and the image in it: every slot the allocator grants is owned by exactly one image (see
 * {@link ImageStore}). Mutable, confined to the storage role's loop, except the copy handshake below.
 */
final class Image {
    final StateKey key;
    final PoolAllocator.Slot slot;
    final long ownerInstance;
    final long publishId;
    ImageState state = ImageState.WRITING;
    int pins;
    /** Scratch of {@link ResidentImages#checkUnpin}: references to this image counted in the running check; 0 between calls. */
    int unpinsChecked;
    /** Quarantine holds (see {@link Quarantine}): while non-zero the image is never evicted. */
    int holds;
    /** CRC32C of the bytes when known (sealed with a checksum, or verified on its way back from SSD). */
    long crc32c = ImageRef.CRC_UNKNOWN;
    /** Read back from SSD (not published by an engine): never offered to SSD again. */
    boolean fromSsd;
    /** Published with do_not_store: never offered to SSD, never retained, evicted first (see {@link EvictionOrder}). */
    boolean transientImage;
    /** The highest priority of the key's live retentions ({@link RetentionTable}); set while the image is sealed. */
    int retainPriority = RetentionTable.NOT_RETAINED;
    /** The eviction-order queue this image is linked into while evictable, and its neighbours there ({@link EvictionOrder}). */
    EvictionOrder.Queue orderQueue;
    Image orderPrev;
    Image orderNext;
    /**
     * Copy pins taken by the SSD role's thread through {@link ImageStore#weakSource}; with {@link #retired} they form
     * a Dekker handshake (both sequentially consistent): the copier increments then reads {@code retired}; the evictor
     * writes {@code retired} then reads the pins. At most one of them proceeds.
     */
    final AtomicInteger copyPins = new AtomicInteger();
    volatile boolean retired;

    Image(StateKey key, PoolAllocator.Slot slot, long ownerInstance, long publishId) {
        this.key = key;
        this.slot = slot;
        this.ownerInstance = ownerInstance;
        this.publishId = publishId;
    }

    ImageRef ref() {
        return new ImageRef(key, slot.offset(), slot.lengthBytes(), slot.generation(), crc32c);
    }

    boolean sealed() {
        return state == ImageState.SEALED;
    }

    boolean evictable() {
        return sealed() && pins == 0 && holds == 0;
    }

    /** Claims this image for eviction unless an SSD write is copying it right now (then it stays, and is skipped). */
    boolean tryRetire() {
        retired = true;
        if (copyPins.get() > 0) {
            retired = false;
            return false;
        }
        return true;
    }
}
