package io.orbitkv.events;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.common.LocalCodec;
import io.orbitkv.common.RoleProxies;
import io.orbitkv.cost.CostProxy;
import io.orbitkv.model.ResidencySnapshot;
import io.orbitkv.model.ResidentKey;
import io.orbitkv.model.StateKey;
import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.model.cost.CostEstimateKey;
import io.orbitkv.model.cost.CostEstimateResult;
import io.orbitkv.model.cost.CostPath;
import io.orbitkv.model.cost.RepresentationFamily;
import io.orbitkv.model.cost.SizeBucket;
import io.orbitkv.model.plan.RouteResources;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.storage.StorageCommands;
import io.orbitkv.storage.StorageCommands.ResidencyChange;
import io.orbitkv.storage.StorageProxy;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.VerticleBase;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The events role: follows the storage role's residency stream and turns it into KV events in vLLM's format for
 * request routers ({@link KvEventPublisher}), and answers the router summary ({@link EventsProxy#summary}).
 *
 * <p>Design note (what is announced): the residency stream already says exactly what a router may count on: a DRAM
 * image appears when it is sealed (a publish, or a read back from SSD once verified: a read in progress is not
 * there), and leaves when it is evicted; an SSD extent appears when its write commits or the open-time scan recovers
 * it, and leaves when overwritten, found corrupt or closed. Quarantine keeps sealed images resident and leasable, so
 * it changes nothing a router sees. Each change becomes a {@code BlockStored} / {@code BlockRemoved} of its medium
 * ({@code CPU} for DRAM, {@code DISK} for SSD) only if it changes the {@link KvIndex} of what subscribers were told.
 * A batch holds changes of one namespace (its topic, and its {@code namespace} field, in hex).
 *
 * <p>Design note (staying exact): at start the role sends {@code AllBlocksCleared} (topic empty: every namespace) and
 * then everything the storage role holds at a snapshot's sequence, then follows the stream from that sequence: after
 * a Manager restart a subscriber drops what it knew and relearns the recovered SSD extents. When the stream's ring lost
 * changes before they were read (a gap), the role takes a snapshot and sends the difference between it and its index.
 * A batch the publisher's bounded queue refuses is taken back from the index and read again on the next look (the
 * ring keeps it, else the gap path covers it). A subscriber whose replay can no longer be served makes the publisher
 * ask for a clear: {@code AllBlocksCleared} and the full state are sent again, as at start. Nothing here waits on the storage loop: reads are bounded pages of
 * metadata on this role's own context, and the sockets live on the publisher's thread.
 *
 * <p>Design note (summary): per namespace, the blocks and bytes of each tier come from the index; the time to ready
 * for a prefix of N blocks from each tier is the cost role's estimate for the route that reads it (host-ready from
 * DRAM, host-ready from local SSD) at N times the namespace's mean page bytes; unknown stays unknown. SSD read
 * bandwidth in use is measured from the SSD role's byte counter; capacity comes from configuration. A summary is
 * recomputed at most every {@code events.summary.min-interval-ms}.
 */
public final class EventsVerticle extends VerticleBase {
    private static final Logger LOG = LoggerFactory.getLogger(EventsVerticle.class);
    /** Changes of one namespace in one batch at most. */
    static final int MAX_CHANGES_PER_BATCH = 512;
    private static final long SSD_SAMPLE_MS = 1000;

    private final EventsSettings settings;
    private final MeterRegistry registry;
    private final RouteResources resources;
    private final boolean ssdTier;
    private final long incarnation;
    private final KvIndex index;
    private StorageProxy storage;
    private final CostProxy cost;
    private KvEventPublisher publisher;
    private Context context;

    private long lastSequence;
    private boolean reading;
    private boolean resyncNeeded;
    private boolean clearNeeded;
    private long timer = -1;
    private long ssdTimer = -1;
    private long ssdBytesBefore = -1;
    private long ssdSampledAtNanos;
    private long ssdBytesPerSecond = -1;
    private long ssdWindowMillis;
    private EventsCommands.RouterSummary lastSummary;
    private long lastSummaryAtNanos;
    private Future<EventsCommands.RouterSummary> summarizing;

    private Counter deferred;
    private Counter resyncs;
    private Counter untracked;

