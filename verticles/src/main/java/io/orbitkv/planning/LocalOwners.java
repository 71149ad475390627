package io.orbitkv.planning;

import io.orbitkv.model.StateKey;
import io.vertx.core.Future;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.PositionedKey;
import io.orbitkv.model.KeyEvidence;
import io.orbitkv.model.KeyGeneration;
import io.orbitkv.model.plan.DemandView;
import io.orbitkv.model.plan.PlanningException;
import io.orbitkv.model.plan.PlanningFailure;
import io.orbitkv.model.plan.ByteCount;
import io.orbitkv.model.plan.DemandEvidence;
import io.orbitkv.model.plan.EvidenceSource;
import io.orbitkv.model.plan.ReplicaEvidence;
import io.orbitkv.model.plan.ReplicaSet;
import io.orbitkv.model.plan.ExecutionOwner;
import io.orbitkv.model.plan.PlannedPage;
import io.orbitkv.model.plan.PlannedSegment;
import io.orbitkv.model.plan.SegmentLease;
import io.orbitkv.model.plan.LocalReplicaPort;

/**
 * This Manager's own replicas for the planning role: discovery of local DRAM and SSD evidence, and the execution
 * owners of {@link RouteTemplate#LOCAL_DRAM} and {@link RouteTemplate#HOST_FROM_LOCAL_SSD}, over the storage role
 * ({@link LocalReplicaPort}).
 *
 * <p>Design note (ownership): the storage role owns every pin, slot and SSD extent lease; these owners only remember,
 * per segment lease they granted, what to hand back. A DRAM segment's lease is its exact-generation pins (acquired all
 * or nothing; nothing moves). An SSD segment's lease is first a hold (pool slots reserved + exact-generation extent
 * leases, nothing read), then, after {@link #ssd()}'s submit, the pins of the read, sealed and pinned pages (one step
 * in the storage role, so nothing can evict a page between its read and its pin). Release returns exactly what the
 * lease holds, once; a second release answers false. Submitted reads complete in the storage and SSD roles even when
 * the preparation is cancelled (the cancel is only a hint), and the lease is released only after that completion, by
 * the {@link PlanExecutor}'s contract. A Manager crash ends everything with the process.
 *
 * <p>Concurrency: confined to the planning role's event loop.
 */
public final class LocalOwners {
    private final LocalReplicaPort storage;
    private final DramOwner dram = new DramOwner();
    private final SsdOwner ssd = new SsdOwner();
    private long nextLease = 1;

    public LocalOwners(LocalReplicaPort storage) {
        this.storage = Objects.requireNonNull(storage, "storage");
    }

    public ExecutionOwner dram() {
        return dram;
    }

    public ExecutionOwner ssd() {
        return ssd;
    }

    /** Leases granted and not yet released (both owners): what tests assert returns to zero. */
    public int activeLeases() {
        return dram.pinned.size() + ssd.held.size();
    }

    /** Discovery of local evidence; keys being written are reported beside it (not replicas yet). */
    public EvidenceSource evidence() {
        return demand -> {
            List<StateKey> keys = new ArrayList<>();
            for (DemandView.GroupKeys group : demand.groups()) {
                for (PositionedKey pk : group.keys()) {
                    keys.add(pk.key());
                }
            }
            return storage.discover(keys).map(LocalOwners::evidenceOf);
        };
    }

    static DemandEvidence evidenceOf(List<KeyEvidence> found) {
        HashMap<StateKey, ReplicaSet> byKey = HashMap.newHashMap(found.size());
        Set<StateKey> writing = Set.of();
        for (KeyEvidence ev : found) {
            ReplicaEvidence.LocalDram dram = ev.dramGeneration() < 0 ? null : new ReplicaEvidence.LocalDram(
                    ev.dramGeneration(), ev.residencySequence(), ByteCount.of(ev.dramBytes()));
            ReplicaEvidence.LocalSsd ssd = ev.ssdGeneration() < 0 ? null : new ReplicaEvidence.LocalSsd(
                    ev.ssdGeneration(), ByteCount.of(ev.ssdBytes()));
            ReplicaSet set = ReplicaSet.local(dram, ssd);
            if (!set.isEmpty()) {
                byKey.put(ev.key(), set);
            }
            if (ev.writing()) {
                if (writing.isEmpty()) {
                    writing = new HashSet<>();
                }
                writing.add(ev.key());
            }
        }
        return DemandEvidence.adopt(byKey).withWriting(writing);
    }

