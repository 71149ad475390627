package io.orbitkv.storage;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.common.LocalCodec;
import io.orbitkv.common.RoleProxies;
import io.orbitkv.nativeio.shm.SharedMemoryFile;
import io.vertx.core.Future;
import io.vertx.core.VerticleBase;
import io.vertx.core.eventbus.EventBus;
import java.io.IOException;
import java.nio.file.Path;

/**
 * The storage role: owns the shared-memory pool, its allocator and the resident images.
 *
 * <p>Design note (ownership and lifetime): this verticle creates the pool file in {@code start()} and removes it in
 * {@code stop()}; engines map the same file. All image state is confined to this verticle's event loop, reached
 * only through {@link StorageProxy}. On stop, outstanding leases die with the process: the file is unlinked, and
 * engines still mapping it keep their mapping until they unmap (the kernel frees the memory then).
 */
public final class StorageVerticle extends VerticleBase {
    /** Settings of the storage role; sizes in bytes. */
    public record Settings(Path poolPath, long poolBytes, long chunkBytes, long publishBudgetBytes,
                           int residencyCapacity, long incarnation) {}

    private final Settings settings;
    private final MeterRegistry registry;
    private SharedMemoryFile poolFile;
    private ImageStore store;
    private volatile StorageCommands.StorageStats snapshot;

    public StorageVerticle(Settings settings, MeterRegistry registry) {
        this.settings = settings;
        this.registry = registry;
    }

    @Override
    public Future<?> start() {
        try {
            poolFile = SharedMemoryFile.create(settings.poolPath(), settings.poolBytes());
        } catch (IOException | RuntimeException e) {
            return Future.failedFuture(new IllegalStateException("cannot create the shared-memory pool "
                    + settings.poolPath() + " of " + settings.poolBytes() + " bytes: " + e.getMessage(), e));
        }
        PoolAllocator allocator = new PoolAllocator(settings.poolBytes(), settings.chunkBytes());
        store = new ImageStore(allocator, poolFile.segment(), settings.publishBudgetBytes(),
                new ResidencyStream(settings.incarnation(), settings.residencyCapacity()), new ImageStore.Listener() {});
        refresh();
        registerMetrics();
        EventBus bus = vertx.eventBus();
        LocalCodec.register(vertx, StorageCommands.MESSAGE_TYPES.stream()
                .filter(c -> c != Integer.class).toArray(Class<?>[]::new));
        RoleProxies.<StorageCommands.Allocate, ImageStore.AllocateResult>serve(bus, StorageProxy.ALLOCATE,
                c -> changed(store.allocate(c.instance(), c.keys(), c.lengths())));
        RoleProxies.<StorageCommands.Seal, ImageStore.SealResult>serve(bus, StorageProxy.SEAL,
                c -> changed(store.seal(c.instance(), c.publishId(), c.crc32c(), c.written())));
        RoleProxies.<StorageCommands.Abort, Integer>serve(bus, StorageProxy.ABORT,
                c -> changed(store.abort(c.instance(), c.publishId())));
        RoleProxies.<StorageCommands.LookupAndPin, ImageStore.Lookup>serve(bus, StorageProxy.LOOKUP,
                c -> changed(store.lookupAndPin(c.chains())));
        RoleProxies.<StorageCommands.Probe, StorageCommands.Presence>serve(bus, StorageProxy.PROBE,
                c -> Future.succeededFuture(new StorageCommands.Presence(store.probe(c.groups()))));
        RoleProxies.<StorageCommands.PinExact, ImageStore.ExactPin>serve(bus, StorageProxy.PIN_EXACT,
                c -> changed(store.pinExact(c.groups())));
        RoleProxies.<StorageCommands.Unpin, Integer>serve(bus, StorageProxy.UNPIN, c -> {
            store.unpin(c.pinned());
            return changed(c.pinned().size());
        });
        RoleProxies.<StorageCommands.ReleaseInstance, Integer>serve(bus, StorageProxy.RELEASE_INSTANCE,
                c -> changed(store.releaseInstance(c.instance())));
        RoleProxies.<StorageCommands.GetStats, StorageCommands.StorageStats>serve(bus, StorageProxy.STATS,
                c -> Future.succeededFuture(snapshot));
        return Future.succeededFuture();
    }

    private <T> Future<T> changed(T result) {
        refresh();
        return Future.succeededFuture(result);
    }

    private void refresh() {
        PoolAllocator a = store.allocator();
        snapshot = new StorageCommands.StorageStats(a.poolBytes(), a.spanBytes(), a.slotBytes(), a.requestedBytes(),
                a.freeBytes(), a.strandedFreeBytes(), a.largestFreeRunBytes(), store.residentImages(),
                store.unsealedImages(), store.pinnedImages(), store.openPublishes(), store.evictions(),
                store.residency().lastSequence());
    }

    private void registerMetrics() {
        Gauge.builder("orbitkv.pool.bytes", () -> snapshot.poolBytes()).baseUnit("bytes")
                .description("Size of the shared-memory DRAM pool").register(registry);
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
    }

    @Override
    public Future<?> stop() {
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
