package io.orbitkv.storage;

import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.common.LocalCodec;
import io.orbitkv.common.RoleProxies;
import io.orbitkv.common.Ticker;
import io.orbitkv.nativeio.shm.PoolPages;
import io.orbitkv.nativeio.shm.SharedMemoryFile;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.VerticleBase;
import io.vertx.core.eventbus.EventBus;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.Executor;
import io.orbitkv.model.StateKey;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.AllocateResult;
import io.orbitkv.model.SealResult;
import io.orbitkv.model.ExactPin;
import io.orbitkv.model.KeyGeneration;
import io.orbitkv.model.ResidencySnapshot;
import io.orbitkv.model.ResidencyPage;

/**
 * The storage role: owns the shared-memory pool, its allocator and the resident images.
 *
 * <p>Design note (ownership and lifetime): this verticle creates the pool file in {@code start()} and removes it in
 * {@code stop()}; engines map the same file. All image state is confined to this verticle's event loop, reached
 * only through {@link StorageProxy}. On stop, outstanding leases die with the process: the file is unlinked, and
 * engines still mapping it keep their mapping until they unmap (the kernel frees the memory then). The pool's page
 * sizes: the mount's promise comes with the settings (the Manager asks once) and {@link PoolHugePageMeter} measures
 * what this process's mappings really got, on workers only, at start and at a bounded rate (its design note).
 *
 * <pre>
 *   StorageVerticle (this: pool file, command dispatch, quarantine timer, ordered stop)
 *     ├─ ImageStore      resident images, publishes, pins, eviction, quarantine, the SSD mirror
 *     ├─ SealChecksums   seals and their CRC32C, on the loop or a worker
 *     ├─ SsdTier         offers to SSD, the mirror's feed, reads back (Materializer)
 *     └─ StorageMetrics  meters and the stats snapshot
 * </pre>
 */
public final class StorageVerticle extends VerticleBase {
    private final StorageSettings settings;
    private final MeterRegistry registry;
    private final Ticker ticker;
    /** How often the role itself re-checks the pool's real page sizes when its mount promises huge pages. */
    static final long HUGE_PAGE_CHECK_MILLIS = 60_000;
    private SharedMemoryFile poolFile;
    /** What the pool's directory gives it ({@link PoolPages}): from the settings, or asked by the start worker. */
    private volatile PoolPages.Answer poolPages;
    /** The pool's real page sizes in this process, from smaps (gauges, one WARN); created by the start worker. */
    private volatile PoolHugePageMeter hugePageMeter;
    private long hugePageTimer = -1;
    private long fragmentationTimer = -1;
    private ImageStore store;
    private StorageMetrics metrics;
    private SealChecksums seals;
    /** Null without an SSD tier. */
    private SsdTier ssdTier;
    /** Reads into pool slots still in flight when {@link #stop} unmapped the pool: 0 after an ordered stop. */
    private volatile int readsInFlightAtUnmap = -1;
    /** The one-shot timer that ends the eldest quarantine hold; -1 when none is armed. */
    private long quarantineTimer = -1;

    /**
     * A storage role with {@code settings} (see {@link StorageSettings}: the pool, and optionally the SSD tier and
     * cost); quarantine deadlines, read timings and the huge-page meter's rate come from {@code ticker}.
     */
    public StorageVerticle(StorageSettings settings, MeterRegistry registry, Ticker ticker) {
        this.settings = settings.validate();
        this.registry = registry;
        this.ticker = ticker;
    }

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

