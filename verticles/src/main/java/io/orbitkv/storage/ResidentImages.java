package io.orbitkv.storage;

import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import io.orbitkv.model.StateKey;
import io.orbitkv.model.ImageState;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.ResidencyEvent;

/**
 * Which key lives in which pool slot, the LRU eviction order and the lease pins: the core the other parts of
 * {@link ImageStore} share.
 *
 * <p>Design note (eviction): LRU over sealed, unpinned, unheld images (access order refreshed by every lookup that
 * pins, and by a read-back for the keys it needs), within the classes of {@link EvictionOrder}: transient images first,
 * retained ones last by priority; retentions that expired end before a victim is chosen. Pinned and writing images
 * are never evicted, nor is an image an SSD write is copying at that moment ({@link Image#tryRetire}: a queued SSD
 * write holds only a weak reference and never delays eviction otherwise). Allocation evicts in that order until the
 * allocator can satisfy the request or nothing evictable remains. Loop-confined, like the store.
 */
final class ResidentImages {
    private final PoolAllocator allocator;
    private final ResidencyStream residency;
    private final ImageStore.Listener listener;
    private final Map<StateKey, Image> images = new HashMap<>();
    /** Sealed, unpinned, unheld images in eviction order. */
    private final EvictionOrder evictable = new EvictionOrder();
    private final RetentionTable retention;
    private long evictions;
    private long pinnedImages;
    private long sealedBytes;

    ResidentImages(PoolAllocator allocator, ResidencyStream residency, ImageStore.Listener listener,
                   RetentionTable retention) {
        this.allocator = allocator;
        this.retention = retention;
        retention.listener((key, priority) -> {
            Image image = images.get(key);
            if (image != null && image.sealed() && !image.transientImage) {
                evictable.reprioritize(image, priority);
            }
        });
        this.residency = residency;
        this.listener = listener;
    }

    Image get(StateKey key) {
        return images.get(key);
    }

    boolean contains(StateKey key) {
        return images.containsKey(key);
    }

    void add(Image image) {
        images.put(image.key, image);
    }

    /** Takes an unsealed image out of the key index; its slot stays allocated (the caller frees or holds it). */
    void detach(Image image) {
        images.remove(image.key);
    }

    /** Takes an unsealed image out of the key index and frees its slot. */
    void free(Image image) {
        images.remove(image.key);
        allocator.free(image.slot);
    }

    /** Makes a key most recently used, when it is evictable (a read-back needs it). */
    void touch(StateKey key) {
        Image image = images.get(key);
        if (image != null && image.evictable()) {
            evictable.touch(image);
        }
    }

    /** A slot of {@code length} bytes, evicting from the LRU head as needed; null when nothing evictable is left. */
    PoolAllocator.Slot allocateEvicting(long length) {
        PoolAllocator.Slot slot = allocator.allocate(length);
        if (slot == null) {
            retention.expire();
        }
        while (slot == null) {
            Image victim = null;
            for (java.util.Iterator<Image> order = evictable.inOrder(); order.hasNext(); ) {
                Image candidate = order.next();
                if (candidate.tryRetire()) {
                    victim = candidate;
                    break;
                }
            }
            if (victim == null) {
                return null;
            }
            evict(victim);
            slot = allocator.allocate(length);
        }
        return slot;
    }

    /** Frees a sealed image claimed by {@link Image#tryRetire}; the residency stream and the listener hear of it. */
    void evict(Image image) {
        evictable.remove(image);
        images.remove(image.key);
        allocator.free(image.slot);
        sealedBytes -= image.slot.lengthBytes();
        evictions++;
        residency.append(ResidencyEvent.Change.DRAM_REMOVED, image.key, image.slot.generation(), image.slot.lengthBytes());
        listener.onEvicted(image.ref());
    }

    /** A written image becomes resident: sealed, evictable, announced on the residency stream. */
    void seal(Image image) {
        image.state = ImageState.SEALED;
        image.retainPriority = image.transientImage ? RetentionTable.NOT_RETAINED : retention.priorityOf(image.key);
        evictable.put(image);
        sealedBytes += image.slot.lengthBytes();
        residency.append(ResidencyEvent.Change.DRAM_ADDED, image.key, image.slot.generation(), image.slot.lengthBytes());
    }

    /** Back into the eviction order when nothing holds it any more. */
    void releasedHold(Image image) {
        if (image.evictable()) {
            evictable.put(image);
        }
    }

    void pin(Image image) {
        if (image.pins++ == 0) {
            evictable.remove(image);
            pinnedImages++;
        }
    }

    void unpin(Image image) {
        if (--image.pins == 0) {
            pinnedImages--;
            if (image.evictable()) {
                evictable.put(image);
            }
        }
    }

    /**
     * Checks that every reference is pinned at its exact generation and not named more often than it is pinned;
     * throws before anything changes otherwise. Answers the images in reference order (one index lookup each).
     */
    Image[] checkUnpin(List<List<ImageRef>> pinned) {
        int count = 0;
        for (List<ImageRef> chain : pinned) {
            count += chain.size();
        }
        Image[] checked = new Image[count];
        int next = 0;
        try {
            for (List<ImageRef> chain : pinned) {
                for (ImageRef ref : chain) {
                    Image image = images.get(ref.key());
                    if (image == null || image.slot.generation() != ref.generation() || image.pins == 0) {
                        throw new IllegalStateException("unpin of an image that is not pinned: " + ref.key());
                    }
                    // Counted on the image itself (loop-confined, reset below): no map per call.
                    checked[next++] = image;
                    if (++image.unpinsChecked > image.pins) {
                        throw new IllegalStateException("unpin of more pins than held: " + ref.key());
                    }
                }
            }
        } finally {
            for (int i = 0; i < next; i++) {
                checked[i].unpinsChecked = 0;
            }
        }
        return checked;
    }

    Collection<Image> all() {
        return images.values();
    }

    int size() {
        return images.size();
    }

    long evictions() {
        return evictions;
    }

    long pinnedImages() {
        return pinnedImages;
    }

    long sealedBytes() {
        return sealedBytes;
    }

    PoolAllocator allocator() {
        return allocator;
    }
}
