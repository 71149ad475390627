package io.orbitkv.planning;

import io.orbitkv.model.StateKey;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Predicate;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.PositionedKey;
import io.orbitkv.model.plan.DemandView;
import io.orbitkv.model.plan.PlanningException;
import io.orbitkv.model.plan.PlanningFailure;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.model.plan.ByteCount;
import io.orbitkv.model.plan.DemandEvidence;
import io.orbitkv.model.plan.EvidenceSource;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.model.plan.ReplicaEvidence;
import io.orbitkv.model.plan.ReplicaSet;
import io.orbitkv.model.plan.ExecutionOwner;
import io.orbitkv.model.plan.PlannedPage;
import io.orbitkv.model.plan.PlannedSegment;
import io.orbitkv.model.plan.SegmentLease;
import io.orbitkv.model.plan.Medium;

/**
 * A real in-memory execution owner for every route template, and the discovery over the same state: which keys are in
 * "DRAM" (with slot generations and pins), on "SSD" (extent generations) and at peers (owner generations). Acquisition
 * revalidates evidence exactly against that state, as the storage, SSD and peer owners do; every lease it grants is
 * recorded so tests can check that nothing is left behind and nothing outside a plan was leased.
 */
final class InMemoryReplicas implements ExecutionOwner {
    final Map<StateKey, Long> dram = new HashMap<>();
    final Map<StateKey, Integer> pins = new HashMap<>();
    final Map<StateKey, Long> ssd = new HashMap<>();
    final Map<PeerOwner, Map<StateKey, Long>> peerDram = new HashMap<>();
    final Map<PeerOwner, Map<StateKey, Long>> peerSsd = new HashMap<>();

    /** Leases granted and not released, by id. */
    final Map<Long, PlannedSegment> active = new LinkedHashMap<>();
    /** Every segment ever granted a lease, in order. */
    final List<PlannedSegment> granted = new ArrayList<>();
    /** Contract breaches seen (a release during a submit, a submit of an unknown lease, ...). */
    final List<String> violations = new ArrayList<>();

    Predicate<PlannedSegment> rejectAcquire = segment -> false;
    Predicate<PlannedSegment> failSubmit = segment -> false;
    /** When set, submissions wait in {@link #held} until the test completes them. */
    boolean holdSubmissions;
    final Deque<Runnable> held = new ArrayDeque<>();
    final Set<Long> submitting = new HashSet<>();
    int acquires;
    int submits;
    int cancelHints;

    private long nextGeneration = 100;
    private long nextLease = 1;

    long putDram(StateKey key) {
        long generation = nextGeneration++;
        dram.put(key, generation);
        return generation;
    }

    void evictDram(StateKey key) {
        if (pins.getOrDefault(key, 0) > 0) {
            throw new IllegalStateException("a pinned page cannot be evicted");
        }
        dram.remove(key);
    }

    long putSsd(StateKey key) {
        long generation = nextGeneration++;
        ssd.put(key, generation);
        return generation;
    }

    long putPeer(Medium medium, PeerOwner owner, StateKey key) {
        long generation = nextGeneration++;
        (medium == Medium.PEER_DRAM ? peerDram : peerSsd).computeIfAbsent(owner, o -> new HashMap<>())
                .put(key, generation);
        return generation;
    }

    /** Discovery over the current state: metadata only. */
    EvidenceSource evidence() {
        return demand -> Future.succeededFuture(discover(demand));
    }

    DemandEvidence discover(DemandView demand) {
        Map<StateKey, ReplicaSet> sets = new HashMap<>();
        for (DemandView.GroupKeys group : demand.groups()) {
            for (PositionedKey pk : group.keys()) {
                StateKey key = pk.key();
                Long d = dram.get(key);
                Long s = ssd.get(key);
                ReplicaSet set = ReplicaSet.local(d == null ? null : new ReplicaEvidence.LocalDram(d, d,
                                ByteCount.of(group.bytesPerPage())),
                        s == null ? null : new ReplicaEvidence.LocalSsd(s, ByteCount.of(group.bytesPerPage())));
                for (var owner : peerDram.entrySet()) {
                    Long g = owner.getValue().get(key);
                    if (g != null) {
                        set = set.withPeer(new ReplicaEvidence.PeerDram(owner.getKey(), g, g, ByteCount.UNKNOWN,
                                java.util.Optional.of(io.orbitkv.model.cost.RepresentationFamily.RAW)));
                    }
                }
                for (var owner : peerSsd.entrySet()) {
                    Long g = owner.getValue().get(key);
                    if (g != null) {
                        set = set.withPeer(new ReplicaEvidence.PeerSsd(owner.getKey(), g, g, ByteCount.UNKNOWN,
                                java.util.Optional.of(io.orbitkv.model.cost.RepresentationFamily.RAW)));
                    }
                }
                sets.put(key, set);
            }
        }
        return DemandEvidence.of(sets);
    }

