package io.orbitkv.storage;

import io.orbitkv.common.BoundedHandoff;
import io.orbitkv.common.Ticker;
import io.orbitkv.model.cost.CostEstimateKey;
import io.orbitkv.model.cost.CostPath;
import io.orbitkv.cost.CostProxy;
import io.orbitkv.model.cost.ObservationOutcome;
import io.orbitkv.model.cost.ObservationRecord;
import io.orbitkv.model.cost.ObservedBytes;
import io.orbitkv.model.cost.RepresentationFamily;
import io.orbitkv.model.cost.ResourceId;
import io.orbitkv.model.cost.ShadowAlternative;
import io.orbitkv.model.cost.ShadowRequest;
import io.orbitkv.model.cost.SizeBucket;
import io.orbitkv.ssd.SsdCommands;
import io.orbitkv.model.SsdEntry;
import io.orbitkv.model.SsdLease;
import io.orbitkv.model.SsdPageOutcome;
import io.orbitkv.ssd.SsdProxy;
import io.orbitkv.model.SsdReadResult;
import io.orbitkv.model.SsdResidencyChange;
import io.orbitkv.model.SsdWritePolicy;
import io.vertx.core.Future;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import io.orbitkv.model.StateKey;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.KeyGeneration;

/**
 * The SSD tier as the storage role sees it: the mirror of committed extents, the writes offered, and the reads back
 * into pool slots (through the {@link Materializer}, which owns them).
 *
 * <p>Design note: sealed images are offered to the SSD role fire-and-forget with only a weak reference
 * ({@link ImageStore#weakSource}), so a slow or full disk never slows publishing or holds DRAM. The mirror follows the
 * SSD role's residency changes first and then seeds itself, so a change racing the seed is applied twice (harmless);
 * a change the bounded hand-off refused (storage fell behind) is made up for by seeding again. {@link #quiesce} stops
 * following and starting reads, and completes once no read into a pool slot is in flight. Confined to the storage
 * role's loop.
 */
final class SsdTier {
    private final SsdProxy ssd;
    private final ImageStore store;
    private final StorageMetrics metrics;
    private final CostProxy cost;
    private final ResourceId ssdStore;
    private final Materializer materializer;
    private BoundedHandoff<SsdResidencyChange> residencyChanges;
    /** Whether the SSD role writes on second sightings (learnt from it at start): then reuse is reported to it. */
    private boolean reportReuse;

    SsdTier(SsdProxy ssd, ImageStore store, MemorySegment pool, StorageMetrics metrics, CostProxy cost,
            ResourceId ssdStore, Ticker ticker) {
        this.ssd = ssd;
        this.store = store;
        this.metrics = metrics;
        this.cost = cost;
        this.ssdStore = ssdStore;
        this.materializer = new Materializer(store, pool, readBack(ssd), this::onReadBack, ticker);
    }

    /** Follows the SSD role's residency changes, seeds the mirror and learns the write policy. On the role's context. */
    Future<?> start() {
        residencyChanges = ssd.residencyChanges(change -> {
            if (residencyChanges.overflowed()) {
                resync();
            }
            if (change.kind() == SsdResidencyChange.Kind.SSD_ADDED) {
                store.ssdAdded(change.key(), change.generation(), change.lengthBytes());
            } else {
                store.ssdRemoved(change.key(), change.generation());
            }
            metrics.refresh();
        });
        residencyChanges.overflowed(); // what was refused before anyone followed: the seed covers it
        return seed().compose(ignored -> ssd.writePolicy())
                .onSuccess(policy -> reportReuse = policy == SsdWritePolicy.REUSE_AWARE);
    }

    /** Seeds the mirror again when the hand-off refused a change since the last look (the owner's periodic check). */
    void resyncIfOverflowed() {
        if (residencyChanges != null && residencyChanges.overflowed()) {
            resync();
        }
    }

    /** Mirrors every committed SSD extent; keys the SSD role no longer has leave the mirror. */
    private Future<?> seed() {
        return ssd.committedEntries().onSuccess(entries -> {
            Set<StateKey> committed = new HashSet<>();
            for (SsdEntry entry : entries) {
                committed.add(entry.key());
            }
            store.ssdRetainOnly(committed);
            for (SsdEntry entry : entries) {
                store.ssdAdded(entry.key(), entry.generation(), entry.lengthBytes());
            }
            metrics.refresh();
        });
    }

    private void resync() {
        metrics.residencyResyncs.increment();
        seed();
    }

    /** A freshly sealed image, offered for an SSD write (the SSD store observes the copy or write it makes). */
    void offer(ImageRef image) {
        ssd.offerWrite(image.key(), store.weakSource(image), image.lengthBytes());
    }

    /**
     * Under the reuse-aware write policy, resident images seen again (a query hit them in DRAM, a publish named them
     * again) are second sightings: the SSD role then writes them from the same weak source as a seal-time offer. One
     * fire-and-forget message per hit group; nothing is sent under the ALL policy.
     */
    void reused(List<ImageRef> images) {
        if (!reportReuse || images.isEmpty()) {
            return;
        }
        List<SsdCommands.OfferWrite> reused = new ArrayList<>(images.size());
        for (ImageRef image : images) {
            reused.add(new SsdCommands.OfferWrite(image.key(), store.weakSource(image), image.lengthBytes()));
        }
        ssd.noteReuse(reused);
    }

