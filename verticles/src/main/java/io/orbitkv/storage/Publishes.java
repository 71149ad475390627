package io.orbitkv.storage;

import io.orbitkv.common.OrbitException;
import io.orbitkv.protocol.engine.ErrorReason;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import io.orbitkv.model.StateKey;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.SlotGrant;
import io.orbitkv.model.AllocateResult;
import io.orbitkv.model.SealResult;

/**
 * Open publishes: slots granted to an engine instance, written by it, then sealed (resident) or aborted (freed).
 *
 * <p>Design note (ownership): an image is {@code WRITING} from allocation until its publish is sealed (the engine owns
 * the bytes meanwhile; queries never see it as resident) and {@code SEALED} after. An abort frees the slots; an
 * instance whose session ended has its open publishes ended with the slots held in {@link Quarantine} (it may still be
 * writing). Budget: one instance holds at most {@code publishBudgetBytes} in unsealed publishes at a time.
 * Loop-confined, like the store.
 */
final class Publishes {
    private record Publish(long ownerInstance, List<Image> images, long bytes) {}

    private final ResidentImages images;
    private final Quarantine quarantine;
    private final MemorySegment pool;
    private final long publishBudgetBytes;
    private final ImageStore.Listener listener;
    private final Map<Long, Publish> publishes = new HashMap<>();
    private final Map<Long, Long> unsealedBytesByInstance = new HashMap<>();
    private long nextPublishId = 1;

    Publishes(ResidentImages images, Quarantine quarantine, MemorySegment pool, long publishBudgetBytes,
              ImageStore.Listener listener) {
        this.images = images;
        this.quarantine = quarantine;
        this.pool = pool;
        this.publishBudgetBytes = publishBudgetBytes;
        this.listener = listener;
    }

    /** See {@link ImageStore#allocate}. */
    AllocateResult allocate(long instance, List<StateKey> keys, List<Long> lengths) {
        return allocate(instance, keys, lengths, false);
    }

    /** See {@link ImageStore#allocate(long, List, List, boolean)}. */
    AllocateResult allocate(long instance, List<StateKey> keys, List<Long> lengths, boolean transientPages) {
        long poolBytes = images.allocator().poolBytes();
        long requested = 0;
        for (long length : lengths) {
            if (length <= 0 || length > poolBytes) {
                throw new OrbitException(ErrorReason.MALFORMED_REQUEST, "page length " + length + " is outside 1.." + poolBytes);
            }
        }
        List<SlotGrant> slots = new ArrayList<>(keys.size());
        List<Image> allocated = new ArrayList<>();
        List<ImageRef> republished = new ArrayList<>();
        Map<StateKey, Boolean> seen = new HashMap<>();
        long held = unsealedBytesByInstance.getOrDefault(instance, 0L);
        long publishId = nextPublishId++;
        for (int i = 0; i < keys.size(); i++) {
            StateKey key = keys.get(i);
            Image resident = images.get(key);
            boolean repeated = seen.putIfAbsent(key, Boolean.TRUE) != null;
            if (resident != null || repeated) {
                if (resident != null && !repeated && resident.sealed() && !resident.transientImage) {
                    republished.add(resident.ref());
                }
                slots.add(new SlotGrant(false, null));
                continue;
            }
            long length = lengths.get(i);
            requested += length;
            if (held + requested > publishBudgetBytes) {
                rollback(allocated);
                throw new OrbitException(ErrorReason.BUDGET_EXCEEDED, "unsealed publishes of this instance would hold "
                        + (held + requested) + " bytes, budget " + publishBudgetBytes);
            }
            PoolAllocator.Slot slot = images.allocateEvicting(length);
            if (slot == null) {
                rollback(allocated);
                throw new OrbitException(ErrorReason.POOL_EXHAUSTED, "no pool space for " + length
                        + " bytes: every resident image is pinned or being written");
            }
            Image image = new Image(key, slot, instance, publishId);
            image.transientImage = transientPages;
            images.add(image);
            allocated.add(image);
            slots.add(new SlotGrant(true, image.ref()));
        }
        if (!allocated.isEmpty()) {
            publishes.put(publishId, new Publish(instance, allocated, requested));
            unsealedBytesByInstance.merge(instance, requested, Long::sum);
        }
        if (!republished.isEmpty()) {
            listener.onReused(republished);
        }
        return new AllocateResult(publishId, slots);
    }

    private void rollback(List<Image> allocated) {
        for (Image image : allocated) {
            images.free(image);
        }
    }

