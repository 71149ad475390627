package io.orbitkv.storage;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.common.BoundedHandoff;
import io.orbitkv.common.LocalCodec;
import io.orbitkv.common.RoleProxies;
import io.orbitkv.common.Ticker;
import io.orbitkv.cost.CostEstimateKey;
import io.orbitkv.cost.CostPath;
import io.orbitkv.cost.CostProxy;
import io.orbitkv.cost.ObservationOutcome;
import io.orbitkv.cost.ObservationRecord;
import io.orbitkv.cost.ObservedBytes;
import io.orbitkv.cost.RepresentationFamily;
import io.orbitkv.cost.ResourceId;
import io.orbitkv.cost.ShadowAlternative;
import io.orbitkv.cost.ShadowRequest;
import io.orbitkv.cost.SizeBucket;
import io.orbitkv.nativeio.shm.PoolPages;
import io.orbitkv.nativeio.shm.SharedMemoryFile;
import io.orbitkv.ssd.SsdCommands;
import io.orbitkv.ssd.SsdEntry;
import io.orbitkv.ssd.SsdLease;
import io.orbitkv.ssd.SsdProxy;
import io.orbitkv.ssd.SsdReadResult;
import io.orbitkv.ssd.SsdResidencyChange;
import io.orbitkv.ssd.SsdWritePolicy;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.VerticleBase;
import io.vertx.core.eventbus.EventBus;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The storage role: owns the shared-memory pool, its allocator and the resident images.
 *
 * <p>Design note (ownership and lifetime): this verticle creates the pool file in {@code start()} and removes it in
 * {@code stop()}; engines map the same file. All image state is confined to this verticle's event loop, reached
 * only through {@link StorageProxy}. On stop, outstanding leases die with the process: the file is unlinked, and
 * engines still mapping it keep their mapping until they unmap (the kernel frees the memory then). The pool's page
 * sizes: the mount's promise comes with the settings (the Manager asks once) and {@link PoolHugePageMeter} measures
 * what this process's mappings really got, on workers only, at start and at a bounded rate (its design note).
 */
public final class StorageVerticle extends VerticleBase {
    private final StorageSettings settings;
    private final MeterRegistry registry;
    private final Ticker ticker = Ticker.SYSTEM;
    /** How often the role itself re-checks the pool's real page sizes when its mount promises huge pages. */
    static final long HUGE_PAGE_CHECK_MILLIS = 60_000;
    private SharedMemoryFile poolFile;
    /** What the pool's directory gives it ({@link PoolPages}): from the settings, or asked by the start worker. */
    private volatile PoolPages.Answer poolPages;
    /** The pool's real page sizes in this process, from smaps (gauges, one WARN); created by the start worker. */
    private volatile PoolHugePageMeter hugePageMeter;
    private long hugePageTimer = -1;
    private ImageStore store;
    private Materializer materializer;
    /** Seals whose checksums a worker is computing; loop-confined. */
    private int checksumsInFlight;
    private final List<Promise<Void>> checksumWaiters = new ArrayList<>();
    /** The ordered stop began: no more work handed to workers. */
    private boolean closing;
    private BoundedHandoff<SsdResidencyChange> residencyChanges;
    private Counter residencyResyncs;
    private Counter checksumsOffloaded;
    private Counter backgroundChecksums;
    private Counter checksumsReceived;
    /** Reads into pool slots still in flight when {@link #stop} unmapped the pool: 0 after an ordered stop. */
    private volatile int readsInFlightAtUnmap = -1;
    /** The one-shot timer that ends the eldest quarantine hold; -1 when none is armed. */
    private long quarantineTimer = -1;
    private volatile StorageCommands.StorageStats snapshot;

    /** A storage role with {@code settings} (see {@link StorageSettings}: the pool, and optionally the SSD tier and cost). */
    public StorageVerticle(StorageSettings settings, MeterRegistry registry) {
        this.settings = settings.validate();
        this.registry = registry;
        this.ssd = settings.ssd();
        this.cost = settings.cost();
        this.dramPool = settings.dramPool();
        this.ssdStore = settings.ssdStore();
    }

    private final SsdProxy ssd;
    /** Whether the SSD role writes on second sightings (learnt from it at start): then reuse is reported to it. */
    private boolean reportReuse;
    private final CostProxy cost;
    private final ResourceId dramPool;
    private final ResourceId ssdStore;
    private Counter dramTierPages;
    private Counter dramTierBytes;
    private Counter ssdTierPages;
    private Counter ssdTierBytes;
    private Counter materializeFailures;

