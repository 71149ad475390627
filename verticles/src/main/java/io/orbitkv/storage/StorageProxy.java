package io.orbitkv.storage;

import io.orbitkv.common.RoleProxies;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.eventbus.DeliveryOptions;
import io.vertx.core.eventbus.EventBus;
import java.util.ArrayList;
import java.util.List;
import io.orbitkv.model.StateKey;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.AllocateResult;
import io.orbitkv.model.SealResult;
import io.orbitkv.model.GroupProbe;
import io.orbitkv.model.ExactPin;
import io.orbitkv.model.KeyEvidence;
import io.orbitkv.model.KeyGeneration;
import io.orbitkv.model.ResidencySnapshot;
import io.orbitkv.model.ResidencyEvent;
import io.orbitkv.model.ResidencyPage;

/** Typed proxy of the storage role: one method per command; callers never see event-bus addresses. */
public final class StorageProxy {
    static final String ALLOCATE = "orbitkv.storage.allocate";
    static final String SEAL = "orbitkv.storage.seal";
    static final String ABORT = "orbitkv.storage.abort";
    static final String PROBE = "orbitkv.storage.probe";
    static final String PIN_EXACT = "orbitkv.storage.pin-exact";
    static final String MATERIALIZE = "orbitkv.storage.materialize";
    static final String UNPIN = "orbitkv.storage.unpin";
    static final String UNPIN_INTO_QUARANTINE = "orbitkv.storage.unpin-into-quarantine";
    static final String RELEASE_INSTANCE = "orbitkv.storage.release-instance";
    static final String STATS = "orbitkv.storage.stats";
    static final String DISCOVER = "orbitkv.storage.discover";
    static final String PIN_GENERATIONS = "orbitkv.storage.pin-generations";
    static final String UNPIN_REFS = "orbitkv.storage.unpin-refs";
    static final String ACQUIRE_FROM_SSD = "orbitkv.storage.acquire-from-ssd";
    static final String READ_FROM_SSD = "orbitkv.storage.read-from-ssd";
    static final String RELEASE_SSD_HOLD = "orbitkv.storage.release-ssd-hold";
    static final String RELEASE_STAGED = "orbitkv.storage.release-staged";
    static final String RESIDENCY_SINCE = "orbitkv.storage.residency-since";
    static final String RESIDENCY_SNAPSHOT = "orbitkv.storage.residency-snapshot";
    static final String SEAL_AND_PIN = "orbitkv.storage.seal-and-pin";
    static final String ALLOCATE_TRANSIENT = "orbitkv.storage.allocate-transient";
    static final String RETAIN = "orbitkv.storage.retain";
    static final String UNRETAIN = "orbitkv.storage.unretain";

    private final EventBus bus;
    private final DeliveryOptions options = new DeliveryOptions().setSendTimeout(10_000).setLocalOnly(true);

    public StorageProxy(Vertx vertx) {
        this.bus = vertx.eventBus();
    }

    /**
     * The pool bytes a page of {@code lengthBytes} occupies once resident: its slot's size class. Answered here
     * without a message: the size classes are fixed arithmetic.
     */
    public static long slotBytesOf(long lengthBytes) {
        return PoolAllocator.sizeClassOf(lengthBytes);
    }

    public Future<AllocateResult> allocate(long instance, List<StateKey> keys, List<Long> lengths) {
        return RoleProxies.request(bus, ALLOCATE, new StorageCommands.Allocate(instance, keys, lengths), options);
    }

    /** A do_not_store publish: its images are transient (see {@link ImageStore#allocate(long, List, List, boolean)}). */
    public Future<AllocateResult> allocateTransient(long instance, List<StateKey> keys, List<Long> lengths) {
        return RoleProxies.request(bus, ALLOCATE_TRANSIENT, new StorageCommands.AllocateTransient(instance, keys, lengths),
                options);
    }

    /** Retains keys for a tenant (see {@link ImageStore#retain}); a typed refusal changes nothing. */
    public Future<StorageCommands.Retained> retain(String tenant, List<StateKey> keys, List<Long> lengths, long ttlNanos,
                                                   int priority) {
        return RoleProxies.request(bus, RETAIN, new StorageCommands.Retain(tenant, keys, lengths, ttlNanos, priority),
                options);
    }

    /** Ends a tenant's retention; answers its bytes. */
    public Future<Long> unretain(String tenant, long retentionId) {
        return RoleProxies.request(bus, UNRETAIN, new StorageCommands.Unretain(tenant, retentionId), options);
    }

    public Future<SealResult> seal(long instance, long publishId, List<Integer> crc32c,
                                              List<ImageRef> written) {
        return RoleProxies.request(bus, SEAL, new StorageCommands.Seal(instance, publishId, crc32c, written), options);
    }

    /**
     * Seals a publish whose writer computed each slot's CRC32C over the bytes it placed there ({@code received}, one
     * per slot): the seal compares them with {@code crc32c} (a mismatch aborts the publish) without reading the slots.
     */
    public Future<SealResult> sealReceived(long instance, long publishId, List<Integer> crc32c,
                                                      List<ImageRef> written, List<Integer> received) {
        return RoleProxies.request(bus, SEAL, new StorageCommands.Seal(instance, publishId, crc32c, written, received),
                options);
    }

    /** A seal and, in the same step, exact pins of {@code pin} (see {@link StorageCommands.SealAndPin}). */
    public Future<StorageCommands.SealedAndPinned> sealAndPin(StorageCommands.Seal seal, List<StateKey> pin) {
        return RoleProxies.request(bus, SEAL_AND_PIN, new StorageCommands.SealAndPin(seal, pin), options);
    }