    /** See {@link ImageStore#slotsToVerify}. */
    List<MemorySegment> slotsToVerify(long instance, long publishId, List<Integer> crc32c,
                                      List<ImageRef> written) {
        Publish publish = ownedPublish(instance, publishId);
        List<Image> publishImages = publish.images();
        if (!written.isEmpty()) {
            if (written.size() != publishImages.size()) {
                throw new OrbitException(ErrorReason.MALFORMED_REQUEST, "seal names " + written.size()
                        + " written slots, the publish allocated " + publishImages.size());
            }
            for (int i = 0; i < written.size(); i++) {
                ImageRef w = written.get(i);
                checkInsidePool(w.offset(), w.lengthBytes());
                ImageRef expected = publishImages.get(i).ref();
                if (w.offset() != expected.offset() || w.lengthBytes() != expected.lengthBytes()
                        || w.generation() != expected.generation()) {
                    throw new OrbitException(ErrorReason.MALFORMED_REQUEST, "written slot " + i + " does not match the allocated slot");
                }
            }
        }
        if (crc32c.isEmpty()) {
            return List.of();
        }
        if (crc32c.size() != publishImages.size()) {
            throw new OrbitException(ErrorReason.MALFORMED_REQUEST, "seal carries " + crc32c.size()
                    + " checksums for " + publishImages.size() + " allocated slots");
        }
        List<MemorySegment> slots = new ArrayList<>(publishImages.size());
        for (Image image : publishImages) {
            slots.add(pool.asSlice(image.slot.offset(), image.slot.lengthBytes()));
        }
        return slots;
    }

    /** See {@link ImageStore#sealVerified}. */
    SealResult sealVerified(long instance, long publishId, List<Integer> crc32c, List<Integer> actual) {
        Publish publish = ownedPublish(instance, publishId);
        List<Image> publishImages = publish.images();
        if (crc32c.size() != actual.size() || (!crc32c.isEmpty() && crc32c.size() != publishImages.size())) {
            throw new IllegalStateException("checksums of another shape than the publish");
        }
        for (int i = 0; i < actual.size(); i++) {
            if (!actual.get(i).equals(crc32c.get(i))) {
                abort(instance, publishId);
                throw new OrbitException(ErrorReason.MALFORMED_REQUEST, "checksum mismatch in slot " + i + ": publish aborted");
            }
        }
        end(publishId, publish);
        for (int i = 0; i < publishImages.size(); i++) {
            Image image = publishImages.get(i);
            if (!crc32c.isEmpty()) {
                image.crc32c = Integer.toUnsignedLong(crc32c.get(i));
            }
            images.seal(image);
            if (!image.transientImage) {
                listener.onSealed(image.ref());
            }
        }
        return new SealResult(publishImages.size(), publish.bytes());
    }

    void checkInsidePool(long offset, long length) {
        long poolBytes = images.allocator().poolBytes();
        if (offset < 0 || length <= 0 || offset > poolBytes - length) {
            throw new OrbitException(ErrorReason.DESCRIPTOR_OUTSIDE_POOL, "descriptor [" + offset + ", +" + length
                    + ") is outside the pool of " + poolBytes + " bytes");
        }
    }

    /** See {@link ImageStore#abort}. */
    int abort(long instance, long publishId) {
        Publish publish = ownedPublish(instance, publishId);
        end(publishId, publish);
        for (Image image : publish.images()) {
            images.free(image);
        }
        return publish.images().size();
    }

    /** The refs of an open publish's slots, in allocation order; empty when there is no such open publish. */
    List<ImageRef> publishRefs(long instance, long publishId) {
        Publish publish = publishes.get(publishId);
        if (publish == null || publish.ownerInstance() != instance) {
            return List.of();
        }
        return publish.images().stream().map(Image::ref).toList();
    }

    private Publish ownedPublish(long instance, long publishId) {
        Publish publish = publishes.get(publishId);
        if (publish == null || publish.ownerInstance() != instance) {
            throw new OrbitException(ErrorReason.UNKNOWN_PUBLISH, "no open publish " + publishId + " for this instance");
        }
        return publish;
    }

    private void end(long publishId, Publish publish) {
        publishes.remove(publishId);
        unsealedBytesByInstance.merge(publish.ownerInstance(), -publish.bytes(), Long::sum);
        unsealedBytesByInstance.remove(publish.ownerInstance(), 0L);
    }

    /** See {@link ImageStore#releaseInstance}. */
    int releaseInstance(long instance, long untilNanos) {
        List<Long> owned = new ArrayList<>();
        for (Map.Entry<Long, Publish> e : publishes.entrySet()) {
            if (e.getValue().ownerInstance() == instance) {
                owned.add(e.getKey());
            }
        }
        for (long publishId : owned) {
            Publish publish = publishes.get(publishId);
            end(publishId, publish);
            for (Image image : publish.images()) {
                images.detach(image);
                quarantine.holdDetached(image.slot, untilNanos);
            }
        }
        return owned.size();
    }

    long unsealedImages() {
        long n = 0;
        for (Publish p : publishes.values()) {
            n += p.images().size();
        }
        return n;
    }

    int openPublishes() {
        return publishes.size();
    }
}