    public EventsVerticle(EventsSettings settings, MeterRegistry registry, CostProxy cost, RouteResources resources,
                          boolean ssdTier, long incarnation) {
        this.settings = settings;
        this.registry = registry;
        this.cost = cost;
        this.resources = resources;
        this.ssdTier = ssdTier;
        this.incarnation = incarnation;
        this.index = new KvIndex(settings.maxKeys());
    }

    /** The PUB address as bound (a wildcard port resolved); null when events are off. */
    public String endpoint() {
        return publisher == null ? null : publisher.endpoint();
    }

    /** The replay address as bound; null without replay. */
    public String replayEndpoint() {
        return publisher == null ? null : publisher.replayEndpoint();
    }

    @Override
    public Future<?> start() {
        context = vertx.getOrCreateContext();
        storage = new StorageProxy(vertx);
        LocalCodec.register(vertx, EventsCommands.MESSAGE_TYPES.toArray(Class<?>[]::new));
        deferred = Counter.builder("orbitkv.events.batches").tag("outcome", "deferred")
                .description("Event batches the publisher's full queue refused; read again and sent later")
                .register(registry);
        resyncs = Counter.builder("orbitkv.events.resyncs")
                .description("Resynchronisations: the residency stream lost changes before they were read (the "
                        + "difference to a snapshot was sent), or a replay could not be served (AllBlocksCleared and "
                        + "the full state were sent)").register(registry);
        untracked = Counter.builder("orbitkv.events.untracked")
                .description("Keys not announced because events.max-keys were announced on their medium")
                .register(registry);
        Future<Void> bound = Future.succeededFuture();
        if (settings.publishes()) {
            KvEventPublisher.Meters meters = new KvEventPublisher.Meters(
                    Counter.builder("orbitkv.events.published").description("KV events sent (BlockStored, "
                            + "BlockRemoved, AllBlocksCleared)").register(registry),
                    Counter.builder("orbitkv.events.batches").tag("outcome", "published")
                            .description("Event batches sent").register(registry),
                    Counter.builder("orbitkv.events.batches").tag("outcome", "dropped")
                            .description("Event batches the PUB socket refused (still replayable)")
                            .register(registry),
                    Counter.builder("orbitkv.events.replays.served").description("Replay requests answered")
                            .register(registry));
            publisher = new KvEventPublisher(settings.endpoint(), settings.replayEndpoint(), settings.hwm(),
                    settings.heartbeatMs(), settings.queueCapacity(), settings.replayBatches(), settings.replayBytes(),
                    meters,
                    System.currentTimeMillis() * 1000, () -> context.runOnContext(v -> {
                        if (!clearNeeded) {
                            resyncs.increment();
                            clearNeeded = true;
                        }
                    }));
            KvEventPublisher p = publisher;
            Gauge.builder("orbitkv.events.queued", p, KvEventPublisher::queued)
                    .description("Event batches waiting for the publisher thread").register(registry);
            bound = Future.fromCompletionStage(publisher.start(), context);
            clearNeeded = true;
        }
        RoleProxies.<EventsCommands.GetSummary, EventsCommands.RouterSummary>serve(vertx.eventBus(),
                EventsProxy.SUMMARY, c -> summary());
        return bound.compose(v -> storage.residencySnapshot(settings.maxKeys())).map(snapshot -> {
            resync(snapshot);
            timer = vertx.setPeriodic(settings.intervalMs(), id -> tick());
            ssdTimer = vertx.setPeriodic(SSD_SAMPLE_MS, id -> sampleSsdReads());
            sampleSsdReads();
            if (publisher != null) {
                LOG.info("kv events: publishing on {}{}", publisher.endpoint(),
                        publisher.replayEndpoint() == null ? "" : ", replay on " + publisher.replayEndpoint());
            }
            return null;
        });
    }

    @Override
    public Future<?> stop() {
        RoleProxies.withdrawAll(context);
        vertx.cancelTimer(timer);
        vertx.cancelTimer(ssdTimer);
        KvEventPublisher p = publisher;
        return p == null ? Future.succeededFuture() : vertx.executeBlocking(() -> {
            p.close();
            return null;
        });
    }

    // ---- following the residency stream ----

