package io.orbitkv.storage;

import io.orbitkv.common.OrbitException;
import io.orbitkv.protocol.engine.ErrorReason;
import io.orbitkv.ssd.WeakImageSource;
import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.zip.CRC32C;

/**
 * Resident DRAM images: which key lives in which pool slot, in which state, pinned by how many leases.
 *
 * <p>Design note (ownership): every slot the allocator grants is owned by exactly one {@link Image}. An image is
 * {@code WRITING} from allocation until its publish is sealed (the engine owns the bytes meanwhile; queries never see
 * it as resident) and {@code SEALED} after. A sealed image is evictable only while no lease pins it; pins are counted
 * and released by the admission role. An aborted publish, a lost session or an eviction frees the slot. Nothing else
 * frees slots, so a slot is never reused while a lease or writer can still reach it.
 *
 * <p>Quarantine (design note): a lease or an open publish handed to an engine stays reachable by that engine's process
 * after the Manager stopped trusting it: an engine whose session lapsed may still be copying out of leased slots or
 * writing into its publish slots. So when a session ends (lapse, unregister, resume) its slots are not reused for the
 * quarantine time, by one mechanism: a timed hold on the slot's exact generation ({@link #unpinIntoQuarantine},
 * {@link #releaseInstance}). A held sealed image stays resident and may be leased again (its bytes are the real
 * ones); it is only kept out of the eviction order. An unsealed slot of the ended session leaves the key index at once
 * (its key may be published again elsewhere) but stays allocated to the hold. Holds all last the same time, so they
 * expire in the order they were taken: a FIFO, drained by {@link #endQuarantine} with the owner's clock; the owner
 * (the storage role) arms a timer for {@link #nextQuarantineEndNanos}. An engine still holding such a lease learns at
 * release that it must discard its copy (the engine role's tombstones), and nothing it copies within the quarantine
 * is someone else's bytes.
 *
 * <p>Eviction: LRU over sealed, unpinned images (access order refreshed by every lookup that pins). Pinned and
 * writing images are never evicted, nor is an image an SSD write is copying at that moment ({@link #weakSource}:
 * a queued SSD write holds only a weak reference and never delays eviction otherwise).
 *
 * <p>SSD: the committed SSD extents are mirrored here by key (fed by the SSD role's residency changes), so a probe
 * reports keys that left DRAM but survive on SSD, and the residency stream carries DRAM and SSD changes per key.
 * {@link #materialize} reserves slots to read such keys back; their images are WRITING until the verified read
 * completes ({@link #finishMaterialization}). Allocation evicts from the LRU head until the allocator can satisfy the request
 * or nothing evictable remains.
 *
 * <p>Budgets: one instance may hold at most {@code publishBudgetBytes} in unsealed publishes at a time.
 *
 * <p>Queries (design note): demand admission asks in two steps, so that a plan is chosen from evidence before
 * anything is owned. {@link #probe} reads metadata only (which positions of each group are sealed or being written)
 * and pins nothing, touches no LRU order. {@link #pinExact} then pins exactly the chosen keys, all or nothing: if any
 * was evicted or replaced since the probe, it pins none and names the first missing key, and the caller re-plans.
 *
 * <p>Concurrency: owned by the storage role's event loop; not thread-safe. Tests drive it directly.
 */
public final class ImageStore {
    public enum ImageState { WRITING, SEALED }

    /**
     * What a caller may hold on to: a key at one exact slot generation, and the CRC32C of its bytes when known
     * (an unsigned 32-bit value, or {@link #CRC_UNKNOWN}).
     */
    public record ImageRef(StateKey key, long offset, long lengthBytes, long generation, long crc32c) {
        public static final long CRC_UNKNOWN = -1;

        /** A reference whose checksum is unknown (descriptors named by an engine). */
        public ImageRef(StateKey key, long offset, long lengthBytes, long generation) {
            this(key, offset, lengthBytes, generation, CRC_UNKNOWN);
        }

        public boolean crcKnown() {
            return crc32c != CRC_UNKNOWN;
        }
    }

    /** One slot of an allocate request: null ref = already present (nothing to write). */
    public record SlotGrant(boolean allocated, ImageRef ref) {}

    public record AllocateResult(long publishId, List<SlotGrant> slots) {}

