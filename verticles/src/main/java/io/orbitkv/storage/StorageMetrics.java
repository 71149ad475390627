package io.orbitkv.storage;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.concurrent.Executor;

/**
 * The storage role's meters and the stats snapshot they read.
 *
 * <p>Design note: {@link #refresh} runs after every change of the role, so on the query path: it copies counters only.
 * The two fragmentation figures that walk the allocator's spans and chunk map are re-measured by the owner once a
 * second ({@link #measureFragmentation}). Written on the storage loop only; the snapshot is volatile so gauges and
 * {@link StorageProxy#stats} read it from any thread. The huge-page gauges re-read smaps on {@code worker}, never on
 * the scraping thread's budget (see {@link PoolHugePageMeter}).
 */
final class StorageMetrics {
    final Counter dramTierPages;
    final Counter dramTierBytes;
    final Counter ssdTierPages;
    final Counter ssdTierBytes;
    final Counter materializeFailures;
    final Counter residencyResyncs;
    final Counter checksumsOffloaded;
    final Counter checksumsReceived;
    final Counter backgroundChecksums;
    private final ImageStore store;
    private long strandedFreeBytes;
    private long largestFreeRunBytes;
    private volatile StorageCommands.StorageStats snapshot;
    /** Retention figures, copied with the snapshot (see {@link RetentionTable}). */
    private volatile long retainedBytes;
    private volatile long retentions;

    StorageMetrics(MeterRegistry registry, ImageStore store, boolean hugePages, PoolHugePageMeter hugePageMeter,
                   Executor worker) {
        this.store = store;
        measureFragmentation();
        Gauge.builder("orbitkv.pool.bytes", () -> snapshot.poolBytes()).baseUnit("bytes")
                .description("Size of the shared-memory DRAM pool").register(registry);
        Gauge.builder("orbitkv.pool.huge.pages", () -> hugePages ? 1 : 0)
                .description("1 when the pool's directory backs it with 2 MiB huge pages (pool.shm-dir), else 0")
                .register(registry);
        // Measured, not promised: smaps re-read on a worker at most once per 5 s however often /metrics is scraped.
        Gauge.builder("orbitkv.pool.huge.mapped.bytes", () -> hugePageMeter.latest(worker).hugeMappedBytes())
                .baseUnit("bytes").description("Bytes of the pool this process maps with 2 MiB pages (smaps "
                        + "ShmemPmdMapped + FilePmdMapped over its mappings of the pool file; compare touched bytes)")
                .register(registry);
        Gauge.builder("orbitkv.pool.touched.bytes", () -> hugePageMeter.latest(worker).residentBytes())
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
        Gauge.builder("orbitkv.retained.bytes", () -> retainedBytes).baseUnit("bytes")
                .description("Bytes of live retention hints, counted against their tenants' budgets, resident or not")
                .register(registry);
        Gauge.builder("orbitkv.retentions", () -> retentions).description("Live retention hints").register(registry);
        Gauge.builder("orbitkv.images.restoring", () -> snapshot.materializingImages())
                .description("DRAM slots being filled from SSD").register(registry);
    }

    /** Publishes a new snapshot of the role: counters only. */
    void refresh() {
        PoolAllocator a = store.allocator();
        snapshot = new StorageCommands.StorageStats(a.poolBytes(), a.spanBytes(), a.slotBytes(), a.requestedBytes(),
                a.freeBytes(), strandedFreeBytes, largestFreeRunBytes, store.residentImages(),
                store.unsealedImages(), store.pinnedImages(), store.openPublishes(), store.evictions(),
                store.residency().lastSequence(), store.ssdKeys(), store.materializingImages(),
                store.quarantinedSlots(), store.quarantinedBytes(), store.quarantineEvents());
        retainedBytes = store.retainedBytes();
        retentions = store.retentions();
    }

    /** Walks the allocator for the fragmentation figures, then refreshes. */
    void measureFragmentation() {
        strandedFreeBytes = store.allocator().strandedFreeBytes();
        largestFreeRunBytes = store.allocator().largestFreeRunBytes();
        refresh();
    }

    /** The latest snapshot; any thread. */
    StorageCommands.StorageStats snapshot() {
        return snapshot;
    }
}