    private void tick() {
        if (reading) {
            return;
        }
        reading = true;
        if (resyncNeeded || clearNeeded) {
            storage.residencySnapshot(settings.maxKeys()).onComplete(ar -> {
                reading = false;
                if (ar.succeeded()) {
                    resync(ar.result());
                } else {
                    LOG.warn("kv events: no residency snapshot ({})", ar.cause().toString());
                }
            });
            return;
        }
        storage.residencyChangesSince(lastSequence, settings.maxChangesPerRead()).onComplete(ar -> {
            reading = false;
            if (ar.failed()) {
                LOG.warn("kv events: the residency stream could not be read ({})", ar.cause().toString());
                return;
            }
            StorageCommands.ResidencyChanges page = ar.result();
            if (page.gap()) {
                resyncs.increment();
                resyncNeeded = true;
                return;
            }
            if (!page.changes().isEmpty()) {
                long handed = send(page.changes());
                lastSequence = handed;
            }
        });
    }

    /**
     * Sends the difference between the index and {@code snapshot} (after {@code AllBlocksCleared} when a clear is
     * due), and follows the stream from the snapshot's sequence once all of it was handed over.
     */
    private void resync(ResidencySnapshot snapshot) {
        if (clearNeeded) {
            byte[] payload = KvEventCodec.encodeBatch(nowSeconds(), List.of(new KvEvent.AllBlocksCleared()), null, 0);
            if (publisher != null && !publisher.offer(new KvEventPublisher.Batch("", payload, 1, true))) {
                deferred.increment();
                return;
            }
            index.clear();
            clearNeeded = false;
        }
        List<ResidencyChange> changes = new ArrayList<>();
        difference(KvEvent.Medium.CPU, snapshot.dram(), snapshot.sequence(), changes);
        difference(KvEvent.Medium.DISK, snapshot.ssd(), snapshot.sequence(), changes);
        // Group by namespace so that batches stay long; within a namespace removals first, as computed.
        Map<String, List<ResidencyChange>> byNamespace = new LinkedHashMap<>();
        for (ResidencyChange c : changes) {
            byNamespace.computeIfAbsent(KvIndex.namespaceHex(c.key()), n -> new ArrayList<>()).add(c);
        }
        List<ResidencyChange> ordered = new ArrayList<>(changes.size());
        byNamespace.values().forEach(ordered::addAll);
        int sent = sendCount(ordered);
        resyncNeeded = sent < ordered.size();
        if (!resyncNeeded) {
            lastSequence = snapshot.sequence();
        }
    }

    private void difference(KvEvent.Medium medium, List<ResidentKey> resident, long sequence,
                            List<ResidencyChange> out) {
        boolean dram = medium == KvEvent.Medium.CPU;
        Set<StateKey> now = new HashSet<>();
        for (ResidentKey k : resident) {
            now.add(k.key());
        }
        for (StateKey known : index.keys(medium)) {
            if (!now.contains(known)) {
                out.add(new ResidencyChange(sequence, dram ? ResidencyChange.Kind.DRAM_REMOVED
                        : ResidencyChange.Kind.SSD_REMOVED, known, -1, -1));
            }
        }
        for (ResidentKey k : resident) {
            if (!index.contains(medium, k.key())) {
                out.add(new ResidencyChange(sequence, dram ? ResidencyChange.Kind.DRAM_ADDED
                        : ResidencyChange.Kind.SSD_ADDED, k.key(), k.generation(), k.lengthBytes()));
            }
        }
    }

    /** Sends changes in order; answers the sequence up to which all were handed over. */
    private long send(List<ResidencyChange> changes) {
        int sent = sendCount(changes);
        return sent == changes.size() ? changes.getLast().sequence() : changes.get(sent).sequence() - 1;
    }