    private static List<KeyGeneration> generations(PlannedSegment segment) {
        List<KeyGeneration> pages = new ArrayList<>(segment.pages().size());
        for (PlannedPage page : segment.pages()) {
            long generation = switch (page.evidence()) {
                case ReplicaEvidence.LocalDram d -> d.slotGeneration();
                case ReplicaEvidence.LocalSsd s -> s.extentGeneration();
                default -> throw new PlanningException(PlanningFailure.INVALID_INPUT, "a local owner was handed "
                        + page.evidence().medium() + " evidence");
            };
            pages.add(new KeyGeneration(page.key(), generation));
        }
        return pages;
    }

    private static PlannedPage pageOf(PlannedSegment segment, StateKey key) {
        for (PlannedPage page : segment.pages()) {
            if (page.key().equals(key)) {
                return page;
            }
        }
        return null;
    }

    /** Local DRAM: exact-generation pins; the lease is host-ready at acquisition (nothing moves). */
    private final class DramOwner implements ExecutionOwner {
        private final Map<Long, List<ImageRef>> pinned = new LinkedHashMap<>();

        @Override
        public Future<SegmentLease> acquire(PlannedSegment segment) {
            return storage.pinGenerations(generations(segment)).compose(pin -> {
                if (!pin.complete()) {
                    return Future.failedFuture(new PlanningException(PlanningFailure.STALE_EVIDENCE,
                            "a DRAM page was evicted or replaced since discovery", pageOf(segment, pin.missing())));
                }
                List<ImageRef> refs = pin.pinned().getFirst();
                long id = nextLease++;
                pinned.put(id, refs);
                return Future.succeededFuture(new SegmentLease(id, segment, refs));
            });
        }

        @Override
        public Future<SegmentLease> submit(SegmentLease lease) {
            // An engine-restore target would move these pages; only the restore role can, and it is not here.
            return Future.failedFuture(new PlanningException(PlanningFailure.TRANSFER_FAILED,
                    "local DRAM pages move only to engine memory, through the restore role"));
        }

        @Override
        public Future<Boolean> release(SegmentLease lease) {
            return release(lease, false);
        }

        @Override
        public Future<Boolean> release(SegmentLease lease, boolean quarantine) {
            List<ImageRef> refs = pinned.remove(lease.leaseId());
            if (refs == null) {
                return Future.succeededFuture(false);
            }
            return storage.unpin(refs, quarantine).map(n -> true);
        }
    }

    /** Host materialization from local SSD: slots + extent leases, then read + seal + pin in one step. */
    private final class SsdOwner implements ExecutionOwner {
        /** Lease id → the storage hold (before the read) or the pinned pages (after a successful read). */
        private final Map<Long, Held> held = new LinkedHashMap<>();

        private static final class Held {
            final long hold;
            boolean submitted;
            List<ImageRef> pinned;

            Held(long hold) {
                this.hold = hold;
            }
        }

        @Override
        public Future<SegmentLease> acquire(PlannedSegment segment) {
            return storage.acquireFromSsd(generations(segment)).compose(acquired -> {
                if (acquired.hold() <= 0) {
                    return Future.failedFuture(acquired.staleKey() != null
                            ? new PlanningException(PlanningFailure.STALE_EVIDENCE,
                            "an SSD extent changed, or its key is in DRAM now, since discovery",
                            pageOf(segment, acquired.staleKey()))
                            : new PlanningException(PlanningFailure.SOURCE_REJECTED,
                            "the pool has no room for the pages read back from SSD"));
                }
                long hold = acquired.hold();
                long id = nextLease++;
                held.put(id, new Held(hold));
                return Future.succeededFuture(new SegmentLease(id, segment, List.of()));
            });
        }

        @Override
        public Future<SegmentLease> submit(SegmentLease lease) {
            Held h = held.get(lease.leaseId());
            if (h == null || h.submitted) {
                return Future.failedFuture(new PlanningException(PlanningFailure.INVALID_INPUT,
                        "submit of an unknown or already submitted SSD lease"));
            }
            h.submitted = true;
            return storage.readFromSsd(h.hold).map(refs -> {
                h.pinned = refs;
                return lease.withHostPages(refs);
            });
        }

        @Override
        public Future<Boolean> release(SegmentLease lease) {
            return release(lease, false);
        }

        @Override
        public Future<Boolean> release(SegmentLease lease, boolean quarantine) {
            Held h = held.remove(lease.leaseId());
            if (h == null) {
                return Future.succeededFuture(false);
            }
            if (!h.submitted) {
                return storage.releaseSsdHold(h.hold);
            }
            // A failed read left nothing pinned (the storage role unpinned and freed it); a good one left the pins.
            return h.pinned == null ? Future.succeededFuture(true) : storage.unpin(h.pinned, quarantine).map(n -> true);
        }
    }
}