    @Override
    public Future<?> start() {
        // Reserving the pool touches every page of it: a worker does that, not this role's event loop.
        return vertx.executeBlocking(() -> {
                    PoolPages.Answer pages = settings.poolPages() != null ? settings.poolPages() : askPoolPages();
                    SharedMemoryFile created = SharedMemoryFile.create(settings.poolPath(), settings.poolBytes(),
                            pages.kind());
                    poolPages = pages;
                    hugePageMeter = new PoolHugePageMeter(realPath(created.path()), pages, ticker,
                            PoolHugePageMeter.MIN_INTERVAL_NANOS);
                    hugePageMeter.sample(); // huge=advise populated the pool through this mapping: a fallback shows now
                    return created;
                })
                .recover(e -> Future.failedFuture(new IllegalStateException("cannot create the shared-memory pool "
                        + settings.poolPath() + " of " + settings.poolBytes() + " bytes: " + e.getMessage(), e)))
                .compose(created -> {
                    poolFile = created;
                    return startOnPool();
                });
    }

    /** The pool directory's answer when the settings carry none (a role started without a Manager). Blocking. */
    private PoolPages.Answer askPoolPages() {
        try {
            return PoolPages.of(settings.poolPath().toAbsolutePath().getParent());
        } catch (IOException e) {
            // the mount cannot be told: reported (and created) as 4 KiB pages
            return new PoolPages.Answer(PoolPages.Kind.NONE, null, null, "never", "never");
        }
    }

    /** The path as smaps names the mapping (no symbolic links), or as given when that cannot be resolved. */
    private static Path realPath(Path path) {
        try {
            return path.toRealPath();
        } catch (IOException e) {
            return path.toAbsolutePath();
        }
    }

    /** Runs a smaps re-read of {@link PoolHugePageMeter} on a worker of this role's context (never its event loop). */
    private void onWorker(Runnable read) {
        context.executeBlocking(() -> {
            read.run();
            return null;
        }, false);
    }