    /**
     * Turns runs of one namespace into batches and hands them to the publisher; answers how many changes were
     * handed over (all, unless its queue refused a batch: that batch and the rest are left for the next look).
     */
    private int sendCount(List<ResidencyChange> changes) {
        long untrackedBefore = index.untracked();
        int i = 0;
        try {
            while (i < changes.size()) {
                String namespace = KvIndex.namespaceHex(changes.get(i).key());
                List<KvIndex.Applied> applied = new ArrayList<>();
                List<KvEvent> events = new ArrayList<>();
                int j = i;
                while (j < changes.size() && j - i < MAX_CHANGES_PER_BATCH
                        && (j == i || KvIndex.namespaceHex(changes.get(j).key()).equals(namespace))) {
                    ResidencyChange c = changes.get(j);
                    KvEvent.Medium medium = switch (c.kind()) {
                        case DRAM_ADDED, DRAM_REMOVED -> KvEvent.Medium.CPU;
                        case SSD_ADDED, SSD_REMOVED -> KvEvent.Medium.DISK;
                    };
                    boolean added = c.kind() == ResidencyChange.Kind.DRAM_ADDED
                            || c.kind() == ResidencyChange.Kind.SSD_ADDED;
                    KvIndex.Applied a = index.apply(medium, c.key(), added, c.lengthBytes(), namespace);
                    if (a != null) {
                        applied.add(a);
                        append(events, a);
                    }
                    j++;
                }
                if (publisher != null && !events.isEmpty()) {
                    byte[] payload = KvEventCodec.encodeBatch(nowSeconds(), events, namespace, 0);
                    if (!publisher.offer(new KvEventPublisher.Batch(namespace, payload, events.size(), false))) {
                        index.undo(applied);
                        deferred.increment();
                        return i;
                    }
                }
                i = j;
            }
            return i;
        } finally {
            untracked.increment(index.untracked() - untrackedBefore);
        }
    }

    /** Adds a block to the last event when it is of the same kind, medium and group, else starts a new event. */
    private static void append(List<KvEvent> events, KvIndex.Applied a) {
        byte[] hash = a.key().blockHash();
        int group = a.key().groupId();
        if (!events.isEmpty()) {
            KvEvent last = events.getLast();
            if (a.added() && last instanceof KvEvent.BlockStored s && s.medium() == a.medium() && s.groupId() == group) {
                s.blockHashes().add(hash);
                return;
            }
            if (!a.added() && last instanceof KvEvent.BlockRemoved r && r.medium() == a.medium()
                    && r.groupId() == group) {
                r.blockHashes().add(hash);
                return;
            }
        }
        List<byte[]> hashes = new ArrayList<>();
        hashes.add(hash);
        events.add(a.added() ? new KvEvent.BlockStored(hashes, group, a.medium())
                : new KvEvent.BlockRemoved(hashes, group, a.medium()));
    }

    private static double nowSeconds() {
        return System.currentTimeMillis() / 1000.0;
    }

    // ---- router summary ----

    private void sampleSsdReads() {
        Counter reads = registry.find("orbitkv.ssd.read.bytes").counter();
        if (reads == null) {
            return;
        }
        long bytes = (long) reads.count();
        long now = System.nanoTime();
        if (ssdBytesBefore >= 0 && now > ssdSampledAtNanos) {
            long elapsed = now - ssdSampledAtNanos;
            ssdBytesPerSecond = (long) ((bytes - ssdBytesBefore) * 1e9 / elapsed);
            ssdWindowMillis = elapsed / 1_000_000;
        }
        ssdBytesBefore = bytes;
        ssdSampledAtNanos = now;
    }

    private Future<EventsCommands.RouterSummary> summary() {
        long now = System.nanoTime();
        if (lastSummary != null && now - lastSummaryAtNanos < settings.summaryMinIntervalMs() * 1_000_000) {
            return Future.succeededFuture(lastSummary);
        }
        if (summarizing != null) {
            return summarizing;
        }
        List<Map.Entry<String, KvIndex.Tally[]>> ranked = new ArrayList<>(index.namespaces().entrySet());
        ranked.sort(Comparator.comparingLong((Map.Entry<String, KvIndex.Tally[]> e) ->
                e.getValue()[0].blocks + e.getValue()[1].blocks).reversed().thenComparing(Map.Entry::getKey));
        int omitted = Math.max(0, ranked.size() - settings.summaryMaxNamespaces());
        List<Map.Entry<String, KvIndex.Tally[]>> shown = ranked.subList(0, ranked.size() - omitted);
        Map<CostEstimateKey, Future<CostEstimateResult>> estimates = new HashMap<>();
        List<Future<EventsCommands.NamespaceSummary>> parts = new ArrayList<>();
        for (Map.Entry<String, KvIndex.Tally[]> e : shown) {
            KvIndex.Tally dram = e.getValue()[KvEvent.Medium.CPU.ordinal()];
            KvIndex.Tally ssd = e.getValue()[KvEvent.Medium.DISK.ordinal()];
            long blocks = dram.blocks + ssd.blocks;
            long pageBytes = blocks == 0 ? -1 : (dram.bytes + ssd.bytes) / blocks;
            Future<List<EventsCommands.TimeToReady>> fromDram = timesToReady(KvEvent.Medium.CPU, pageBytes, estimates);
            Future<List<EventsCommands.TimeToReady>> fromSsd = timesToReady(KvEvent.Medium.DISK, pageBytes, estimates);
            parts.add(Future.all(fromDram, fromSsd).map(v -> new EventsCommands.NamespaceSummary(e.getKey(),
                    dram.blocks, dram.bytes, ssd.blocks, ssd.bytes, fromDram.result(), fromSsd.result())));
        }
        long sequence = lastSequence;
        EventsCommands.SsdRead ssdRead = !ssdTier ? null : ssdRead();
        Future<EventsCommands.RouterSummary> built = Future.all(parts).map(v -> {
            List<EventsCommands.NamespaceSummary> namespaces = new ArrayList<>();
            parts.forEach(p -> namespaces.add(p.result()));
            EventsCommands.RouterSummary summary = new EventsCommands.RouterSummary(System.currentTimeMillis(),
                    incarnation, sequence, ssdRead, namespaces, omitted);
            lastSummary = summary;
            lastSummaryAtNanos = System.nanoTime();
            return summary;
        });
        // Callers meanwhile share this one; it may also have completed in place (nothing to ask the cost role).
        if (!built.isComplete()) {
            summarizing = built;
            built.onComplete(ar -> summarizing = null);
        }
        return built;
    }