    public record SealResult(int sealedPages, long sealedBytes) {}

    /** A key at a block position of its group's chain. */
    public record PositionedKey(int position, StateKey key) {}

    /** The keys of one group to probe, at their block positions. */
    public record GroupProbe(int groupId, List<PositionedKey> keys) {}

    /**
     * What {@link #probe} found for one group: the probed positions whose image is sealed, and those being written.
     * The bit sets are fresh and handed over; neither side mutates them afterwards.
     */
    public record GroupPresence(int groupId, BitSet sealed, BitSet writing, BitSet onSsd) {
        public GroupPresence(int groupId, BitSet sealed, BitSet writing) {
            this(groupId, sealed, writing, new BitSet());
        }
    }

    /**
     * The result of {@link #pinExact}: when {@code complete}, {@code pinned} holds one ref per requested key, group by
     * group in request order, and the caller owns those pins; otherwise nothing is pinned and {@code missing} names
     * the first key that is not sealed any more.
     */
    public record ExactPin(boolean complete, List<List<ImageRef>> pinned, long pinnedBytes, StateKey missing) {}

    static final class Image {
        final StateKey key;
        final PoolAllocator.Slot slot;
        final long ownerInstance;
        final long publishId;
        ImageState state = ImageState.WRITING;
        int pins;
        /** Quarantine holds (see the class note): while non-zero the image is never evicted. */
        int holds;
        /** CRC32C of the bytes when known (sealed with a checksum, or verified on its way back from SSD). */
        long crc32c = ImageRef.CRC_UNKNOWN;
        /** Read back from SSD (not published by an engine): never offered to SSD again. */
        boolean fromSsd;
        /**
         * Copy pins taken by the SSD role's thread through {@link #weakSource}; with {@link #retired} they form a
         * Dekker handshake (both sequentially consistent): the copier increments then reads {@code retired}; the
         * evictor writes {@code retired} then reads the pins. At most one of them proceeds.
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

        boolean evictable() {
            return state == ImageState.SEALED && pins == 0 && holds == 0;
        }
    }

    private record Publish(long ownerInstance, List<Image> images, long bytes) {}

    /** Observer of changes that matter outside: metrics and, later, SSD write admission. */
    public interface Listener {
        default void onSealed(ImageRef image) {}

        default void onEvicted(ImageRef image) {}

        /**
         * Sealed images seen again: pinned by a query that found them in DRAM, or named again by a publish while
         * resident. The SSD tier's reuse-aware write policy counts these as second sightings.
         */
        default void onReused(List<ImageRef> images) {}
    }

    private final PoolAllocator allocator;
    private final MemorySegment pool;
    private final long publishBudgetBytes;
    private final ResidencyStream residency;
    private final Listener listener;
    private final Map<StateKey, Image> images = new HashMap<>();
    /** Sealed, unpinned images in LRU order (eldest first). */
    private final LinkedHashMap<StateKey, Image> evictable = new LinkedHashMap<>(16, 0.75f, true);
    private final Map<Long, Publish> publishes = new HashMap<>();
    private final Map<Long, Long> unsealedBytesByInstance = new HashMap<>();
    private long nextPublishId = 1;
    private long evictions;
    private long pinnedImages;
    private long sealedBytes;

    public ImageStore(PoolAllocator allocator, MemorySegment pool, long publishBudgetBytes,
                      ResidencyStream residency, Listener listener) {
        this.allocator = allocator;
        this.pool = pool;
        this.publishBudgetBytes = publishBudgetBytes;
        this.residency = residency;
        this.listener = listener;
    }

