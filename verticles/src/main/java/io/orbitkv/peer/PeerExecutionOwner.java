package io.orbitkv.peer;

import io.orbitkv.model.plan.AttemptWindow;
import io.orbitkv.model.plan.ExecutionOwner;
import io.orbitkv.model.plan.PlannedPage;
import io.orbitkv.model.plan.PlannedSegment;
import io.orbitkv.model.plan.PlanningException;
import io.orbitkv.model.plan.PlanningFailure;
import io.orbitkv.model.plan.ReplicaEvidence;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.model.plan.SegmentLease;
import io.orbitkv.protocol.peer.PeerRejection;
import io.orbitkv.model.StateKey;
import io.orbitkv.storage.StorageProxy;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import io.orbitkv.model.ImageRef;

/**
 * The planner's port for the peer routes {@link RouteTemplate#HOST_FROM_PEER_DRAM} and
 * {@link RouteTemplate#HOST_FROM_PEER_SSD}, backed by the peer role: acquire = the source lease (exact generations from
 * the segment's peer evidence: DRAM slot generations, or, for peer SSD evidence, the owner's committed extent
 * generations, flagged so that the source stages those pages from its SSD into bounded staging before it grants) and
 * the local slots; submit = transfer, then the CRC32C-verified seal and a local pin in one storage step, so the host
 * pages stay resident for the lease; release = the pin, or (never submitted) the slots and the source lease (whose end
 * also frees the source's staging).
 *
 * <p>Design note (ownership): this object owns one entry per granted lease until its release; a submit that failed
 * has already fenced its transfer and freed its slots (the peer role's contract), so release then only forgets it.
 * It reaches the peer role through {@link PeerProxy}, whose answers complete on the caller's context (the planning
 * role's loop). The Manager registers it with the planning role for both peer templates when the peer role runs.
 *
 * <p>Design note (time): each acquisition bounds its attempt, reserve to READY, by {@link PeerAttemptPolicy}: what the
 * demand has left of its waiting budget ({@link AttemptWindow}) less a reserve for the fallback, the planner's
 * estimate times a margin, the configured ceiling, the source's longest lease. A stalled (e.g. SIGSTOPped) source
 * thus ends the segment early enough that, fenced, it can be replanned onto another medium within the same budget.
 * A demand whose budget is already spent is refused before anything is asked of the source.
 */
public final class PeerExecutionOwner implements ExecutionOwner {
    private enum State { ACQUIRED, SUBMITTING, SUBMITTED, FAILED }

    private static final class Held {
        final PeerCommands.Acquired acquired;
        State state = State.ACQUIRED;
        List<ImageRef> pinned = List.of();

        Held(PeerCommands.Acquired acquired) {
            this.acquired = acquired;
        }
    }

    private final PeerProxy peer;
    private final StorageProxy storage;
    private final AtomicLong nextLease = new AtomicLong(1);
    private final Map<Long, Held> held = new ConcurrentHashMap<>();

    private final long budgetMillis;
    private final long leaseMillis;
    private final PeerAttemptPolicy policy;

    /** With the peer role's longest lease as the default budget of each acquired segment. */
    public PeerExecutionOwner(Vertx vertx, PeerSettings settings) {
        this(vertx, settings, Duration.ofMillis(settings.maxLeaseMillis()), PeerAttemptPolicy.DEFAULT);
    }

    /**
     * @param budget the default budget of a segment's whole fetch, from its acquisition to READY (source lease, local
     *               slots, transfer, checksum-verified seal), for a caller whose demand names no waiting budget;
     *               capped by the peer role's longest lease ({@code settings})
     * @param policy how each attempt is bounded within the demand's remaining waiting budget
     */
    public PeerExecutionOwner(Vertx vertx, PeerSettings settings, Duration budget, PeerAttemptPolicy policy) {
        this.peer = new PeerProxy(vertx);
        this.storage = new StorageProxy(vertx);
        this.leaseMillis = settings.maxLeaseMillis();
        this.budgetMillis = Math.max(1, Math.min(budget.toMillis(), leaseMillis));
        this.policy = policy;
    }

    @Override
    public Future<SegmentLease> acquire(PlannedSegment segment) {
        return acquire(segment, AttemptWindow.UNBOUNDED);
    }

