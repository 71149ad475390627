package io.orbitkv.storage;

import io.orbitkv.model.WeakImageSource;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Set;
import java.util.zip.CRC32C;
import io.orbitkv.model.StateKey;
import io.orbitkv.model.ImageState;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.AllocateResult;
import io.orbitkv.model.SealResult;
import io.orbitkv.model.PositionedKey;
import io.orbitkv.model.GroupProbe;
import io.orbitkv.model.GroupPresence;
import io.orbitkv.model.ExactPin;
import io.orbitkv.model.SsdCopy;
import io.orbitkv.model.Materialization;
import io.orbitkv.model.KeyEvidence;
import io.orbitkv.model.KeyGeneration;
import io.orbitkv.model.SsdReservation;
import io.orbitkv.model.ResidentKey;
import io.orbitkv.model.ResidencySnapshot;

/**
 * Resident DRAM images: which key lives in which pool slot, in which state, pinned by how many leases.
 *
 * <p>Design note (ownership): every slot the allocator grants is owned by exactly one {@link Image}, {@code WRITING}
 * until its bytes are in place and {@code SEALED} after. A sealed image is evictable only while no lease pins it and no
 * quarantine holds it; pins are counted and released by their holders (admission, planning, a peer source). An aborted
 * publish, a lost session (after its quarantine), a failed read-back or an eviction frees the slot. Nothing else frees
 * slots, so a slot is never reused while a lease or writer can still reach it. The parts below share the key index and
 * each owns one concern; this class is their one entry point and holds the queries and pins.
 *
 * <pre>
 *   ImageStore (this: probes, discovery, exact pins and unpins, weak sources for SSD writes, stats)
 *     ├─ ResidentImages  key → image, eviction (EvictionOrder), pin counts
 *     ├─ RetentionTable  retention hints: priorities, expiry, tenants' retained budgets
 *     ├─ Publishes       open publishes, seals, aborts, the per-instance budget
 *     ├─ Quarantine      timed holds on slots of ended sessions
 *     └─ SsdCopies       the mirror of committed SSD extents, slots reserved to read them back
 * </pre>
 *
 * <p>Queries: demand admission asks in two steps, so that a plan is chosen from evidence before anything is owned.
 * {@link #probe} and {@link #discover} read metadata only, pin nothing and touch no LRU order. {@link #pinExact} and
 * {@link #pinGenerations} then pin exactly the chosen keys, all or nothing: if any was evicted or replaced since, they
 * pin none and name the first missing key, and the caller re-plans.
 *
 * <p>Concurrency: owned by the storage role's event loop; not thread-safe, except {@link #weakSource}'s handshake
 * with the SSD role's thread. Tests drive it directly.
 */
final class ImageStore {

    /** Observer of changes that matter outside: the SSD tier's write offers and reuse reports. */
    public interface Listener {
        default void onSealed(ImageRef image) {}

        default void onEvicted(ImageRef image) {}

        /**
         * Sealed images seen again: pinned by a query that found them in DRAM, or named again by a publish while
         * resident. The SSD tier's reuse-aware write policy counts these as second sightings.
         */
        default void onReused(List<ImageRef> images) {}
    }

    private final ResidentImages images;
    private final Quarantine quarantine;
    private final Publishes publishes;
    private final SsdCopies ssd;
    private final MemorySegment pool;
    private final ResidencyStream residency;
    private final Listener listener;
    private final RetentionTable retention;

    /** A store without retention budget (every Retain is over budget); retention deadlines on the system clock. */
    ImageStore(PoolAllocator allocator, MemorySegment pool, long publishBudgetBytes,
                      ResidencyStream residency, Listener listener) {
        this(allocator, pool, publishBudgetBytes, residency, listener,
                new RetentionTable(io.orbitkv.common.Ticker.SYSTEM, 0, Long.MAX_VALUE, null));
    }

    ImageStore(PoolAllocator allocator, MemorySegment pool, long publishBudgetBytes,
               ResidencyStream residency, Listener listener, RetentionTable retention) {
        this.pool = pool;
        this.residency = residency;
        this.listener = listener;
        this.retention = retention;
        this.images = new ResidentImages(allocator, residency, listener, retention);
        this.quarantine = new Quarantine(images);
        this.publishes = new Publishes(images, quarantine, pool, publishBudgetBytes, listener);
        this.ssd = new SsdCopies(images, residency);
    }

    // ---- publishes (see Publishes) ----

    public AllocateResult allocate(long instance, List<StateKey> keys, List<Long> lengths) {
        return publishes.allocate(instance, keys, lengths);
    }