    private Future<?> startOnPool() {
        PoolAllocator allocator = new PoolAllocator(settings.poolBytes(), settings.chunkBytes());
        RetentionTable retention = new RetentionTable(ticker, settings.retentionBudgetBytes(),
                settings.retentionMaxTtlNanos(), settings.retentionShares());
        store = new ImageStore(allocator, poolFile.segment(), settings.publishBudgetBytes(),
                new ResidencyStream(settings.incarnation(), settings.residencyCapacity()), new ImageStore.Listener() {
                    @Override
                    public void onSealed(ImageRef image) {
                        if (ssdTier != null) {
                            ssdTier.offer(image);
                        }
                    }

                    @Override
                    public void onReused(List<ImageRef> images) {
                        if (ssdTier != null) {
                            ssdTier.reused(images);
                        }
                    }
                }, retention);
        metrics = new StorageMetrics(registry, store, poolPages.hugePages(), hugePageMeter, worker());
        seals = new SealChecksums(vertx, store, poolFile.segment(), settings.backgroundChecksums(), metrics);
        fragmentationTimer = vertx.setPeriodic(1000, id -> {
            if (ssdTier != null) {
                ssdTier.resyncIfOverflowed();
            }
            metrics.measureFragmentation();
            if (store.expireRetentions() > 0) {
                metrics.refresh();
            }
        });
        if (poolPages.hugePages()) {
            // Pages are touched long after start (engines, peers): without scrapes, a fallback still gets its WARN.
            hugePageTimer = vertx.setPeriodic(HUGE_PAGE_CHECK_MILLIS, id -> hugePageMeter.latest(worker()));
        }
        Future<?> ssdReady = Future.succeededFuture();
        if (settings.ssd() != null) {
            ssdTier = new SsdTier(settings.ssd(), store, poolFile.segment(), metrics, settings.cost(),
                    settings.ssdStore(), ticker);
            ssdReady = ssdTier.start();
        }
        EventBus bus = vertx.eventBus();
        LocalCodec.register(vertx, StorageCommands.MESSAGE_TYPES.stream()
                .filter(c -> c != Integer.class).toArray(Class<?>[]::new));
        RoleProxies.<StorageCommands.Allocate, AllocateResult>serve(bus, StorageProxy.ALLOCATE,
                c -> changed(store.allocate(c.instance(), c.keys(), c.lengths())));
        RoleProxies.<StorageCommands.AllocateTransient, AllocateResult>serve(bus, StorageProxy.ALLOCATE_TRANSIENT,
                c -> changed(store.allocate(c.instance(), c.keys(), c.lengths(), true)));
        RoleProxies.<StorageCommands.Retain, StorageCommands.Retained>serve(bus, StorageProxy.RETAIN,
                c -> changed(store.retain(c.tenant(), c.keys(), c.lengths(), c.ttlNanos(), c.priority())));
        RoleProxies.<StorageCommands.Unretain, Long>serve(bus, StorageProxy.UNRETAIN,
                c -> changed(store.unretain(c.tenant(), c.retentionId())));
        RoleProxies.<StorageCommands.Seal, SealResult>serve(bus, StorageProxy.SEAL,
                this::seal);
        RoleProxies.<StorageCommands.SealAndPin, StorageCommands.SealedAndPinned>serve(bus, StorageProxy.SEAL_AND_PIN,
                this::sealAndPin);
        RoleProxies.<StorageCommands.Abort, Integer>serve(bus, StorageProxy.ABORT,
                c -> changed(store.abort(c.instance(), c.publishId())));
        RoleProxies.<StorageCommands.Probe, StorageCommands.Presence>serve(bus, StorageProxy.PROBE,
                c -> Future.succeededFuture(new StorageCommands.Presence(store.probe(c.groups()))));
        RoleProxies.<StorageCommands.PinExact, ExactPin>serve(bus, StorageProxy.PIN_EXACT, c -> {
            ExactPin pin = store.pinExact(c.groups());
            if (pin.complete()) {
                long pages = pin.pinned().stream().mapToLong(List::size).sum();
                metrics.dramTierPages.increment(pages);
                metrics.dramTierBytes.increment(pin.pinnedBytes());
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
                c -> Future.succeededFuture(metrics.snapshot()));
        RoleProxies.<StorageCommands.Discover, StorageCommands.Discovery>serve(bus, StorageProxy.DISCOVER,
                c -> Future.succeededFuture(new StorageCommands.Discovery(store.discover(c.keys()))));
        RoleProxies.<StorageCommands.PinGenerations, ExactPin>serve(bus, StorageProxy.PIN_GENERATIONS, c -> {
            ExactPin pin = store.pinGenerations(c.pages());
            if (pin.complete()) {
                metrics.dramTierPages.increment(pin.pinned().getFirst().size());
                metrics.dramTierBytes.increment(pin.pinnedBytes());
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
        RoleProxies.<StorageCommands.ResidencySince, ResidencyPage>serve(bus, StorageProxy.RESIDENCY_SINCE,
                c -> Future.succeededFuture(store.residency().since(c.after(), c.max())));
        RoleProxies.<StorageCommands.ResidencySnapshotOf, ResidencySnapshot>serve(bus,
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
            ExactPin pin = store.pinExact(List.of(c.pin()));
            if (pin.complete()) {
                metrics.dramTierPages.increment(c.pin().size());
                metrics.dramTierBytes.increment(pin.pinnedBytes());
            }
            return changed(new StorageCommands.SealedAndPinned(sealed, pin));
        });
    }

    /** Seals a publish, checking its checksums on the loop or a worker (see {@link SealChecksums}). */
    private Future<SealResult> seal(StorageCommands.Seal c) {
        return seals.seal(c);
    }

    private int materialize(List<StateKey> keys) {
        return ssdTier == null ? 0 : ssdTier.materialize(keys);
    }

    /**
     * Host materialization from SSD for the planning role (see io.orbitkv.model.plan.LocalReplicaPort), step one: pool
     * slots reserved (WRITING, invisible to queries) and exact-generation SSD extent leases taken, all or nothing.
     */
    private Future<StorageCommands.SsdHold> acquireFromSsd(List<KeyGeneration> pages) {
        if (ssdTier == null) {
            return Future.failedFuture(new IllegalStateException("the SSD tier is off"));
        }
        return ssdTier.acquire(pages);
    }

    /** Step two: reads every page of the hold into its slot, then seals and pins them all in one step, or fails. */
    private Future<StorageCommands.ReadPages> readFromSsd(long hold) {
        if (ssdTier == null) {
            return Future.failedFuture(new IllegalStateException("no unread SSD hold " + hold));
        }
        return ssdTier.read(hold);
    }

    private Future<Boolean> releaseSsdHold(long hold) {
        return ssdTier == null ? Future.succeededFuture(false) : ssdTier.release(hold);
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
                    metrics.refresh();
                }
                armQuarantineTimer();
            });
        });
    }

    private <T> Future<T> changed(T result) {
        metrics.refresh();
        return Future.succeededFuture(result);
    }

    /** Runs smaps re-reads of {@link PoolHugePageMeter} on workers of this role's context (never its event loop). */
    private Executor worker() {
        return read -> context.executeBlocking(() -> {
            read.run();
            return null;
        }, false);
    }

    /**
     * The first half of the ordered stop, while the SSD role is still running: withdraws this role's handlers (callers
     * get SHUTTING_DOWN), starts no more reads back from SSD, stops following residency changes and completes, on
     * this role's context, once every read it submitted has completed and no worker reads slots for checksums. Only
     * then may the SSD role close and, after it, {@link #stop} unmap the pool: nothing is ever written into (or read
     * from) unmapped memory. Any thread.
     */
    public Future<Void> quiesce() {
        Promise<Void> quiesced = Promise.promise();
        context.runOnContext(v -> {
            RoleProxies.withdrawAll(context);
            Future<Void> reads = ssdTier == null ? Future.succeededFuture() : ssdTier.quiesce();
            reads.compose(x -> seals == null ? Future.<Void>succeededFuture() : seals.drained()).onComplete(quiesced);
        });
        return quiesced.future();
    }

    /** Reads back from SSD into pool slots submitted and not yet completed, as of the role's last change. Any thread. */
    public long readsInFlight() {
        StorageMetrics m = metrics;
        StorageCommands.StorageStats stats = m == null ? null : m.snapshot();
        return stats == null ? 0 : stats.materializingImages();
    }

    /** Reads into pool slots in flight when {@link #stop} unmapped the pool (-1 before); any thread. */
    public int readsInFlightAtUnmap() {
        return readsInFlightAtUnmap;
    }

    @Override
    public Future<?> stop() {
        RoleProxies.withdrawAll(context);
        readsInFlightAtUnmap = ssdTier == null ? 0 : ssdTier.readsInFlight();
        if (fragmentationTimer >= 0) {
            vertx.cancelTimer(fragmentationTimer);
        }
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
