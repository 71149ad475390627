package io.orbitkv.model.plan;

import io.vertx.core.Future;
import io.orbitkv.model.plan.AttemptWindow;
import io.orbitkv.model.plan.PlannedSegment;
import io.orbitkv.model.plan.SegmentLease;

/**
 * The port an execution owner implements for the route templates it executes: storage for {@link
 * RouteTemplate#LOCAL_DRAM} (pins) and, with the SSD role, {@link RouteTemplate#HOST_FROM_LOCAL_SSD} (a pool slot
 * credit plus an exact-generation extent lease, then an io_uring read); later the peer role for the peer templates and
 * the restore role for {@link RouteTemplate#LOCAL_SSD_URING}. The device copy of an engine-restore plan is its prepared
 * plan's last step, owned by the restore role ({@link RestoreOwner}). Futures complete on the planning role's event
 * loop (an owner on another loop hops back, as the typed role proxies do).
 *
 * <p>Contract (see {@link Planner}'s design note):
 * <ul>
 *   <li>{@link #acquire}: revalidate every page's evidence exactly, take the source leases and destination credits,
 *       all or nothing, moving no payload. Fails {@link PlanningFailure#STALE_EVIDENCE} (naming the page) or
 *       {@link PlanningFailure#SOURCE_REJECTED}, and then holds nothing.</li>
 *   <li>{@link #submit}: move the payload. The future completes only when every I/O it started is terminal, whether
 *       it succeeded, failed or was cancelled; until then the owner keeps the sources, destinations and buffers. On
 *       success the lease carries the host pages (host-ready). Failure is {@link PlanningFailure#TRANSFER_FAILED};
 *       the lease must still be released.</li>
 *   <li>{@link #cancel}: a hint that nobody wants the result; queued I/O may be dropped, submitted I/O runs to its
 *       completion, and {@link #submit}'s future still completes only then.</li>
 *   <li>{@link #release}: end everything the lease holds; idempotent (a second release answers false); never fails for
 *       a lease this owner granted. Never called while a submit of the lease is incomplete.</li>
 * </ul>
 */
public interface ExecutionOwner {

    Future<SegmentLease> acquire(PlannedSegment segment);

    /**
     * {@link #acquire} within {@code window}: what is left of the demand's waiting budget and the plan's expected time.
     * An owner whose submitted work can hang on another host bounds that work with it, so that when it times out (and
     * is fenced) a fallback route still fits in the same budget; the default ignores it.
     */
    default Future<SegmentLease> acquire(PlannedSegment segment, AttemptWindow window) {
        return acquire(segment);
    }

    Future<SegmentLease> submit(SegmentLease lease);

    default void cancel(SegmentLease lease) {
    }

    Future<Boolean> release(SegmentLease lease);

    /**
     * {@link #release} for a holder whose session ended: an owner whose lease lent memory to an engine (host-ready
     * pool pages) holds that memory out of reuse for the quarantine time first. Owners lending nothing ignore it.
     */
    default Future<Boolean> release(SegmentLease lease, boolean quarantine) {
        return release(lease);
    }
}