    private boolean current(StateKey key, ReplicaEvidence evidence) {
        return switch (evidence) {
            case ReplicaEvidence.LocalDram d -> Long.valueOf(d.slotGeneration()).equals(dram.get(key));
            case ReplicaEvidence.LocalSsd s -> Long.valueOf(s.extentGeneration()).equals(ssd.get(key));
            case ReplicaEvidence.PeerDram p ->
                    Long.valueOf(p.ownerGeneration()).equals(peerDram.getOrDefault(p.owner(), Map.of()).get(key));
            case ReplicaEvidence.PeerSsd p ->
                    Long.valueOf(p.ownerGeneration()).equals(peerSsd.getOrDefault(p.owner(), Map.of()).get(key));
        };
    }

    @Override
    public Future<SegmentLease> acquire(PlannedSegment segment) {
        acquires++;
        if (rejectAcquire.test(segment)) {
            return Future.failedFuture(new PlanningException(PlanningFailure.SOURCE_REJECTED, "admission refused"));
        }
        for (PlannedPage page : segment.pages()) {
            if (!current(page.key(), page.evidence())) {
                return Future.failedFuture(new PlanningException(PlanningFailure.STALE_EVIDENCE,
                        "page " + page.position() + " changed since discovery", page));
            }
        }
        long id = nextLease++;
        active.put(id, segment);
        granted.add(segment);
        List<ImageRef> hostPages = List.of();
        if (segment.route() == RouteTemplate.LOCAL_DRAM) {
            hostPages = pinAll(segment);
        }
        return Future.succeededFuture(new SegmentLease(id, segment, hostPages));
    }

    private List<ImageRef> pinAll(PlannedSegment segment) {
        List<ImageRef> refs = new ArrayList<>();
        for (PlannedPage page : segment.pages()) {
            pins.merge(page.key(), 1, Integer::sum);
            refs.add(new ImageRef(page.key(), 0, segment.bytes() / segment.pages().size(),
                    dram.get(page.key())));
        }
        return refs;
    }

    @Override
    public Future<SegmentLease> submit(SegmentLease lease) {
        submits++;
        if (!active.containsKey(lease.leaseId())) {
            violations.add("submit of lease " + lease.leaseId() + " that is not held");
        }
        if (!submitting.add(lease.leaseId())) {
            violations.add("lease " + lease.leaseId() + " submitted twice");
        }
        Promise<SegmentLease> done = Promise.promise();
        Runnable finish = () -> {
            submitting.remove(lease.leaseId());
            if (failSubmit.test(lease.segment())) {
                done.fail(new PlanningException(PlanningFailure.TRANSFER_FAILED, "injected I/O error"));
                return;
            }
            for (PlannedPage page : lease.segment().pages()) {
                if (!dram.containsKey(page.key())) {
                    putDram(page.key());
                }
            }
            done.complete(lease.withHostPages(pinAll(lease.segment())));
        };
        if (holdSubmissions) {
            held.add(finish);
        } else {
            finish.run();
        }
        return done.future();
    }

    @Override
    public void cancel(SegmentLease lease) {
        cancelHints++;
    }

    @Override
    public Future<Boolean> release(SegmentLease lease) {
        if (submitting.contains(lease.leaseId())) {
            violations.add("release of lease " + lease.leaseId() + " while its submission runs");
        }
        if (active.remove(lease.leaseId()) == null) {
            return Future.succeededFuture(false);
        }
        for (ImageRef ref : lease.hostPages()) {
            int left = pins.merge(ref.key(), -1, Integer::sum);
            if (left < 0) {
                violations.add("unpinned below zero");
            }
            if (left == 0) {
                pins.remove(ref.key());
            }
        }
        return Future.succeededFuture(true);
    }

    /** Completes every held submission, in order. */
    void completeHeld() {
        while (!held.isEmpty()) {
            held.poll().run();
        }
    }

    int pinnedKeys() {
        return pins.size();
    }
}