    private Future<?> startOnPool() {
        PoolAllocator allocator = new PoolAllocator(settings.poolBytes(), settings.chunkBytes());
        store = new ImageStore(allocator, poolFile.segment(), settings.publishBudgetBytes(),
                new ResidencyStream(settings.incarnation(), settings.residencyCapacity()), new ImageStore.Listener() {
                    @Override
                    public void onSealed(ImageStore.ImageRef image) {
                        offerToSsd(image);
                    }

                    @Override
                    public void onReused(List<ImageStore.ImageRef> images) {
                        reportReuseToSsd(images);
                    }
                });
        if (ssd != null) {
            materializer = new Materializer(store, poolFile.segment(), this::fillFromSsd, this::onMaterialized, ticker);
        }
        measureFragmentation();
        fragmentationTimer = vertx.setPeriodic(1000, id -> measureFragmentation());
        if (poolPages.hugePages()) {
            // Pages are touched long after start (engines, peers): without scrapes, a fallback still gets its WARN.
            hugePageTimer = vertx.setPeriodic(HUGE_PAGE_CHECK_MILLIS, id -> hugePageMeter.latest(this::onWorker));
        }
        registerMetrics();
        Future<?> ssdReady = Future.succeededFuture();
        if (ssd != null) {
            // Follow changes first, then seed: a change racing the seed is applied twice, which is harmless. A change
            // the bounded hand-off refused (storage fell behind) is made up for by seeding again (resyncSsd).
            residencyChanges = ssd.residencyChanges(change -> {
                if (residencyChanges.overflowed()) {
                    resyncSsd();
                }
                if (change.kind() == SsdResidencyChange.Kind.SSD_ADDED) {
                    store.ssdAdded(change.key(), change.generation(), change.lengthBytes());
                } else {
                    store.ssdRemoved(change.key(), change.generation());
                }
                refresh();
            });
            residencyChanges.overflowed(); // what was refused before anyone followed: the seed covers it
            ssdReady = seedFromSsd().compose(ignored -> ssd.writePolicy())
                    .onSuccess(policy -> reportReuse = policy == SsdWritePolicy.REUSE_AWARE);
        }
        EventBus bus = vertx.eventBus();
        LocalCodec.register(vertx, StorageCommands.MESSAGE_TYPES.stream()
                .filter(c -> c != Integer.class).toArray(Class<?>[]::new));
        RoleProxies.<StorageCommands.Allocate, ImageStore.AllocateResult>serve(bus, StorageProxy.ALLOCATE,
                c -> changed(store.allocate(c.instance(), c.keys(), c.lengths())));
        RoleProxies.<StorageCommands.Seal, ImageStore.SealResult>serve(bus, StorageProxy.SEAL,
                this::seal);
        RoleProxies.<StorageCommands.SealAndPin, StorageCommands.SealedAndPinned>serve(bus, StorageProxy.SEAL_AND_PIN,
                this::sealAndPin);
        RoleProxies.<StorageCommands.Abort, Integer>serve(bus, StorageProxy.ABORT,
                c -> changed(store.abort(c.instance(), c.publishId())));
        RoleProxies.<StorageCommands.Probe, StorageCommands.Presence>serve(bus, StorageProxy.PROBE,
                c -> Future.succeededFuture(new StorageCommands.Presence(store.probe(c.groups()))));
        RoleProxies.<StorageCommands.PinExact, ImageStore.ExactPin>serve(bus, StorageProxy.PIN_EXACT, c -> {
            ImageStore.ExactPin pin = store.pinExact(c.groups());
            if (pin.complete()) {
                long pages = pin.pinned().stream().mapToLong(List::size).sum();
                dramTierPages.increment(pages);
                dramTierBytes.increment(pin.pinnedBytes());
            }
            return changed(pin);
        });
        RoleProxies.<StorageCommands.Materialize, Integer>serve(bus, StorageProxy.MATERIALIZE,
                c -> changed(materialize(c.keys())));
        RoleProxies.<StorageCommands.Unpin, Integer>serve(bus, StorageProxy.UNPIN, c -> {
            store.unpin(c.pinned());
            return changed(c.pinned().size());
        });
        RoleProxies.<StorageCommands.UnpinIntoQuarantine, Integer>serve(bus, StorageProxy.UNPIN_INTO_QUARANTINE,
                c -> quarantined(store.unpinIntoQuarantine(c.pinned(), quarantineDeadline())));
        RoleProxies.<StorageCommands.ReleaseInstance, Integer>serve(bus, StorageProxy.RELEASE_INSTANCE,
                c -> quarantined(store.releaseInstance(c.instance(), quarantineDeadline())));
        RoleProxies.<StorageCommands.GetStats, StorageCommands.StorageStats>serve(bus, StorageProxy.STATS,
                c -> Future.succeededFuture(snapshot));
        RoleProxies.<StorageCommands.Discover, StorageCommands.Discovery>serve(bus, StorageProxy.DISCOVER,
                c -> Future.succeededFuture(new StorageCommands.Discovery(store.discover(c.keys()))));
        RoleProxies.<StorageCommands.PinGenerations, ImageStore.ExactPin>serve(bus, StorageProxy.PIN_GENERATIONS, c -> {
            ImageStore.ExactPin pin = store.pinGenerations(c.pages());
            if (pin.complete()) {
                dramTierPages.increment(pin.pinned().getFirst().size());
                dramTierBytes.increment(pin.pinnedBytes());
            }
            return changed(pin);
        });
        RoleProxies.<StorageCommands.UnpinRefs, Integer>serve(bus, StorageProxy.UNPIN_REFS, c -> {
            if (c.quarantine()) {
                return quarantined(store.unpinIntoQuarantine(List.of(c.pinned()), quarantineDeadline()));
            }
            store.unpin(List.of(c.pinned()));
            return changed(c.pinned().size());
        });
        RoleProxies.<StorageCommands.AcquireFromSsd, StorageCommands.SsdHold>serve(bus, StorageProxy.ACQUIRE_FROM_SSD,
                c -> acquireFromSsd(c.pages()));
        RoleProxies.<StorageCommands.ReadFromSsd, StorageCommands.ReadPages>serve(bus, StorageProxy.READ_FROM_SSD,
                c -> readFromSsd(c.hold()));
        RoleProxies.<StorageCommands.ReleaseSsdHold, Boolean>serve(bus, StorageProxy.RELEASE_SSD_HOLD,
                c -> releaseSsdHold(c.hold()));
        RoleProxies.<StorageCommands.ReleaseStaged, Integer>serve(bus, StorageProxy.RELEASE_STAGED,
                c -> changed(store.releaseStaged(c.staged())));
        RoleProxies.<StorageCommands.ResidencySince, ResidencyStream.Page>serve(bus, StorageProxy.RESIDENCY_SINCE,
                c -> Future.succeededFuture(store.residency().since(c.after(), c.max())));
        RoleProxies.<StorageCommands.ResidencySnapshotOf, ImageStore.ResidencySnapshot>serve(bus,
                StorageProxy.RESIDENCY_SNAPSHOT, c -> Future.succeededFuture(store.residencySnapshot(c.maxKeys())));
        return ssdReady;
    }

    /**
     * A seal, then the pins: the seal's last step and the pins run in one task on this loop (the seal's future
     * completes here, and {@code compose} runs its function at once), so nothing is evicted between them.
     */
    private Future<StorageCommands.SealedAndPinned> sealAndPin(StorageCommands.SealAndPin c) {
        return seal(c.seal()).compose(sealed -> {
            if (c.pin().isEmpty()) {
                return Future.succeededFuture(new StorageCommands.SealedAndPinned(sealed, null));
            }
            ImageStore.ExactPin pin = store.pinExact(List.of(c.pin()));
            if (pin.complete()) {
                dramTierPages.increment(c.pin().size());
                dramTierBytes.increment(pin.pinnedBytes());
            }
            return changed(new StorageCommands.SealedAndPinned(sealed, pin));
        });
    }

    /** Seals whose checksums together cover at least this many bytes are verified on a worker, not on this loop. */
    static final long CHECKSUM_OFFLOAD_BYTES = 1 << 20;

