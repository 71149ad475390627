package io.orbitkv.peer;

import io.orbitkv.planning.ExecutionOwner;
import io.orbitkv.planning.PlannedPage;
import io.orbitkv.planning.PlannedSegment;
import io.orbitkv.planning.PlanningException;
import io.orbitkv.planning.PlanningFailure;
import io.orbitkv.planning.ReplicaEvidence;
import io.orbitkv.planning.RouteTemplate;
import io.orbitkv.planning.SegmentLease;
import io.orbitkv.protocol.peer.PeerRejection;
import io.orbitkv.storage.ImageStore;
import io.orbitkv.storage.StateKey;
import io.orbitkv.storage.StorageProxy;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The planner's port for {@link RouteTemplate#HOST_FROM_PEER_DRAM}, backed by the peer role: acquire = the source lease
 * (exact generations from the segment's peer evidence) and the local slots; submit = transfer, CRC32C-verified seal,
 * then a local pin so the host pages stay resident for the lease; release = the pin, or (never submitted) the slots and
 * the source lease.
 *
 * <p>Design note (ownership): this object owns one entry per granted lease until its release; a submit that failed
 * has already fenced its transfer and freed its slots (the peer role's contract), so release then only forgets it.
 * Futures complete on the caller's context (the planning role's loop). Not yet called by admission: the planning
 * branch wires execution owners per route template (left in the notes).
 */
public final class PeerExecutionOwner implements ExecutionOwner {
    private enum State { ACQUIRED, SUBMITTING, SUBMITTED, FAILED }

    private static final class Held {
        final PeerVerticle.Acquired acquired;
        State state = State.ACQUIRED;
        List<List<ImageStore.ImageRef>> pinned = List.of();

        Held(PeerVerticle.Acquired acquired) {
            this.acquired = acquired;
        }
    }

    private final PeerVerticle peer;
    private final StorageProxy storage;
    private final AtomicLong nextLease = new AtomicLong(1);
    private final Map<Long, Held> held = new ConcurrentHashMap<>();

    public PeerExecutionOwner(Vertx vertx, PeerVerticle peer) {
        this.peer = peer;
        this.storage = new StorageProxy(vertx);
    }

    private static <T> Future<T> onCaller(Future<T> future) {
        Context caller = Vertx.currentContext();
        if (caller == null) {
            return future;
        }
        Promise<T> p = Promise.promise();
        future.onComplete(ar -> caller.runOnContext(v -> p.handle(ar)));
        return p.future();
    }

    @Override
    public Future<SegmentLease> acquire(PlannedSegment segment) {
        if (segment.route() != RouteTemplate.HOST_FROM_PEER_DRAM || segment.owner().isEmpty()) {
            return Future.failedFuture(new PlanningException(PlanningFailure.REQUESTED_ROUTE_UNAVAILABLE,
                    "the peer role executes HOST_FROM_PEER_DRAM only"));
        }
        List<StateKey> keys = new ArrayList<>();
        List<Long> generations = new ArrayList<>();
        for (PlannedPage page : segment.pages()) {
            keys.add(page.key());
            generations.add(((ReplicaEvidence.PeerDram) page.evidence()).ownerGeneration());
        }
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(peer.leaseMillis());
        Future<SegmentLease> lease = peer.acquire(segment.owner().get(), keys.getFirst().namespace(), keys, generations,
                deadline).transform(ar -> {
                    if (ar.succeeded()) {
                        long id = nextLease.getAndIncrement();
                        held.put(id, new Held(ar.result()));
                        return Future.succeededFuture(new SegmentLease(id, segment, List.of()));
                    }
                    return Future.failedFuture(translate(ar.cause(), segment));
                });
        return onCaller(lease);
    }

    private static Throwable translate(Throwable cause, PlannedSegment segment) {
        if (cause instanceof PeerException e) {
            boolean stale = e.rejection() == PeerRejection.STALE_INCARNATION
                    || e.rejection() == PeerRejection.CHANGED_GENERATION || e.rejection() == PeerRejection.UNKNOWN_NAMESPACE;
            if (e.beforePayload()) {
                return stale ? new PlanningException(PlanningFailure.STALE_EVIDENCE, e.getMessage(), segment.pages().getFirst())
                        : new PlanningException(PlanningFailure.SOURCE_REJECTED, e.getMessage());
            }
            return new PlanningException(PlanningFailure.TRANSFER_FAILED, e.getMessage());
        }
        return new PlanningException(PlanningFailure.SOURCE_REJECTED, String.valueOf(cause.getMessage()));
    }

    @Override
    public Future<SegmentLease> submit(SegmentLease lease) {
        Held h = held.get(lease.leaseId());
        if (h == null || h.state != State.ACQUIRED) {
            return Future.failedFuture(new IllegalStateException("lease " + lease.leaseId() + " is not acquired"));
        }
        h.state = State.SUBMITTING;
        Future<SegmentLease> done = peer.submit(h.acquired)
                .compose(fetched -> storage.pinExact(List.of(h.acquired.keys())).compose(pin -> {
                    if (!pin.complete()) {
                        return Future.failedFuture(new PeerException(PeerException.Kind.TRANSFER_FAILED,
                                "a fetched page left the pool before it was pinned"));
                    }
                    h.pinned = pin.pinned();
                    return Future.succeededFuture(lease.withHostPages(pin.pinned().getFirst()));
                }))
                .transform(ar -> {
                    h.state = ar.succeeded() ? State.SUBMITTED : State.FAILED;
                    return ar.succeeded() ? Future.succeededFuture(ar.result())
                            : Future.failedFuture(new PlanningException(PlanningFailure.TRANSFER_FAILED,
                                    String.valueOf(ar.cause().getMessage())));
                });
        return onCaller(done);
    }

    @Override
    public Future<Boolean> release(SegmentLease lease) {
        Held h = held.remove(lease.leaseId());
        if (h == null) {
            return Future.succeededFuture(false);
        }
        Future<?> ended = switch (h.state) {
            case ACQUIRED -> peer.abandon(h.acquired);
            case SUBMITTED -> h.pinned.isEmpty() ? Future.succeededFuture() : storage.unpin(h.pinned);
            case FAILED, SUBMITTING -> Future.succeededFuture();
        };
        return onCaller(ended.transform(ar -> Future.succeededFuture(true)));
    }

    /** Leases granted and not yet released (tests). */
    public int held() {
        return held.size();
    }
}