    public Future<Integer> abort(long instance, long publishId) {
        return RoleProxies.request(bus, ABORT, new StorageCommands.Abort(instance, publishId), options);
    }

    /** Metadata only: which positions of each group are sealed or being written; pins nothing. */
    public Future<StorageCommands.Presence> probe(List<GroupProbe> groups) {
        return RoleProxies.request(bus, PROBE, new StorageCommands.Probe(groups), options);
    }

    /** Starts reading these keys back from SSD into DRAM slots; answers how many reads started. */
    public Future<Integer> materialize(List<StateKey> keys) {
        return RoleProxies.request(bus, MATERIALIZE, new StorageCommands.Materialize(keys), options);
    }

    /** Pins exactly these keys or none (see {@link ImageStore#pinExact}). */
    public Future<ExactPin> pinExact(List<List<StateKey>> groups) {
        return RoleProxies.request(bus, PIN_EXACT, new StorageCommands.PinExact(groups), options);
    }

    public Future<Integer> unpin(List<List<ImageRef>> pinned) {
        return RoleProxies.request(bus, UNPIN, new StorageCommands.Unpin(pinned), options);
    }

    /** Drops the pins of leases whose session ended; their slots are not reused for the quarantine time. */
    public Future<Integer> unpinIntoQuarantine(List<List<ImageRef>> pinned) {
        return RoleProxies.request(bus, UNPIN_INTO_QUARANTINE, new StorageCommands.UnpinIntoQuarantine(pinned), options);
    }

    /** Ends the unsealed publishes of an instance whose session ended (slots quarantined); answers how many. */
    public Future<Integer> releaseInstance(long instance) {
        return RoleProxies.request(bus, RELEASE_INSTANCE, new StorageCommands.ReleaseInstance(instance), options);
    }

    /** Metadata only: DRAM and SSD evidence of each key (see {@link ImageStore#discover}). */
    public Future<List<KeyEvidence>> discover(List<StateKey> keys) {
        return RoleProxies.<StorageCommands.Discovery>request(bus, DISCOVER, new StorageCommands.Discover(keys), options)
                .map(StorageCommands.Discovery::keys);
    }

    /** Pins exactly these slot generations or none (see {@link ImageStore#pinGenerations}). */
    public Future<ExactPin> pinGenerations(List<KeyGeneration> pages) {
        return RoleProxies.request(bus, PIN_GENERATIONS, new StorageCommands.PinGenerations(pages), options);
    }

    /** Drops pins of one segment; {@code quarantine}: its holder's session ended. */
    public Future<Integer> unpinRefs(List<ImageRef> pinned, boolean quarantine) {
        return RoleProxies.request(bus, UNPIN_REFS, new StorageCommands.UnpinRefs(pinned, quarantine), options);
    }

    /** Reserves pool slots and takes exact-generation SSD extent leases for these pages, all or none. */
    public Future<StorageCommands.SsdHold> acquireFromSsd(List<KeyGeneration> pages) {
        return RoleProxies.request(bus, ACQUIRE_FROM_SSD, new StorageCommands.AcquireFromSsd(pages), options);
    }

    /** Reads a hold's pages into their slots, then seals and pins them in one step; terminal when it completes. */
    public Future<List<ImageRef>> readFromSsd(long hold) {
        return RoleProxies.<StorageCommands.ReadPages>request(bus, READ_FROM_SSD, new StorageCommands.ReadFromSsd(hold),
                options).map(StorageCommands.ReadPages::pinned);
    }

    /** Ends a hold that was never read: frees its slots and its SSD leases. */
    public Future<Boolean> releaseSsdHold(long hold) {
        return RoleProxies.request(bus, RELEASE_SSD_HOLD, new StorageCommands.ReleaseSsdHold(hold), options);
    }

    /**
     * Ends a peer source's staging of pages {@link #readFromSsd} pinned: unpins them and frees those nobody else pins
     * (see {@link ImageStore#releaseStaged}); answers how many were freed.
     */
    public Future<Integer> releaseStaged(List<ImageRef> staged) {
        return RoleProxies.request(bus, RELEASE_STAGED, new StorageCommands.ReleaseStaged(staged), options);
    }

    /** Residency-stream events after {@code after} (metadata only); {@code gap} when the ring lost some. */
    public Future<ResidencyPage> residencySince(long after, int max) {
        return RoleProxies.request(bus, RESIDENCY_SINCE, new StorageCommands.ResidencySince(after, max), options);
    }

    /** {@link #residencySince} as the surface records other roles may hold (mapped on the caller's side). */
    public Future<StorageCommands.ResidencyChanges> residencyChangesSince(long after, int max) {
        return residencySince(after, max).map(page -> {
            List<StorageCommands.ResidencyChange> changes = new ArrayList<>(page.events().size());
            for (ResidencyEvent e : page.events()) {
                changes.add(new StorageCommands.ResidencyChange(e.sequence(),
                        StorageCommands.ResidencyChange.Kind.valueOf(e.change().name()), e.key(), e.generation(),
                        e.lengthBytes()));
            }
            return new StorageCommands.ResidencyChanges(changes, page.gap(), page.lastSequence());
        });
    }

    /** Every resident key (DRAM sealed, SSD committed) at the current residency sequence, bounded per medium. */
    public Future<ResidencySnapshot> residencySnapshot(int maxKeys) {
        return RoleProxies.request(bus, RESIDENCY_SNAPSHOT, new StorageCommands.ResidencySnapshotOf(maxKeys), options);
    }

    public Future<StorageCommands.StorageStats> stats() {
        return RoleProxies.request(bus, STATS, new StorageCommands.GetStats(), options);
    }
}
