package io.orbitkv.storage;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import io.orbitkv.model.StateKey;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.SsdCopy;
import io.orbitkv.model.Materialization;
import io.orbitkv.model.KeyGeneration;
import io.orbitkv.model.SsdReservation;
import io.orbitkv.model.ResidencyEvent;

/**
 * The committed SSD extents mirrored by key, and the slots reserved to read them back into DRAM.
 *
 * <p>Design note: the mirror is fed by the SSD role's residency changes (see {@link SsdTier}), so a probe reports keys
 * that left DRAM but survive on SSD, and the residency stream carries DRAM and SSD changes per key. A read-back
 * reserves a WRITING slot per key (invisible to queries) and the {@link Materializer} settles each exactly once with
 * {@link #finish}: sealed with the verified read's CRC32C, or freed. Loop-confined, like the store.
 */
final class SsdCopies {
    /** The owner recorded on images read back from SSD: no engine instance. */
    static final long MATERIALIZER = -1;

    private final ResidentImages images;
    private final ResidencyStream residency;
    private final Map<StateKey, SsdCopy> onSsd = new HashMap<>();
    private long materializing;

    SsdCopies(ResidentImages images, ResidencyStream residency) {
        this.images = images;
        this.residency = residency;
    }

    void added(StateKey key, long generation, long lengthBytes) {
        onSsd.put(key, new SsdCopy(generation, lengthBytes));
        residency.append(ResidencyEvent.Change.SSD_ADDED, key, generation, lengthBytes);
    }

    void retainOnly(Set<StateKey> committed) {
        for (Map.Entry<StateKey, SsdCopy> entry : List.copyOf(onSsd.entrySet())) {
            if (!committed.contains(entry.getKey())) {
                removed(entry.getKey(), entry.getValue().generation());
            }
        }
    }

    void removed(StateKey key, long generation) {
        SsdCopy copy = onSsd.get(key);
        if (copy != null && copy.generation() == generation) {
            onSsd.remove(key);
            residency.append(ResidencyEvent.Change.SSD_REMOVED, key, generation, copy.lengthBytes());
        }
    }

    SsdCopy copyOf(StateKey key) {
        return onSsd.get(key);
    }

    boolean contains(StateKey key) {
        return onSsd.containsKey(key);
    }

    Map<StateKey, SsdCopy> all() {
        return onSsd;
    }

    int size() {
        return onSsd.size();
    }

    /** See {@link ImageStore#materialize}. */
    List<Materialization> materialize(List<StateKey> keys) {
        // The keys already in DRAM are needed too: make them the most recently used first, so that room made for
        // the ones coming back from SSD is never taken from them (which would only send them to SSD in turn).
        for (StateKey key : keys) {
            images.touch(key);
        }
        List<Materialization> started = new ArrayList<>();
        try {
            for (StateKey key : keys) {
                SsdCopy copy = onSsd.get(key);
                if (copy == null || images.contains(key)) {
                    continue;
                }
                Materialization m = reserve(key, copy);
                if (m == null) {
                    break;
                }
                started.add(m);
            }
        } catch (RuntimeException e) {
            // Nobody hears of reservations the caller never received: return them before failing.
            for (Materialization m : started) {
                finish(m.image(), false, ImageRef.CRC_UNKNOWN);
            }
            throw e;
        }
        return started;
    }

    /** See {@link ImageStore#reserveFromSsd}. */
    SsdReservation reserve(List<KeyGeneration> pages) {
        for (KeyGeneration page : pages) {
            SsdCopy copy = onSsd.get(page.key());
            if (copy == null || copy.generation() != page.generation() || images.contains(page.key())) {
                return new SsdReservation(List.of(), page.key());
            }
        }
        List<Materialization> reserved = new ArrayList<>(pages.size());
        for (KeyGeneration page : pages) {
            Materialization m = reserve(page.key(), onSsd.get(page.key()));
            if (m == null) {
                for (Materialization r : reserved) {
                    finish(r.image(), false, ImageRef.CRC_UNKNOWN);
                }
                return new SsdReservation(List.of(), null);
            }
            reserved.add(m);
        }
        return new SsdReservation(List.copyOf(reserved), null);
    }

    /** A WRITING slot for {@code key}'s copy, evicting as needed; null when the pool has no room. */
    private Materialization reserve(StateKey key, SsdCopy copy) {
        PoolAllocator.Slot slot = images.allocateEvicting(copy.lengthBytes());
        if (slot == null) {
            return null;
        }
        Image image = new Image(key, slot, MATERIALIZER, 0);
        image.fromSsd = true;
        images.add(image);
        materializing++;
        return new Materialization(image.ref(), copy.generation());
    }

    /** See {@link ImageStore#finishMaterialization}; answers the image, sealed, or null when its slot was freed. */
    Image finish(ImageRef ref, boolean succeeded, long crc32c) {
        Image image = images.get(ref.key());
        if (image == null || image.slot.generation() != ref.generation() || image.sealed() || !image.fromSsd) {
            throw new IllegalStateException("no materialization in progress for " + ref.key());
        }
        materializing--;
        if (!succeeded) {
            images.free(image);
            return null;
        }
        image.crc32c = crc32c;
        images.seal(image);
        return image;
    }

    long materializing() {
        return materializing;
    }
}