    public AllocateResult allocate(long instance, List<StateKey> keys, List<Long> lengths) {
        long requested = 0;
        for (long length : lengths) {
            if (length <= 0 || length > allocator.poolBytes()) {
                throw new OrbitException(ErrorReason.MALFORMED_REQUEST, "page length " + length + " is outside 1.." + allocator.poolBytes());
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
                if (resident != null && !repeated && resident.state == ImageState.SEALED) {
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
            PoolAllocator.Slot slot = allocateEvicting(length);
            if (slot == null) {
                rollback(allocated);
                throw new OrbitException(ErrorReason.POOL_EXHAUSTED, "no pool space for " + length
                        + " bytes: every resident image is pinned or being written");
            }
            Image image = new Image(key, slot, instance, publishId);
            images.put(key, image);
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
            images.remove(image.key);
            allocator.free(image.slot);
        }
    }

    private PoolAllocator.Slot allocateEvicting(long length) {
        PoolAllocator.Slot slot = allocator.allocate(length);
        while (slot == null) {
            Image victim = null;
            for (Image candidate : evictable.values()) {
                if (tryRetire(candidate)) {
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

    /** Claims an image for eviction unless an SSD write is copying it right now (then it stays, and is skipped). */
    private static boolean tryRetire(Image image) {
        image.retired = true;
        if (image.copyPins.get() > 0) {
            image.retired = false;
            return false;
        }
        return true;
    }

    /**
     * A weak reference to a sealed image for a queued SSD write: {@code acquire()} (on the SSD role's thread) pins the
     * exact slot generation unless the image was evicted meanwhile; {@code release()} unpins. The image is held, not
     * looked up by key, so a reused slot can never be returned.
     */
    public WeakImageSource weakSource(ImageRef ref) {
        Image image = images.get(ref.key());
        if (image == null || image.slot.generation() != ref.generation() || image.state != ImageState.SEALED) {
            return () -> null;
        }
        MemorySegment bytes = pool.asSlice(image.slot.offset(), image.slot.lengthBytes());
        return new WeakImageSource() {
            @Override
            public MemorySegment acquire() {
                image.copyPins.incrementAndGet();
                if (image.retired) {
                    image.copyPins.decrementAndGet();
                    return null;
                }
                return bytes;
            }

            @Override
            public void release() {
                image.copyPins.decrementAndGet();
            }
        };
    }

    // ---- the SSD tier as seen from here: committed extents by key, and reading them back into DRAM ----

    /** Committed SSD evidence of a key: the exact extent generation and the payload length. */
    public record SsdCopy(long generation, long lengthBytes) {}

    /** A slot being filled from SSD: the DRAM image (WRITING) and the SSD generation to read. */
    public record Materialization(ImageRef image, long ssdGeneration) {}

    private final Map<StateKey, SsdCopy> onSsd = new HashMap<>();
    private long materializing;

    public void ssdAdded(StateKey key, long generation, long lengthBytes) {
        onSsd.put(key, new SsdCopy(generation, lengthBytes));
        residency.append(ResidencyStream.Change.SSD_ADDED, key, generation, lengthBytes);
    }

    /** Forgets the SSD copies of keys not in {@code committed} (a resync of the mirror), each as SSD_REMOVED. */
    public void ssdRetainOnly(Set<StateKey> committed) {
        for (Map.Entry<StateKey, SsdCopy> entry : List.copyOf(onSsd.entrySet())) {
            if (!committed.contains(entry.getKey())) {
                ssdRemoved(entry.getKey(), entry.getValue().generation());
            }
        }
    }

    public void ssdRemoved(StateKey key, long generation) {
        SsdCopy copy = onSsd.get(key);
        if (copy != null && copy.generation() == generation) {
            onSsd.remove(key);
            residency.append(ResidencyStream.Change.SSD_REMOVED, key, generation, copy.lengthBytes());
        }
    }

    public SsdCopy ssdCopyOf(StateKey key) {
        return onSsd.get(key);
    }

    public int ssdKeys() {
        return onSsd.size();
    }

    /**
     * Reserves DRAM slots (WRITING, evicting as needed) for those of {@code keys} that are on SSD and not in DRAM,
     * after refreshing the recency of those already in DRAM; the caller reads each from SSD into its slot and then
     * calls {@link #finishMaterialization}. Stops at the first key that does not fit: the rest stays on SSD.
     */
    public List<Materialization> materialize(List<StateKey> keys) {
        // The keys already in DRAM are needed too: make them the most recently used first, so that room made for
        // the ones coming back from SSD is never taken from them (which would only send them to SSD in turn).
        for (StateKey key : keys) {
            evictable.get(key);
        }
        List<Materialization> started = new ArrayList<>();
        try {
            for (StateKey key : keys) {
                SsdCopy copy = onSsd.get(key);
                if (copy == null || images.containsKey(key)) {
                    continue;
                }
                PoolAllocator.Slot slot = allocateEvicting(copy.lengthBytes());
                if (slot == null) {
                    break;
                }
                Image image = new Image(key, slot, MATERIALIZER, 0);
                image.fromSsd = true;
                images.put(key, image);
                materializing++;
                started.add(new Materialization(image.ref(), copy.generation()));
            }
        } catch (RuntimeException e) {
            // Nobody hears of reservations the caller never received: return them before failing.
            for (Materialization m : started) {
                finishMaterialization(m.image(), false, ImageRef.CRC_UNKNOWN);
            }
            throw e;
        }
        return started;
    }

    /**
     * Seals a materialized image when its verified SSD read completed (with the extent's CRC32C, unsigned, or
     * {@link ImageRef#CRC_UNKNOWN}), or frees its slot when it failed.
     */
    public void finishMaterialization(ImageRef ref, boolean succeeded, long crc32c) {
        Image image = images.get(ref.key());
        if (image == null || image.slot.generation() != ref.generation() || image.state != ImageState.WRITING || !image.fromSsd) {
            throw new IllegalStateException("no materialization in progress for " + ref.key());
        }
        materializing--;
        if (!succeeded) {
            images.remove(image.key);
            allocator.free(image.slot);
            return;
        }
        image.state = ImageState.SEALED;
        image.crc32c = crc32c;
        evictable.put(image.key, image);
        sealedBytes += image.slot.lengthBytes();
        residency.append(ResidencyStream.Change.DRAM_ADDED, image.key, image.slot.generation(), image.slot.lengthBytes());
    }

    public long materializingImages() {
        return materializing;
    }

    /** The owner recorded on images read back from SSD: no engine instance. */
    static final long MATERIALIZER = -1;

    private void evict(Image image) {
        evictable.remove(image.key);
        images.remove(image.key);
        allocator.free(image.slot);
        sealedBytes -= image.slot.lengthBytes();
        evictions++;
        residency.append(ResidencyStream.Change.DRAM_REMOVED, image.key, image.slot.generation(), image.slot.lengthBytes());
        listener.onEvicted(image.ref());
    }

    /**
     * Seals a publish. When {@code crc32c} is non-empty it must hold one CRC32C per allocated slot, and each is
     * checked against the bytes in the pool; a mismatch aborts the whole publish. When {@code written} is non-empty
     * it must name exactly the allocated slots, in order. Checks the bytes here, on the caller's thread; the storage
     * role splits a large seal into {@link #slotsToVerify} (here), the checksums (a worker) and {@link #sealVerified}
     * (here again).
     */
    public SealResult seal(long instance, long publishId, List<Integer> crc32c, List<ImageRef> written) {
        List<MemorySegment> slots = slotsToVerify(instance, publishId, crc32c, written);
        return sealVerified(instance, publishId, crc32c, checksums(slots));
    }

    /**
     * The first step of a seal: checks the request against the publish (owner, the written slots, one checksum per
     * slot) and answers the slots whose CRC32C must be computed (none without checksums). Changes nothing.
     */
    public List<MemorySegment> slotsToVerify(long instance, long publishId, List<Integer> crc32c, List<ImageRef> written) {
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

    /** The CRC32C of each slot; pure, any thread (the pool must stay mapped meanwhile). */
    public static List<Integer> checksums(List<MemorySegment> slots) {
        List<Integer> actual = new ArrayList<>(slots.size());
        for (MemorySegment slot : slots) {
            actual.add(crc32c(slot));
        }
        return actual;
    }

    /**
     * The last step of a seal, with the checksums {@link #checksums} computed for {@link #slotsToVerify}'s slots:
     * the publish must still be open (an abort or the end of its session in between wins: UNKNOWN_PUBLISH); a mismatch
     * aborts it; otherwise its images become resident.
     */
    public SealResult sealVerified(long instance, long publishId, List<Integer> crc32c, List<Integer> actual) {
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
        publishes.remove(publishId);
        unsealedBytesByInstance.merge(instance, -publish.bytes(), Long::sum);
        unsealedBytesByInstance.remove(instance, 0L);
        for (int i = 0; i < publishImages.size(); i++) {
            Image image = publishImages.get(i);
            image.state = ImageState.SEALED;
            if (!crc32c.isEmpty()) {
                image.crc32c = Integer.toUnsignedLong(crc32c.get(i));
            }
            evictable.put(image.key, image);
            sealedBytes += image.slot.lengthBytes();
            residency.append(ResidencyStream.Change.DRAM_ADDED, image.key, image.slot.generation(), image.slot.lengthBytes());
            listener.onSealed(image.ref());
        }
        return new SealResult(publishImages.size(), publish.bytes());
    }

    /**
     * Remembers a CRC32C computed outside a seal (the storage role's background pass after a seal without
     * checksums) for the image at exactly {@code ref}'s slot and generation. The memo lives on
     * the {@link Image}, so it belongs to that one slot generation: an image evicted or freed takes it along, and a
     * slot reused at a new generation starts with {@link ImageRef#CRC_UNKNOWN}. Ignored (false) when the key is not
     * sealed at that slot and generation any more, or when the image's checksum is already known.
     */
    public boolean rememberChecksum(ImageRef ref, long crc32c) {
        if (crc32c < 0 || crc32c > 0xFFFF_FFFFL) {
            throw new IllegalArgumentException("a CRC32C is an unsigned 32-bit value: " + crc32c);
        }
        Image image = images.get(ref.key());
        if (image == null || image.state != ImageState.SEALED || image.slot.offset() != ref.offset()
                || image.slot.generation() != ref.generation() || image.slot.lengthBytes() != ref.lengthBytes()
                || image.crc32c != ImageRef.CRC_UNKNOWN) {
            return false;
        }
        image.crc32c = crc32c;
        return true;
    }

    public void checkInsidePool(long offset, long length) {
        if (offset < 0 || length <= 0 || offset > allocator.poolBytes() - length) {
            throw new OrbitException(ErrorReason.DESCRIPTOR_OUTSIDE_POOL, "descriptor [" + offset + ", +" + length
                    + ") is outside the pool of " + allocator.poolBytes() + " bytes");
        }
    }

    static int crc32c(MemorySegment bytes) {
        CRC32C crc = new CRC32C();
        crc.update(bytes.asByteBuffer());
        return (int) crc.getValue();
    }

    public int abort(long instance, long publishId) {
        Publish publish = ownedPublish(instance, publishId);
        publishes.remove(publishId);
        unsealedBytesByInstance.merge(instance, -publish.bytes(), Long::sum);
        unsealedBytesByInstance.remove(instance, 0L);
        for (Image image : publish.images()) {
            images.remove(image.key);
            allocator.free(image.slot);
        }
        return publish.images().size();
    }

    /** The refs of an open publish's slots, in allocation order; empty when there is no such open publish. */
    public List<ImageRef> publishRefs(long instance, long publishId) {
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

    /**
     * Ends every unsealed publish of a departed instance; returns how many. The slots leave the key index at once but
     * stay allocated, quarantined until {@code untilNanos}: the departed engine may still be writing into them.
     */
    public int releaseInstance(long instance, long untilNanos) {
        List<Long> owned = new ArrayList<>();
        for (Map.Entry<Long, Publish> e : publishes.entrySet()) {
            if (e.getValue().ownerInstance() == instance) {
                owned.add(e.getKey());
            }
        }
        for (long publishId : owned) {
            Publish publish = publishes.remove(publishId);
            unsealedBytesByInstance.merge(instance, -publish.bytes(), Long::sum);
            unsealedBytesByInstance.remove(instance, 0L);
            for (Image image : publish.images()) {
                images.remove(image.key);
                hold(new Hold(untilNanos, null, image.slot));
            }
        }
        return owned.size();
    }

    /**
     * Drops the lease pins of a session that ended and holds each of those images until {@code untilNanos} (see the
     * class note): the engine may still be copying out of them. Returns the number of pages.
     */
    public int unpinIntoQuarantine(List<List<ImageRef>> pinned, long untilNanos) {
        // All or nothing: every pin is checked before any is dropped.
        Map<Image, Integer> drops = new IdentityHashMap<>();
        for (List<ImageRef> chain : pinned) {
            for (ImageRef ref : chain) {
                Image image = pinnedImage(ref);
                if (drops.merge(image, 1, Integer::sum) > image.pins) {
                    throw new IllegalStateException("unpin of more pins than held: " + ref.key());
                }
            }
        }
        int pages = 0;
        for (List<ImageRef> chain : pinned) {
            for (ImageRef ref : chain) {
                Image image = images.get(ref.key());
                hold(new Hold(untilNanos, image, image.slot));
                unpinOne(image);
                pages++;
            }
        }
        return pages;
    }

    /** Ends the holds whose time is up ({@code nowNanos} from the same clock as the deadlines); returns how many. */
    public int endQuarantine(long nowNanos) {
        int ended = 0;
        while (!quarantine.isEmpty() && nowNanos - quarantine.peekFirst().untilNanos() >= 0) {
            Hold hold = quarantine.pollFirst();
            ended++;
            if (hold.image() == null) {
                quarantinedSlots--;
                quarantinedBytes -= hold.slot().lengthBytes();
                allocator.free(hold.slot());
                continue;
            }
            Image image = hold.image();
            if (--image.holds == 0) {
                quarantinedSlots--;
                quarantinedBytes -= image.slot.lengthBytes();
                if (image.evictable()) {
                    evictable.put(image.key, image);
                }
            }
        }
        return ended;
    }

    /** When the eldest hold ends, if any. */
    public OptionalLong nextQuarantineEndNanos() {
        return quarantine.isEmpty() ? OptionalLong.empty() : OptionalLong.of(quarantine.peekFirst().untilNanos());
    }

    private void hold(Hold hold) {
        quarantine.addLast(hold);
        quarantineEvents++;
        Image image = hold.image();
        if (image == null || image.holds++ == 0) {
            quarantinedSlots++;
            quarantinedBytes += hold.slot().lengthBytes();
        }
    }

    /** A quarantine hold on one slot generation: of a resident image, or of a slot detached from the index. */
    private record Hold(long untilNanos, Image image, PoolAllocator.Slot slot) {}

    private final ArrayDeque<Hold> quarantine = new ArrayDeque<>();
    private long quarantinedSlots;
    private long quarantinedBytes;
    private long quarantineEvents;

    /** Distinct slots held by quarantine now. */
    public long quarantinedSlots() {
        return quarantinedSlots;
    }

    public long quarantinedBytes() {
        return quarantinedBytes;
    }

    /** Slots put into quarantine since start (one per slot per ended session). */
    public long quarantineEvents() {
        return quarantineEvents;
    }

    /** Which probed positions are sealed or being written; metadata only, pins nothing, keeps LRU order unchanged. */
    public List<GroupPresence> probe(List<GroupProbe> groups) {
        List<GroupPresence> found = new ArrayList<>(groups.size());
        for (GroupProbe group : groups) {
            BitSet sealed = new BitSet();
            BitSet writing = new BitSet();
            BitSet ssd = new BitSet();
            for (PositionedKey pk : group.keys()) {
                Image image = images.get(pk.key());
                if (image != null) {
                    (image.state == ImageState.SEALED ? sealed : writing).set(pk.position());
                } else if (onSsd.containsKey(pk.key())) {
                    ssd.set(pk.position());
                }
            }
            found.add(new GroupPresence(group.groupId(), sealed, writing, ssd));
        }
        return found;
    }

    /** Pins exactly these keys (every one sealed) or none; see {@link ExactPin}. Pins are dropped by {@link #unpin}. */
    public ExactPin pinExact(List<List<StateKey>> groups) {
        for (List<StateKey> group : groups) {
            for (StateKey key : group) {
                Image image = images.get(key);
                if (image == null || image.state != ImageState.SEALED) {
                    return new ExactPin(false, List.of(), 0, key);
                }
            }
        }
        List<List<ImageRef>> pinned = new ArrayList<>(groups.size());
        long bytes = 0;
        for (List<StateKey> group : groups) {
            List<ImageRef> refs = new ArrayList<>(group.size());
            for (StateKey key : group) {
                Image image = images.get(key);
                if (image.pins++ == 0) {
                    evictable.remove(image.key);
                    pinnedImages++;
                }
                bytes += image.slot.lengthBytes();
                refs.add(image.ref());
            }
            pinned.add(refs);
        }
        for (List<ImageRef> refs : pinned) {
            listener.onReused(refs);
        }
        return new ExactPin(true, pinned, bytes, null);
    }

    // ---- exact-generation acquisition for the planning role's execution owners ----

    /**
     * What this store knows of one key, metadata only (pins nothing, LRU order unchanged): the sealed DRAM image's
     * slot generation ({@code -1}: none), whether a slot for it is being written (a publish or an SSD read), and the
     * committed SSD extent's generation and length ({@code -1}: none), observed at residency sequence
     * {@code residencySequence}.
     */
    public record KeyEvidence(StateKey key, long dramGeneration, long dramBytes, boolean writing, long ssdGeneration,
                              long ssdBytes, long residencySequence) {}

    /** A key at one exact generation (a DRAM slot generation or an SSD extent generation, by context). */
    public record KeyGeneration(StateKey key, long generation) {}

    /** Discovery for planning: one {@link KeyEvidence} per key, in order. */
    public List<KeyEvidence> discover(List<StateKey> keys) {
        long sequence = residency.lastSequence();
        List<KeyEvidence> found = new ArrayList<>(keys.size());
        for (StateKey key : keys) {
            Image image = images.get(key);
            SsdCopy copy = onSsd.get(key);
            boolean sealed = image != null && image.state == ImageState.SEALED;
            found.add(new KeyEvidence(key, sealed ? image.slot.generation() : -1, sealed ? image.slot.lengthBytes() : -1,
                    image != null && !sealed, copy == null ? -1 : copy.generation(),
                    copy == null ? -1 : copy.lengthBytes(), sequence));
        }
        return found;
    }

    /**
     * Pins exactly these sealed images at exactly these slot generations, all or nothing: an image evicted, replaced
     * or not sealed pins none and is named in {@code missing} (the planner's evidence was stale).
     */
    public ExactPin pinGenerations(List<KeyGeneration> pages) {
        for (KeyGeneration page : pages) {
            Image image = images.get(page.key());
            if (image == null || image.state != ImageState.SEALED || image.slot.generation() != page.generation()) {
                return new ExactPin(false, List.of(), 0, page.key());
            }
        }
        List<ImageRef> refs = new ArrayList<>(pages.size());
        long bytes = 0;
        for (KeyGeneration page : pages) {
            Image image = images.get(page.key());
            pinOne(image);
            bytes += image.slot.lengthBytes();
            refs.add(image.ref());
        }
        listener.onReused(refs);
        return new ExactPin(true, List.of(refs), bytes, null);
    }

    /**
     * Reserves a WRITING slot for each key whose committed SSD extent is still at exactly the given generation and
     * that has no DRAM image, all or nothing. Fails naming the first key that is not (in
     * {@code missing}), or with {@code missing == null} and nothing reserved when the pool has no room.
     */
    public SsdReservation reserveFromSsd(List<KeyGeneration> pages) {
        for (KeyGeneration page : pages) {
            SsdCopy copy = onSsd.get(page.key());
            if (copy == null || copy.generation() != page.generation() || images.containsKey(page.key())) {
                return new SsdReservation(List.of(), page.key());
            }
        }
        List<Materialization> reserved = new ArrayList<>(pages.size());
        for (KeyGeneration page : pages) {
            SsdCopy copy = onSsd.get(page.key());
            PoolAllocator.Slot slot = allocateEvicting(copy.lengthBytes());
            if (slot == null) {
                for (Materialization m : reserved) {
                    finishMaterialization(m.image(), false, ImageRef.CRC_UNKNOWN);
                }
                return new SsdReservation(List.of(), null);
            }
            Image image = new Image(page.key(), slot, MATERIALIZER, 0);
            image.fromSsd = true;
            images.put(page.key(), image);
            materializing++;
            reserved.add(new Materialization(image.ref(), copy.generation()));
        }
        return new SsdReservation(List.copyOf(reserved), null);
    }

    /** Slots reserved by {@link #reserveFromSsd}: all of them, or none and why ({@code missing}: a stale key). */
    public record SsdReservation(List<Materialization> reserved, StateKey missing) {
        public boolean complete() {
            return !reserved.isEmpty();
        }
    }

    /** Seals a verified materialized image and pins it in the same step: read + seal + pin, nothing in between. */
    public ImageRef finishMaterializationPinned(ImageRef ref, long crc32c) {
        finishMaterialization(ref, true, crc32c);
        Image image = images.get(ref.key());
        pinOne(image);
        return image.ref();
    }

    private void pinOne(Image image) {
        if (image.pins++ == 0) {
            evictable.remove(image.key);
            pinnedImages++;
        }
    }

    /** Drops pins taken by {@link #pinExact}. */
    /**
     * Drops one pin per reference, all or nothing: every reference is checked first (pinned, at its exact generation,
     * and not named more often than it is pinned), so a list with one bad reference changes no pin and throws.
     */
    public void unpin(List<List<ImageRef>> pinned) {
        Map<Image, Integer> drops = new IdentityHashMap<>();
        for (List<ImageRef> chain : pinned) {
            for (ImageRef ref : chain) {
                Image image = pinnedImage(ref);
                if (drops.merge(image, 1, Integer::sum) > image.pins) {
                    throw new IllegalStateException("unpin of more pins than held: " + ref.key());
                }
            }
        }
        for (List<ImageRef> chain : pinned) {
            for (ImageRef ref : chain) {
                unpinOne(images.get(ref.key()));
            }
        }
    }

    /**
     * Ends a peer source's staging (pages read back from SSD for one peer lease): drops one pin per reference, all or
     * nothing as {@link #unpin}, then frees each image that was read back from SSD and is now unpinned and unheld, so
     * the staging leaves the pool; its committed SSD extent stays and is advertised again. An image someone else
     * pinned or held meanwhile stays resident as an ordinary cached image (its bytes are verified). Answers how many
     * images were freed.
     */
    public int releaseStaged(List<ImageRef> staged) {
        unpin(List.of(staged));
        int freed = 0;
        for (ImageRef ref : staged) {
            Image image = images.get(ref.key());
            if (image != null && image.fromSsd && image.slot.generation() == ref.generation() && image.evictable()
                    && tryRetire(image)) {
                evict(image);
                freed++;
            }
        }
        return freed;
    }

    private Image pinnedImage(ImageRef ref) {
        Image image = images.get(ref.key());
        if (image == null || image.slot.generation() != ref.generation() || image.pins == 0) {
            throw new IllegalStateException("unpin of an image that is not pinned: " + ref.key());
        }
        return image;
    }

    private void unpinOne(Image image) {
        if (--image.pins == 0) {
            pinnedImages--;
            if (image.evictable()) {
                evictable.put(image.key, image);
            }
        }
    }

    public ImageState stateOf(StateKey key) {
        Image image = images.get(key);
        return image == null ? null : image.state;
    }

    public long evictions() {
        return evictions;
    }

    public int residentImages() {
        return images.size() - (int) unsealedImages() - (int) materializing;
    }

    public long unsealedImages() {
        long n = 0;
        for (Publish p : publishes.values()) {
            n += p.images().size();
        }
        return n;
    }

    public long pinnedImages() {
        return pinnedImages;
    }

    public long sealedBytes() {
        return sealedBytes;
    }

    public int openPublishes() {
        return publishes.size();
    }

    public PoolAllocator allocator() {
        return allocator;
    }

    /** One resident key as the residency snapshot reports it. */
    public record ResidentKey(StateKey key, long generation, long lengthBytes) {}

    /**
     * What this store holds at {@code residency().lastSequence()}: sealed DRAM images and committed SSD extents, at
     * most {@code maxKeys} of each (a peer keeps no more per member anyway). Metadata only.
     */
    public ResidencySnapshot residencySnapshot(int maxKeys) {
        List<ResidentKey> dram = new ArrayList<>();
        for (Image image : images.values()) {
            if (dram.size() >= maxKeys) {
                break;
            }
            if (image.state == ImageState.SEALED) {
                dram.add(new ResidentKey(image.key, image.slot.generation(), image.slot.lengthBytes()));
            }
        }
        List<ResidentKey> ssd = new ArrayList<>();
        for (Map.Entry<StateKey, SsdCopy> e : onSsd.entrySet()) {
            if (ssd.size() >= maxKeys) {
                break;
            }
            ssd.add(new ResidentKey(e.getKey(), e.getValue().generation(), e.getValue().lengthBytes()));
        }
        return new ResidencySnapshot(residency.incarnation(), residency.lastSequence(), dram, ssd);
    }

    /** The answer of {@link #residencySnapshot}: every key resident at {@code sequence}. */
    public record ResidencySnapshot(long incarnation, long sequence, List<ResidentKey> dram, List<ResidentKey> ssd) {}

    public ResidencyStream residency() {
        return residency;
    }
}