    /**
     * Allocates a publish; {@code transientPages} (do_not_store): its images are never offered to SSD, never retained
     * and evicted before every other image (see {@link EvictionOrder}). Keys already resident keep their class.
     */
    public AllocateResult allocate(long instance, List<StateKey> keys, List<Long> lengths, boolean transientPages) {
        return publishes.allocate(instance, keys, lengths, transientPages);
    }

    // ---- retention hints (see RetentionTable) ----

    /**
     * Retains {@code keys} for {@code tenant} (see {@link RetentionTable#retain}); a typed refusal changes nothing. The
     * resident, sealed ones are reported reused, so the reuse-aware SSD writer writes what is retained.
     */
    public StorageCommands.Retained retain(String tenant, List<StateKey> keys, List<Long> lengths, long ttlNanos,
                                           int priority) {
        RetentionTable.Granted granted = retention.retain(tenant, keys, lengths, ttlNanos, priority);
        List<ImageRef> resident = new ArrayList<>();
        for (StateKey key : granted.retention().keys()) {
            Image image = images.get(key);
            if (image != null && image.sealed() && !image.transientImage) {
                resident.add(image.ref());
            }
        }
        if (!resident.isEmpty()) {
            listener.onReused(resident);
        }
        return new StorageCommands.Retained(granted.retention().id(), granted.retention().bytes(), resident.size(),
                granted.tenantRetainedBytes(), granted.tenantBudgetBytes());
    }

    /** Ends {@code tenant}'s retention {@code id}; answers its bytes (UNKNOWN_RETENTION when there is none). */
    public long unretain(String tenant, long id) {
        return retention.release(tenant, id);
    }

    /** Ends the retentions whose ttl passed; answers how many. */
    public int expireRetentions() {
        return retention.expire();
    }

    public long retainedBytes() {
        return retention.retainedBytes();
    }

    public int retentions() {
        return retention.retentions();
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
        return publishes.slotsToVerify(instance, publishId, crc32c, written);
    }

    /** The CRC32C of each slot; pure, any thread (the pool must stay mapped meanwhile). */
    public static List<Integer> checksums(List<MemorySegment> slots) {
        List<Integer> actual = new ArrayList<>(slots.size());
        for (MemorySegment slot : slots) {
            actual.add(crc32c(slot));
        }
        return actual;
    }

    static int crc32c(MemorySegment bytes) {
        CRC32C crc = new CRC32C();
        crc.update(bytes.asByteBuffer());
        return (int) crc.getValue();
    }

    /**
     * The last step of a seal, with the checksums {@link #checksums} computed for {@link #slotsToVerify}'s slots:
     * the publish must still be open (an abort or the end of its session in between wins: UNKNOWN_PUBLISH); a mismatch
     * aborts it; otherwise its images become resident.
     */
    public SealResult sealVerified(long instance, long publishId, List<Integer> crc32c, List<Integer> actual) {
        return publishes.sealVerified(instance, publishId, crc32c, actual);
    }

    public int abort(long instance, long publishId) {
        return publishes.abort(instance, publishId);
    }

    /** The refs of an open publish's slots, in allocation order; empty when there is no such open publish. */
    public List<ImageRef> publishRefs(long instance, long publishId) {
        return publishes.publishRefs(instance, publishId);
    }

    public void checkInsidePool(long offset, long length) {
        publishes.checkInsidePool(offset, length);
    }

    /**
     * Ends every unsealed publish of a departed instance; returns how many. The slots leave the key index at once but
     * stay allocated, quarantined until {@code untilNanos}: the departed engine may still be writing into them.
     */
    public int releaseInstance(long instance, long untilNanos) {
        return publishes.releaseInstance(instance, untilNanos);
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
        if (image == null || !image.sealed() || image.slot.offset() != ref.offset()
                || image.slot.generation() != ref.generation() || image.slot.lengthBytes() != ref.lengthBytes()
                || image.crc32c != ImageRef.CRC_UNKNOWN) {
            return false;
        }
        image.crc32c = crc32c;
        return true;
    }