    @Override
    public Future<SegmentLease> acquire(PlannedSegment segment, AttemptWindow window) {
        if (!segment.route().medium().isPeer() || segment.owner().isEmpty()) {
            return Future.failedFuture(new PlanningException(PlanningFailure.REQUESTED_ROUTE_UNAVAILABLE,
                    "the peer role executes HOST_FROM_PEER_DRAM and HOST_FROM_PEER_SSD only"));
        }
        List<StateKey> keys = new ArrayList<>();
        List<Long> generations = new ArrayList<>();
        List<Boolean> fromSsd = new ArrayList<>();
        for (PlannedPage page : segment.pages()) {
            keys.add(page.key());
            switch (page.evidence()) {
                case ReplicaEvidence.PeerDram dram -> {
                    generations.add(dram.ownerGeneration());
                    fromSsd.add(false);
                }
                case ReplicaEvidence.PeerSsd ssd -> {
                    generations.add(ssd.ownerGeneration());
                    fromSsd.add(true);
                }
                default -> {
                    return Future.failedFuture(new PlanningException(PlanningFailure.INVALID_INPUT,
                            "a peer segment holds " + page.evidence().medium() + " evidence"));
                }
            }
        }
        long attempt = policy.attemptNanos(window.remainingNanos(), window.expected(),
                TimeUnit.MILLISECONDS.toNanos(window.bounded() ? leaseMillis : budgetMillis));
        if (attempt <= 0) {
            // Nothing asked of the source; no page named, so the owner is not avoided for it.
            return Future.failedFuture(new PlanningException(PlanningFailure.SOURCE_REJECTED,
                    "the demand's waiting budget is spent: no peer attempt starts"));
        }
        return peer.acquire(new PeerCommands.Pages(segment.owner().get(), keys.getFirst().namespace(), keys,
                generations, fromSsd, Duration.ofNanos(attempt))).transform(ar -> {
                    if (ar.succeeded()) {
                        long id = nextLease.getAndIncrement();
                        held.put(id, new Held(ar.result()));
                        return Future.succeededFuture(new SegmentLease(id, segment, List.of()));
                    }
                    return Future.failedFuture(translate(ar.cause(), segment));
                });
    }

    private static Throwable translate(Throwable cause, PlannedSegment segment) {
        if (cause instanceof PeerException e) {
            boolean stale = e.rejection() == PeerRejection.STALE_INCARNATION
                    || e.rejection() == PeerRejection.CHANGED_GENERATION || e.rejection() == PeerRejection.UNKNOWN_NAMESPACE;
            // Every failure names the segment's first page: its evidence names the owner the planner avoids next.
            if (e.beforePayload()) {
                return stale ? new PlanningException(PlanningFailure.STALE_EVIDENCE, e.getMessage(), segment.pages().getFirst())
                        : new PlanningException(PlanningFailure.SOURCE_REJECTED, e.getMessage(), segment.pages().getFirst());
            }
            return new PlanningException(PlanningFailure.TRANSFER_FAILED, e.getMessage(), segment.pages().getFirst());
        }
        return new PlanningException(PlanningFailure.SOURCE_REJECTED, String.valueOf(cause.getMessage()),
                segment.pages().getFirst());
    }

    @Override
    public Future<SegmentLease> submit(SegmentLease lease) {
        Held h = held.get(lease.leaseId());
        if (h == null || h.state != State.ACQUIRED) {
            return Future.failedFuture(new IllegalStateException("lease " + lease.leaseId() + " is not acquired"));
        }
        h.state = State.SUBMITTING;
        return peer.submit(h.acquired, true)
                .map(fetched -> {
                    h.pinned = fetched.pinned();
                    return lease.withHostPages(fetched.pinned());
                })
                .transform(ar -> {
                    h.state = ar.succeeded() ? State.SUBMITTED : State.FAILED;
                    return ar.succeeded() ? Future.succeededFuture(ar.result())
                            : Future.failedFuture(new PlanningException(PlanningFailure.TRANSFER_FAILED,
                                    String.valueOf(ar.cause().getMessage()), lease.segment().pages().getFirst()));
                });
    }

    @Override
    public Future<Boolean> release(SegmentLease lease) {
        Held h = held.remove(lease.leaseId());
        if (h == null) {
            return Future.succeededFuture(false);
        }
        Future<?> ended = switch (h.state) {
            case ACQUIRED -> peer.abandon(h.acquired);
            case SUBMITTED -> h.pinned.isEmpty() ? Future.succeededFuture() : storage.unpin(List.of(h.pinned));
            case FAILED, SUBMITTING -> Future.succeededFuture();
        };
        return ended.transform(ar -> Future.succeededFuture(true));
    }

    /** Leases granted and not yet released (tests). */
    public int held() {
        return held.size();
    }
}