    /**
     * Seals a publish. Checking the engine's CRC32C reads every byte of it: a large publish (at least
     * {@value #CHECKSUM_OFFLOAD_BYTES} bytes with checksums) is checked on a worker while this loop goes on, then
     * sealed back here; the worker only reads the slots, and the ordered stop waits for it before the pool is unmapped
     * ({@link #quiesce}). A publish aborted or ended meanwhile is not sealed (UNKNOWN_PUBLISH).
     */
    private Future<ImageStore.SealResult> seal(StorageCommands.Seal c) {
        List<MemorySegment> slots = store.slotsToVerify(c.instance(), c.publishId(), c.crc32c(), c.written());
        if (c.received() != null) {
            // the writer's checksums over the bytes it placed (see StorageProxy.sealReceived): compared, not recomputed
            if (c.crc32c().isEmpty() || c.received().size() != c.crc32c().size()) {
                return Future.failedFuture(new IllegalArgumentException("a received-checksum seal needs one expected and"
                        + " one received CRC32C per slot"));
            }
            checksumsReceived.increment();
            return sealVerified(c, c.received());
        }
        long bytes = 0;
        for (MemorySegment slot : slots) {
            bytes += slot.byteSize();
        }
        if (bytes < CHECKSUM_OFFLOAD_BYTES || closing) {
            return sealVerified(c, ImageStore.checksums(slots));
        }
        checksumsInFlight++;
        checksumsOffloaded.increment();
        return vertx.executeBlocking(() -> ImageStore.checksums(slots), false)
                .transform(ar -> {
                    checksumsInFlight--;
                    signalDrained();
                    if (ar.failed()) {
                        return Future.failedFuture(ar.cause());
                    }
                    return sealVerified(c, ar.result());
                });
    }

    /** The last step of a seal; a mismatch aborted the publish, which the gauges show at once too. */
    private Future<ImageStore.SealResult> sealVerified(StorageCommands.Seal c, List<Integer> actual) {
        List<ImageStore.ImageRef> sealed = c.crc32c().isEmpty() && settings.backgroundChecksums()
                ? store.publishRefs(c.instance(), c.publishId()) : List.of();
        try {
            Future<ImageStore.SealResult> result = changed(store.sealVerified(c.instance(), c.publishId(), c.crc32c(), actual));
            checksumInBackground(sealed);
            return result;
        } catch (RuntimeException e) {
            refresh();
            return Future.failedFuture(e);
        }
    }

    /**
     * Background checksums (design note): after a seal without checksums (with {@code backgroundChecksums}), a worker
     * computes the sealed images' CRC32C and this loop remembers each at the exact slot generation it was read at
     * ({@link ImageStore#rememberChecksum}), so a peer source grants them without reading the pages again on the
     * restore path. The worker only reads; an image evicted (and its slot reused) meanwhile was read at a generation
     * that no longer holds, so its value is dropped, never attached to the new bytes. The ordered stop waits for the
     * worker like for a seal's checksums ({@link #quiesce}).
     */
    private void checksumInBackground(List<ImageStore.ImageRef> refs) {
        if (refs.isEmpty() || closing) {
            return;
        }
        List<MemorySegment> slots = new ArrayList<>(refs.size());
        for (ImageStore.ImageRef ref : refs) {
            slots.add(poolFile.segment().asSlice(ref.offset(), ref.lengthBytes()));
        }
        checksumsInFlight++;
        vertx.executeBlocking(() -> ImageStore.checksums(slots), false).onComplete(ar -> {
            checksumsInFlight--;
            signalDrained();
            if (ar.succeeded()) {
                List<Long> crcs = ar.result().stream().map(Integer::toUnsignedLong).toList();
                backgroundChecksums.increment(remember(refs, crcs));
            }
        });
    }

    private int remember(List<ImageStore.ImageRef> refs, List<Long> crcs) {
        if (refs.size() != crcs.size()) {
            throw new IllegalArgumentException(refs.size() + " refs, " + crcs.size() + " checksums");
        }
        int taken = 0;
        for (int i = 0; i < refs.size(); i++) {
            if (store.rememberChecksum(refs.get(i), crcs.get(i))) {
                taken++;
            }
        }
        return taken;
    }

    /** Mirrors every committed SSD extent; keys the SSD role no longer has leave the mirror. */
    private Future<?> seedFromSsd() {
        return ssd.committedEntries().onSuccess(entries -> {
            Set<StateKey> committed = new HashSet<>();
            for (SsdEntry entry : entries) {
                committed.add(entry.key());
            }
            store.ssdRetainOnly(committed);
            for (SsdEntry entry : entries) {
                store.ssdAdded(entry.key(), entry.generation(), entry.lengthBytes());
            }
            refresh();
        });
    }

    /** A residency change was refused by the full hand-off: the mirror may be wrong until it is seeded again. */
    private void resyncSsd() {
        residencyResyncs.increment();
        seedFromSsd();
    }

    /**
     * Offers a freshly sealed image to the SSD tier: fire-and-forget, holding only a weak reference, so a slow or
     * full disk never slows publishing or holds DRAM. The copy into SSD staging (or, with ssd.write-from-pool, the
     * payload write itself) happens on the SSD role's side between acquire and release; the SSD store observes it.
     */
    private void offerToSsd(ImageStore.ImageRef image) {
        if (ssd == null) {
            return;
        }
        ssd.offerWrite(image.key(), store.weakSource(image), image.lengthBytes());
    }