    private EventsCommands.SsdRead ssdRead() {
        long inUse = Math.max(0, ssdBytesPerSecond);
        long capacity = settings.ssdReadCapacityBytesPerSecond();
        return new EventsCommands.SsdRead(inUse, ssdWindowMillis, capacity < 0 ? null : capacity,
                capacity < 0 ? null : Math.max(0, capacity - inUse));
    }

    private Future<List<EventsCommands.TimeToReady>> timesToReady(KvEvent.Medium medium, long pageBytes,
                                                                  Map<CostEstimateKey, Future<CostEstimateResult>> memo) {
        List<Future<EventsCommands.TimeToReady>> each = new ArrayList<>();
        for (int blocks : settings.summaryPrefixBlocks()) {
            if (medium == KvEvent.Medium.DISK && !ssdTier) {
                each.add(Future.succeededFuture(unknown(blocks, "NO_SSD_TIER")));
                continue;
            }
            if (pageBytes <= 0) {
                each.add(Future.succeededFuture(unknown(blocks, "PAGE_BYTES_UNKNOWN")));
                continue;
            }
            CostEstimateKey key = costKey(medium, pageBytes * blocks, blocks);
            each.add(memo.computeIfAbsent(key, k -> cost.estimate(k)).map(result -> switch (result) {
                case CostEstimateResult.Usable u -> new EventsCommands.TimeToReady(blocks,
                        u.estimate().predictedNanos(), u.estimate().errorNanos(), u.estimate().sampleCount(), null);
                case CostEstimateResult.Unavailable u -> unknown(blocks, u.reason().name());
            }));
        }
        return Future.all(each).map(v -> {
            List<EventsCommands.TimeToReady> list = new ArrayList<>();
            each.forEach(f -> list.add(f.result()));
            return list;
        });
    }

    private static EventsCommands.TimeToReady unknown(int blocks, String reason) {
        return new EventsCommands.TimeToReady(blocks, null, null, null, reason);
    }

    /**
     * The cost key whose samples time a host-ready demand of {@code pages} pages served from {@code medium}: from DRAM,
     * the admission role's revision-to-READY route on the DRAM pool; from SSD, the route template that reads local
     * extents into the pool.
     */
    CostEstimateKey costKey(KvEvent.Medium medium, long bytes, long pages) {
        if (medium == KvEvent.Medium.CPU) {
            return CostEstimateKey.route(CostPath.HOST_READY_ROUTE, resources.dramPool(), RepresentationFamily.RAW,
                    SizeBucket.of(bytes), SizeBucket.of(pages), CompletionTarget.hostReady());
        }
        return RouteTemplate.HOST_FROM_LOCAL_SSD.costKey(resources, Optional.empty(),
                Optional.of(RepresentationFamily.RAW), bytes, pages, CompletionTarget.hostReady()).orElseThrow();
    }
}