    /**
     * A weak reference to a sealed image for a queued SSD write: {@code acquire()} (on the SSD role's thread) pins the
     * exact slot generation unless the image was evicted meanwhile; {@code release()} unpins. The image is held, not
     * looked up by key, so a reused slot can never be returned.
     */
    public WeakImageSource weakSource(ImageRef ref) {
        Image image = images.get(ref.key());
        if (image == null || image.slot.generation() != ref.generation() || !image.sealed()) {
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

    // ---- the SSD tier as seen from here (see SsdCopies) ----

    public void ssdAdded(StateKey key, long generation, long lengthBytes) {
        ssd.added(key, generation, lengthBytes);
    }

    /** Forgets the SSD copies of keys not in {@code committed} (a resync of the mirror), each as SSD_REMOVED. */
    public void ssdRetainOnly(Set<StateKey> committed) {
        ssd.retainOnly(committed);
    }

    public void ssdRemoved(StateKey key, long generation) {
        ssd.removed(key, generation);
    }

    public SsdCopy ssdCopyOf(StateKey key) {
        return ssd.copyOf(key);
    }

    public int ssdKeys() {
        return ssd.size();
    }

    /**
     * Reserves DRAM slots (WRITING, evicting as needed) for those of {@code keys} that are on SSD and not in DRAM,
     * after refreshing the recency of those already in DRAM; the caller reads each from SSD into its slot and then
     * calls {@link #finishMaterialization}. Stops at the first key that does not fit: the rest stays on SSD.
     */
    public List<Materialization> materialize(List<StateKey> keys) {
        return ssd.materialize(keys);
    }

    /**
     * Reserves a WRITING slot for each key whose committed SSD extent is still at exactly the given generation and
     * that has no DRAM image, all or nothing. Fails naming the first key that is not (in
     * {@code missing}), or with {@code missing == null} and nothing reserved when the pool has no room.
     */
    public SsdReservation reserveFromSsd(List<KeyGeneration> pages) {
        return ssd.reserve(pages);
    }

    /**
     * Seals a materialized image when its verified SSD read completed (with the extent's CRC32C, unsigned, or
     * {@link ImageRef#CRC_UNKNOWN}), or frees its slot when it failed.
     */
    public void finishMaterialization(ImageRef ref, boolean succeeded, long crc32c) {
        ssd.finish(ref, succeeded, crc32c);
    }

    /** Seals a verified materialized image and pins it in the same step: read + seal + pin, nothing in between. */
    public ImageRef finishMaterializationPinned(ImageRef ref, long crc32c) {
        Image image = ssd.finish(ref, true, crc32c);
        images.pin(image);
        return image.ref();
    }

    public long materializingImages() {
        return ssd.materializing();
    }

    // ---- queries and pins ----

    /** Which probed positions are sealed or being written; metadata only, pins nothing, keeps LRU order unchanged. */
    public List<GroupPresence> probe(List<GroupProbe> groups) {
        List<GroupPresence> found = new ArrayList<>(groups.size());
        for (GroupProbe group : groups) {
            BitSet sealed = new BitSet();
            BitSet writing = new BitSet();
            BitSet onSsd = new BitSet();
            for (PositionedKey pk : group.keys()) {
                Image image = images.get(pk.key());
                if (image != null) {
                    (image.sealed() ? sealed : writing).set(pk.position());
                } else if (ssd.contains(pk.key())) {
                    onSsd.set(pk.position());
                }
            }
            found.add(new GroupPresence(group.groupId(), sealed, writing, onSsd));
        }
        return found;
    }

    /** Pins exactly these keys (every one sealed) or none; see {@link ExactPin}. Pins are dropped by {@link #unpin}. */
    public ExactPin pinExact(List<List<StateKey>> groups) {
        for (List<StateKey> group : groups) {
            for (StateKey key : group) {
                Image image = images.get(key);
                if (image == null || !image.sealed()) {
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
                images.pin(image);
                bytes += image.slot.lengthBytes();
                refs.add(image.ref());
            }
            pinned.add(refs);
        }
        for (List<ImageRef> refs : pinned) {
            reportReused(refs);
        }
        return new ExactPin(true, pinned, bytes, null);
    }

    /** Second sightings for the SSD writer; transient (do_not_store) images are never written, so never reported. */
    private void reportReused(List<ImageRef> refs) {
        List<ImageRef> stored = new ArrayList<>(refs.size());
        for (ImageRef ref : refs) {
            Image image = images.get(ref.key());
            if (image == null || !image.transientImage) {
                stored.add(ref);
            }
        }
        if (!stored.isEmpty()) {
            listener.onReused(stored);
        }
    }

    /** Discovery for planning: one {@link KeyEvidence} per key, in order. */
    public List<KeyEvidence> discover(List<StateKey> keys) {
        long sequence = residency.lastSequence();
        List<KeyEvidence> found = new ArrayList<>(keys.size());
        for (StateKey key : keys) {
            Image image = images.get(key);
            SsdCopy copy = ssd.copyOf(key);
            boolean sealed = image != null && image.sealed();
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
        // One index lookup per page: the check pass keeps what it found, by position, for the pin pass.
        Image[] found = new Image[pages.size()];
        for (int i = 0; i < found.length; i++) {
            KeyGeneration page = pages.get(i);
            Image image = images.get(page.key());
            if (image == null || !image.sealed() || image.slot.generation() != page.generation()) {
                return new ExactPin(false, List.of(), 0, page.key());
            }
            found[i] = image;
        }
        List<ImageRef> refs = new ArrayList<>(found.length);
        List<ImageRef> stored = refs;
        long bytes = 0;
        for (Image image : found) {
            images.pin(image);
            bytes += image.slot.lengthBytes();
            ImageRef ref = image.ref();
            refs.add(ref);
            if (image.transientImage && stored == refs) {
                stored = new ArrayList<>(refs.subList(0, refs.size() - 1));
            } else if (!image.transientImage && stored != refs) {
                stored.add(ref);
            }
        }
        // Second sightings for the SSD writer, as reportReused: transient images are never written, so never reported.
        if (!stored.isEmpty()) {
            listener.onReused(stored);
        }
        return new ExactPin(true, List.of(refs), bytes, null);
    }

    /**
     * Drops one pin per reference, all or nothing: every reference is checked first (pinned, at its exact generation,
     * and not named more often than it is pinned), so a list with one bad reference changes no pin and throws.
     */
    public void unpin(List<List<ImageRef>> pinned) {
        for (Image image : images.checkUnpin(pinned)) {
            images.unpin(image);
        }
    }

    /**
     * Drops the lease pins of a session that ended and holds each of those images until {@code untilNanos} (see
     * {@link Quarantine}): the engine may still be copying out of them. All or nothing as {@link #unpin}. Returns the
     * number of pages.
     */
    public int unpinIntoQuarantine(List<List<ImageRef>> pinned, long untilNanos) {
        Image[] checked = images.checkUnpin(pinned);
        for (Image image : checked) {
            quarantine.hold(image, untilNanos);
            images.unpin(image);
        }
        return checked.length;
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
                    && image.tryRetire()) {
                images.evict(image);
                freed++;
            }
        }
        return freed;
    }

    // ---- quarantine (see Quarantine) ----

    /** Ends the holds whose time is up ({@code nowNanos} from the same clock as the deadlines); returns how many. */
    public int endQuarantine(long nowNanos) {
        return quarantine.end(nowNanos);
    }

    /** When the eldest hold ends, if any. */
    public OptionalLong nextQuarantineEndNanos() {
        return quarantine.nextEndNanos();
    }

    /** Distinct slots held by quarantine now. */
    public long quarantinedSlots() {
        return quarantine.slots();
    }

    public long quarantinedBytes() {
        return quarantine.bytes();
    }

    /** Slots put into quarantine since start (one per slot per ended session). */
    public long quarantineEvents() {
        return quarantine.events();
    }

    // ---- stats and the residency view ----

    public ImageState stateOf(StateKey key) {
        Image image = images.get(key);
        return image == null ? null : image.state;
    }

    public long evictions() {
        return images.evictions();
    }

    public int residentImages() {
        return images.size() - (int) unsealedImages() - (int) ssd.materializing();
    }

    public long unsealedImages() {
        return publishes.unsealedImages();
    }

    public long pinnedImages() {
        return images.pinnedImages();
    }

    public long sealedBytes() {
        return images.sealedBytes();
    }

    public int openPublishes() {
        return publishes.openPublishes();
    }

    public PoolAllocator allocator() {
        return images.allocator();
    }

    /**
     * What this store holds at {@code residency().lastSequence()}: sealed DRAM images and committed SSD extents, at
     * most {@code maxKeys} of each (a peer keeps no more per member anyway). Metadata only.
     */
    public ResidencySnapshot residencySnapshot(int maxKeys) {
        List<ResidentKey> dram = new ArrayList<>();
        for (Image image : images.all()) {
            if (dram.size() >= maxKeys) {
                break;
            }
            if (image.sealed()) {
                dram.add(new ResidentKey(image.key, image.slot.generation(), image.slot.lengthBytes()));
            }
        }
        List<ResidentKey> onSsd = new ArrayList<>();
        for (Map.Entry<StateKey, SsdCopy> e : ssd.all().entrySet()) {
            if (onSsd.size() >= maxKeys) {
                break;
            }
            onSsd.add(new ResidentKey(e.getKey(), e.getValue().generation(), e.getValue().lengthBytes()));
        }
        return new ResidencySnapshot(residency.incarnation(), residency.lastSequence(), dram, onSsd);
    }

    public ResidencyStream residency() {
        return residency;
    }
}