    /**
     * Under the reuse-aware SSD write policy, a resident image seen again (a query hit it in DRAM, a publish named it
     * again) is a second sighting: the SSD role then writes it from the same weak source as a seal-time offer. One
     * fire-and-forget message per hit group; nothing is sent under the ALL policy.
     */
    private void reportReuseToSsd(List<ImageStore.ImageRef> images) {
        if (ssd == null || !reportReuse || images.isEmpty()) {
            return;
        }
        List<SsdCommands.OfferWrite> reused = new ArrayList<>(images.size());
        for (ImageStore.ImageRef image : images) {
            reused.add(new SsdCommands.OfferWrite(image.key(), store.weakSource(image), image.lengthBytes()));
        }
        ssd.noteReuse(reused);
    }

    /**
     * Reads keys back from SSD into DRAM slots under exact-generation SSD leases: the slot is WRITING (invisible to
     * queries) until the read is verified, then sealed; a failed or corrupt read frees the slot (and the SSD role drops
     * a corrupt extent), so a wrong byte is never served. Submitted reads complete even if the asking query is gone.
     * {@link Materializer} owns each reservation until it settles.
     */
    private int materialize(List<StateKey> keys) {
        return materializer == null ? 0 : materializer.start(keys);
    }

    private Future<SsdReadResult> fillFromSsd(StateKey key, long generation,
                                                            MemorySegment slot) {
        return ssd.acquireLease(key, generation)
                .compose(lease -> ssd.readInto(lease, slot).eventually(() -> ssd.release(lease)));
    }

    private void onMaterialized(ImageStore.ImageRef image, SsdReadResult result, long nanos) {
        if (result != null) {
            ssdTierPages.increment();
            ssdTierBytes.increment(image.lengthBytes());
        } else {
            materializeFailures.increment();
        }
        boolean bounced = result != null && result.path() == SsdReadResult.ReadPath.BOUNCE;
        observeSsdRead(image.lengthBytes(), nanos, result != null, bounced);
        refresh();
    }

    /**
     * Host materialization from SSD for the planning role, step one (see io.orbitkv.planning.LocalReplicaPort): pool
     * slots reserved (WRITING, invisible to queries) and exact-generation SSD extent leases taken, all or nothing.
     *
     * <p>Design note (ownership): a hold owns its slots and its SSD leases from here until {@link #readFromSsd} ends
     * (the leases end when every read is terminal; the slots become sealed pinned images, or are freed) or until
     * {@link #releaseSsdHold} frees both unread. A hold is never read twice.
     */
    private record SsdHold(List<ImageStore.Materialization> slots, List<SsdLease> leases) {}

    private final Map<Long, SsdHold> ssdHolds = new HashMap<>();
    private long nextSsdHold = 1;

    private Future<StorageCommands.SsdHold> acquireFromSsd(List<ImageStore.KeyGeneration> pages) {
        if (ssd == null || materializer == null || materializer.closed()) {
            return Future.failedFuture(new IllegalStateException("the SSD tier is off or the storage role is stopping"));
        }
        ImageStore.SsdReservation reservation = store.reserveFromSsd(pages);
        if (!reservation.complete()) {
            refresh();
            return Future.succeededFuture(new StorageCommands.SsdHold(0, reservation.missing()));
        }
        List<Future<SsdLease>> leases = new ArrayList<>(pages.size());
        for (ImageStore.Materialization m : reservation.reserved()) {
            leases.add(ssd.acquireLease(m.image().key(), m.ssdGeneration()));
        }
        refresh();
        return Future.join(leases).transform(ignored -> {
            List<SsdLease> taken = new ArrayList<>();
            StateKey stale = null;
            for (int i = 0; i < leases.size(); i++) {
                if (leases.get(i).succeeded()) {
                    taken.add(leases.get(i).result());
                } else if (stale == null) {
                    stale = reservation.reserved().get(i).image().key();
                }
            }
            if (stale == null) {
                long id = nextSsdHold++;
                ssdHolds.put(id, new SsdHold(reservation.reserved(), List.copyOf(taken)));
                return Future.succeededFuture(new StorageCommands.SsdHold(id, null));
            }
            for (ImageStore.Materialization m : reservation.reserved()) {
                store.finishMaterialization(m.image(), false, ImageStore.ImageRef.CRC_UNKNOWN);
            }
            StateKey staleKey = stale;
            return releaseLeases(taken).transform(v -> changed(new StorageCommands.SsdHold(0, staleKey)));
        });
    }

    private Future<Void> releaseLeases(List<SsdLease> leases) {
        List<Future<Boolean>> released = new ArrayList<>(leases.size());
        for (SsdLease lease : leases) {
            released.add(ssd.release(lease));
        }
        return Future.join(released).mapEmpty();
    }