    /** Starts reading keys found on SSD only back into DRAM slots; answers how many (see {@link Materializer}). */
    int materialize(List<StateKey> keys) {
        return materializer.start(keys);
    }

    /** Planning's step one: slots reserved and exact-generation leases taken, all or nothing. */
    Future<StorageCommands.SsdHold> acquire(List<KeyGeneration> pages) {
        if (materializer.closed()) {
            return Future.failedFuture(new IllegalStateException("the storage role is stopping"));
        }
        return materializer.acquire(pages).andThen(ar -> metrics.refresh());
    }

    /** Step two: reads the hold's pages, then seals and pins them in one step (see {@link Materializer#read}). */
    Future<StorageCommands.ReadPages> read(long hold) {
        return materializer.read(hold).andThen(ar -> {
            if (ar.succeeded()) {
                // Pinned for a lease like any DRAM hit: the dram tier counts every page leased (read back or not).
                metrics.dramTierPages.increment(ar.result().size());
                metrics.dramTierBytes.increment(ar.result().stream().mapToLong(ImageRef::lengthBytes).sum());
            }
            metrics.refresh();
        }).map(StorageCommands.ReadPages::new);
    }

    /** Ends a hold that was never read. */
    Future<Boolean> release(long hold) {
        return materializer.release(hold).andThen(ar -> metrics.refresh());
    }

    /** Stops following and reading, and completes once no read into a pool slot is in flight. */
    Future<Void> quiesce() {
        if (residencyChanges != null) {
            residencyChanges.close();
        }
        materializer.close();
        return materializer.drained();
    }

    /** Pages being read into pool slots now. */
    int readsInFlight() {
        return materializer.inFlight();
    }

    private static Materializer.SsdReadBack readBack(SsdProxy ssd) {
        return new Materializer.SsdReadBack() {
            @Override
            public Future<List<SsdPageOutcome<SsdLease>>> acquireLeases(List<SsdCommands.AcquireLease> pages) {
                return ssd.acquireLeases(pages);
            }

            @Override
            public Future<List<SsdPageOutcome<SsdReadResult>>> readInto(List<SsdCommands.ReadInto> reads) {
                return ssd.readInto(reads);
            }

            @Override
            public Future<Integer> release(List<SsdLease> leases) {
                return ssd.release(leases);
            }
        };
    }

    private void onReadBack(List<ImageRef> images, List<SsdPageOutcome<SsdReadResult>> outcomes,
                            long nanos) {
        for (int i = 0; i < images.size(); i++) {
            if (outcomes.get(i).succeeded()) {
                metrics.ssdTierPages.increment();
                metrics.ssdTierBytes.increment(images.get(i).lengthBytes());
            } else {
                metrics.materializeFailures.increment();
            }
        }
        observeReads(images, outcomes, nanos);
        metrics.refresh();
    }

    /**
     * Reports one read-back's SSD reads and asks the cost role, in shadow, whether the other read path of the SSD
     * store would have been cheaper for the same work: straight into the slot (needs a 4 KiB-aligned slot that covers
     * the rounded length: every pool slot does) versus through a bounce buffer plus a copy (always possible). One
     * observation per path taken, covering its pages (the read command's time); the failed pages as one failure.
     * Shadow never launches the alternative and never changes execution; an alternative never executed stays unknown.
     */
    private void observeReads(List<ImageRef> images, List<SsdPageOutcome<SsdReadResult>> outcomes,
                              long nanos) {
        if (cost == null || !cost.observationsEnabled()) {
            return;
        }
        long[] bytes = new long[3]; // direct, bounced, failed
        int[] pages = new int[3];
        for (int i = 0; i < images.size(); i++) {
            SsdPageOutcome<SsdReadResult> outcome = outcomes.get(i);
            int kind = !outcome.succeeded() ? 2 : outcome.value().path() == SsdReadResult.ReadPath.BOUNCE ? 1 : 0;
            bytes[kind] += images.get(i).lengthBytes();
            pages[kind]++;
        }
        for (int kind = 0; kind < 3; kind++) {
            if (pages[kind] == 0) {
                continue;
            }
            boolean bounced = kind == 1;
            boolean succeeded = kind != 2;
            CostEstimateKey direct = CostEstimateKey.operation(CostPath.SSD_READ, ssdStore, RepresentationFamily.RAW,
                    SizeBucket.of(bytes[kind]), SizeBucket.of(pages[kind]));
            CostEstimateKey viaBounce = CostEstimateKey.operation(CostPath.SSD_READ_BOUNCED, ssdStore,
                    RepresentationFamily.RAW, SizeBucket.of(bytes[kind]), SizeBucket.of(pages[kind]));
            CostEstimateKey executed = bounced ? viaBounce : direct;
            cost.report(ObservationRecord.of(executed,
                    succeeded ? ObservationOutcome.SUCCEEDED : ObservationOutcome.FAILED,
                    nanos, succeeded ? ObservedBytes.of(bytes[kind], bytes[kind]) : ObservedBytes.UNKNOWN));
            if (succeeded) {
                ShadowAlternative other = bounced
                        ? ShadowAlternative.when(direct, () -> true) // pool slots are aligned and rounded
                        : ShadowAlternative.when(viaBounce, () -> true);
                cost.recordShadow(new ShadowRequest(executed, List.of(other)));
            }
        }
    }
}