    /**
     * Step two: reads every page of the hold into its slot (verified), and when every read is terminal, seals and pins
     * them all in one step, or, if any failed, seals the good ones unpinned (they are real bytes) and frees the rest,
     * failing the whole segment: a wrong byte is never served, and a failed segment leaves nothing pinned.
     */
    private Future<StorageCommands.ReadPages> readFromSsd(long id) {
        SsdHold hold = ssdHolds.remove(id);
        if (hold == null) {
            return Future.failedFuture(new IllegalStateException("no unread SSD hold " + id));
        }
        List<Future<SsdReadResult>> reads = new ArrayList<>(hold.slots().size());
        for (int i = 0; i < hold.slots().size(); i++) {
            ImageStore.ImageRef image = hold.slots().get(i).image();
            long alignedLength = (image.lengthBytes() + 4095) / 4096 * 4096;
            MemorySegment slot = poolFile.segment().asSlice(image.offset(), alignedLength);
            long startNanos = System.nanoTime();
            SsdLease lease = hold.leases().get(i);
            reads.add(materializer.track(() -> ssd.readInto(lease, slot)).onComplete(ar -> {
                boolean bounced = ar.succeeded() && ar.result().path() == SsdReadResult.ReadPath.BOUNCE;
                observeSsdRead(image.lengthBytes(), System.nanoTime() - startNanos, ar.succeeded(), bounced);
            }));
        }
        return Future.join(reads).transform(ignored -> {
            boolean all = reads.stream().allMatch(Future::succeeded);
            List<ImageStore.ImageRef> pinned = new ArrayList<>(reads.size());
            Throwable cause = null;
            for (int i = 0; i < reads.size(); i++) {
                ImageStore.ImageRef image = hold.slots().get(i).image();
                Future<SsdReadResult> read = reads.get(i);
                long crc = read.succeeded() ? Integer.toUnsignedLong(read.result().payloadCrc32c())
                        : ImageStore.ImageRef.CRC_UNKNOWN;
                if (read.succeeded()) {
                    ssdTierPages.increment();
                    ssdTierBytes.increment(image.lengthBytes());
                } else {
                    materializeFailures.increment();
                    cause = cause == null ? read.cause() : cause;
                }
                if (all) {
                    pinned.add(store.finishMaterializationPinned(image, crc));
                    // Pinned for a lease like any DRAM hit: the dram tier counts every page leased (read back or not).
                    dramTierPages.increment();
                    dramTierBytes.increment(image.lengthBytes());
                } else {
                    store.finishMaterialization(image, read.succeeded(), crc);
                }
            }
            Throwable failure = cause;
            return releaseLeases(hold.leases()).transform(v -> {
                refresh();
                return all ? Future.succeededFuture(new StorageCommands.ReadPages(List.copyOf(pinned)))
                        : Future.failedFuture(failure);
            });
        });
    }

    private Future<Boolean> releaseSsdHold(long id) {
        SsdHold hold = ssdHolds.remove(id);
        if (hold == null) {
            return Future.succeededFuture(false);
        }
        for (ImageStore.Materialization m : hold.slots()) {
            store.finishMaterialization(m.image(), false, ImageStore.ImageRef.CRC_UNKNOWN);
        }
        refresh();
        return releaseLeases(hold.leases()).map(v -> true);
    }

    /**
     * Reports the SSD read that filled a slot and asks the cost role, in shadow, whether the other read path of the
     * SSD store would have been cheaper for the same work: straight into the slot (needs a 4 KiB-aligned slot that
     * covers the rounded length: every pool slot does) versus through a bounce buffer plus a copy (always possible).
     * Shadow never launches the alternative and never changes execution; an alternative never executed stays unknown.
     */
    private void observeSsdRead(long bytes, long nanos, boolean succeeded, boolean bounced) {
        if (cost == null || !cost.observationsEnabled()) {
            return;
        }
        CostEstimateKey direct = CostEstimateKey.operation(CostPath.SSD_READ,
                ssdStore, RepresentationFamily.RAW, SizeBucket.of(bytes),
                SizeBucket.of(1));
        CostEstimateKey viaBounce = CostEstimateKey.operation(
                CostPath.SSD_READ_BOUNCED, ssdStore, RepresentationFamily.RAW,
                SizeBucket.of(bytes), SizeBucket.of(1));
        CostEstimateKey executed = bounced ? viaBounce : direct;
        cost.report(ObservationRecord.of(executed,
                succeeded ? ObservationOutcome.SUCCEEDED : ObservationOutcome.FAILED,
                nanos, succeeded ? ObservedBytes.of(bytes, bytes) : ObservedBytes.UNKNOWN));
        if (succeeded) {
            ShadowAlternative other = bounced
                    ? ShadowAlternative.when(direct, () -> true) // pool slots are aligned and rounded
                    : ShadowAlternative.when(viaBounce, () -> true);
            cost.recordShadow(new ShadowRequest(executed, List.of(other)));
        }
    }

    private long quarantineDeadline() {
        return ticker.nanos() + settings.quarantineNanos();
    }

    private <T> Future<T> quarantined(T result) {
        armQuarantineTimer();
        return changed(result);
    }

    /** Arms one timer for the eldest hold; when it fires, expired holds end and the next one is armed. */
    private void armQuarantineTimer() {
        if (quarantineTimer >= 0) {
            return;
        }
        store.nextQuarantineEndNanos().ifPresent(until -> {
            long delayMillis = Math.max(1, (until - ticker.nanos() + 999_999) / 1_000_000);
            quarantineTimer = vertx.setTimer(delayMillis, id -> {
                quarantineTimer = -1;
                if (store.endQuarantine(ticker.nanos()) > 0) {
                    refresh();
                }
                armQuarantineTimer();
            });
        });
    }

    private <T> Future<T> changed(T result) {
        refresh();
        return Future.succeededFuture(result);
    }

    /**
     * Runs after every change, so on the query path: it copies counters only. The two fragmentation figures that
     * walk the allocator's spans and chunk map are re-measured once a second instead ({@link #measureFragmentation}).
     */
    private void refresh() {
        PoolAllocator a = store.allocator();
        snapshot = new StorageCommands.StorageStats(a.poolBytes(), a.spanBytes(), a.slotBytes(), a.requestedBytes(),
                a.freeBytes(), strandedFreeBytes, largestFreeRunBytes, store.residentImages(),
                store.unsealedImages(), store.pinnedImages(), store.openPublishes(), store.evictions(),
                store.residency().lastSequence(), store.ssdKeys(), store.materializingImages(),
                store.quarantinedSlots(), store.quarantinedBytes(), store.quarantineEvents());
    }

    private long strandedFreeBytes;
    private long largestFreeRunBytes;
    private long fragmentationTimer;

    private void measureFragmentation() {
        if (residencyChanges != null && residencyChanges.overflowed()) {
            resyncSsd();
        }
        strandedFreeBytes = store.allocator().strandedFreeBytes();
        largestFreeRunBytes = store.allocator().largestFreeRunBytes();
        refresh();
    }

    private void registerMetrics() {
        Gauge.builder("orbitkv.pool.bytes", () -> snapshot.poolBytes()).baseUnit("bytes")
                .description("Size of the shared-memory DRAM pool").register(registry);
        Gauge.builder("orbitkv.pool.huge.pages", () -> poolPages.hugePages() ? 1 : 0)
                .description("1 when the pool's directory backs it with 2 MiB huge pages (pool.shm-dir), else 0")
                .register(registry);
        // Measured, not promised: smaps re-read on a worker at most once per 5 s however often /metrics is scraped.
        Gauge.builder("orbitkv.pool.huge.mapped.bytes", () -> hugePageMeter.latest(this::onWorker).hugeMappedBytes())
                .baseUnit("bytes").description("Bytes of the pool this process maps with 2 MiB pages (smaps "
                        + "ShmemPmdMapped + FilePmdMapped over its mappings of the pool file; compare touched bytes)")
                .register(registry);
        Gauge.builder("orbitkv.pool.touched.bytes", () -> hugePageMeter.latest(this::onWorker).residentBytes())
                .baseUnit("bytes").description("Bytes of the pool this process's mappings of the pool file have "
                        + "touched (smaps Rss, summed over them)")
                .register(registry);
        Gauge.builder("orbitkv.pool.used.bytes", () -> snapshot.spanBytes()).baseUnit("bytes")
                .description("Pool bytes held by allocator spans").register(registry);
        Gauge.builder("orbitkv.pool.free.bytes", () -> snapshot.freeBytes()).baseUnit("bytes")
                .description("Pool bytes in free chunks").register(registry);
        Gauge.builder("orbitkv.pool.requested.bytes", () -> snapshot.requestedBytes()).baseUnit("bytes")
                .description("Bytes engines asked for in live slots").register(registry);
        Gauge.builder("orbitkv.pool.stranded.bytes", () -> snapshot.strandedFreeBytes()).baseUnit("bytes")
                .description("Free slots inside partially used spans").register(registry);
        Gauge.builder("orbitkv.pool.fragmentation.ratio",
                        () -> snapshot.spanBytes() == 0 ? 0.0 : 1.0 - (double) snapshot.requestedBytes() / snapshot.spanBytes())
                .description("1 - requested/used bytes").register(registry);
        Gauge.builder("orbitkv.images", () -> snapshot.residentImages())
                .description("Sealed images resident in DRAM").register(registry);
        Gauge.builder("orbitkv.images.pinned", () -> snapshot.pinnedImages())
                .description("Images pinned by leases").register(registry);
        FunctionCounter.builder("orbitkv.evictions", this, v -> v.snapshot.evictions())
                .description("Images evicted from DRAM under pressure").register(registry);
        dramTierPages = Counter.builder("orbitkv.tier.reads").tag("tier", "dram")
                .description("Pages leased to engines from DRAM").register(registry);
        dramTierBytes = Counter.builder("orbitkv.tier.read.bytes").tag("tier", "dram")
                .baseUnit("bytes").description("Bytes leased to engines from DRAM").register(registry);
        ssdTierPages = Counter.builder("orbitkv.tier.reads").tag("tier", "ssd")
                .description("Pages read back from SSD into DRAM for queries").register(registry);
        ssdTierBytes = Counter.builder("orbitkv.tier.read.bytes").tag("tier", "ssd")
                .baseUnit("bytes").description("Bytes read back from SSD into DRAM for queries").register(registry);
        checksumsOffloaded = Counter.builder("orbitkv.seal.checksums.offloaded")
                .description("Seals whose CRC32C checks ran on a worker (large publishes), not on the storage loop")
                .register(registry);
        checksumsReceived = Counter.builder("orbitkv.seal.checksums.received")
                .description("Seals that compared the writer's checksums over the bytes it placed (peer receives)")
                .register(registry);
        backgroundChecksums = Counter.builder("orbitkv.seal.checksums.background")
                .description("Images whose CRC32C a worker computed after a seal without checksums and the store kept")
                .register(registry);
        residencyResyncs = Counter.builder("orbitkv.ssd.residency.resyncs")
                .description("Times the SSD residency mirror was seeded again after the hand-off refused a change")
                .register(registry);
        materializeFailures = Counter.builder("orbitkv.ssd.restore.failures")
                .description("SSD reads into DRAM that failed (stale, corrupt or I/O error): a miss, never wrong bytes")
                .register(registry);
        Gauge.builder("orbitkv.quarantine.slots", () -> snapshot.quarantinedSlots())
                .description("Pool slots of ended sessions held out of reuse (session.quarantine-ms)").register(registry);
        Gauge.builder("orbitkv.quarantine.bytes", () -> snapshot.quarantinedBytes()).baseUnit("bytes")
                .description("Pool bytes of ended sessions held out of reuse").register(registry);
        FunctionCounter.builder("orbitkv.quarantine.events", this, v -> v.snapshot.quarantineEvents())
                .description("Slots put into quarantine when the session holding them ended").register(registry);
        Gauge.builder("orbitkv.ssd.keys", () -> snapshot.ssdKeys()).description("Keys with a committed SSD extent")
                .register(registry);
        Gauge.builder("orbitkv.images.restoring", () -> snapshot.materializingImages())
                .description("DRAM slots being filled from SSD").register(registry);
    }

    /**
     * The first half of the ordered stop, while the SSD role is still running: withdraws this role's handlers (callers
     * get SHUTTING_DOWN), starts no more reads back from SSD, stops following residency changes and completes, on
     * this role's context, once every read it submitted has completed. Only then may the SSD role close and, after
     * it, {@link #stop} unmap the pool: nothing is ever written into unmapped memory. Any thread.
     */
    public Future<Void> quiesce() {
        Promise<Void> quiesced = Promise.promise();
        context.runOnContext(v -> {
            RoleProxies.withdrawAll(context);
            if (residencyChanges != null) {
                residencyChanges.close();
            }
            if (materializer == null) {
                quiesced.complete();
                return;
            }
            materializer.close();
            materializer.drained().onComplete(quiesced);
        });
        return quiesced.future().compose(v -> checksumsDrained());
    }

    /** Completes on this role's context once no worker is reading slots for a seal's checksums. */
    private Future<Void> checksumsDrained() {
        Promise<Void> drained = Promise.promise();
        context.runOnContext(v -> {
            closing = true;
            if (checksumsInFlight == 0) {
                drained.complete();
            } else {
                checksumWaiters.add(drained);
            }
        });
        return drained.future();
    }

    private void signalDrained() {
        if (checksumsInFlight == 0 && !checksumWaiters.isEmpty()) {
            List<Promise<Void>> waiters = List.copyOf(checksumWaiters);
            checksumWaiters.clear();
            waiters.forEach(Promise::tryComplete);
        }
    }

    /** Reads back from SSD into pool slots submitted and not yet completed, as of the role's last change. Any thread. */
    public long readsInFlight() {
        StorageCommands.StorageStats stats = snapshot;
        return stats == null ? 0 : stats.materializingImages();
    }

    /** Reads into pool slots in flight when {@link #stop} unmapped the pool (-1 before); any thread. */
    public int readsInFlightAtUnmap() {
        return readsInFlightAtUnmap;
    }

    @Override
    public Future<?> stop() {
        RoleProxies.withdrawAll(context);
        readsInFlightAtUnmap = materializer == null ? 0 : materializer.inFlight();
        vertx.cancelTimer(fragmentationTimer);
        if (hugePageTimer >= 0) {
            vertx.cancelTimer(hugePageTimer);
        }
        if (hugePageMeter != null) {
            hugePageMeter.close();
        }
        if (quarantineTimer >= 0) {
            vertx.cancelTimer(quarantineTimer);
        }
        try {
            if (poolFile != null) {
                poolFile.close();
            }
            return Future.succeededFuture();
        } catch (IOException e) {
            return Future.failedFuture(e);
        }
    }
}
