package io.orbitkv.planning;

import io.orbitkv.model.ImageRef;
import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.model.plan.EngineDestination;
import io.orbitkv.model.plan.Plan;
import io.orbitkv.model.plan.PlannedSegment;
import io.orbitkv.model.plan.PlanningException;
import io.orbitkv.model.plan.PlanningFailure;
import io.orbitkv.model.plan.Restored;
import io.orbitkv.model.plan.SegmentLease;
import io.orbitkv.restore.RestoreCommands;
import io.vertx.core.Future;
import java.util.ArrayList;
import java.util.List;

/**
 * A plan whose segments all reached host-ready, holding every segment's lease until {@link #release}. An
 * engine-restore plan's last step, the device copy, runs from here ({@link #restore}): its sources stay leased
 * until every copy is terminal, so a release asked meanwhile happens only then. Made by {@link PlanExecutor}; confined
 * to the planning role's loop.
 */
final class PreparedPlan {
    /** Ends one segment lease with its owner (the executor's release, which keeps its lease count). */
    @FunctionalInterface
    interface LeaseRelease {
        Future<Boolean> release(SegmentLease lease, boolean quarantine);
    }

    private final Plan plan;
    private final List<SegmentLease> leases;
    private final RestoreOwner restoreOwner;
    private final LeaseRelease owners;
    private boolean released;
    private EngineDestination destination;
    private Future<Restored> restoring;

    PreparedPlan(Plan plan, List<SegmentLease> leases, RestoreOwner restoreOwner, LeaseRelease owners) {
        this.plan = plan;
        this.leases = List.copyOf(leases);
        this.restoreOwner = restoreOwner;
        this.owners = owners;
    }

    public Plan plan() {
        return plan;
    }

    /** One lease per segment, in plan order. */
    public List<SegmentLease> leases() {
        return leases;
    }

    /** Ends every lease once; completes with how many leases this call released (0 on a repeated call). */
    public Future<Integer> release() {
        return release(false);
    }

    /**
     * The engine-restore plan's device copy: the restore owner copies every host page into {@code destination};
     * completes when every copy is terminal. Once per prepared plan.
     */
    public Future<Restored> restore(EngineDestination destination) {
        if (plan.target().intent() != CompletionTarget.Intent.ENGINE_RESTORE) {
            return Future.failedFuture(new PlanningException(PlanningFailure.INVALID_INPUT,
                    "a " + plan.target().intent() + " plan has no device copy"));
        }
        if (released || restoring != null) {
            return Future.failedFuture(new PlanningException(PlanningFailure.INVALID_INPUT,
                    released ? "the prepared plan was released" : "the device copy already ran"));
        }
        List<RestoreCommands.SourcePage> sources = new ArrayList<>();
        for (SegmentLease lease : leases) {
            PlannedSegment segment = lease.segment();
            for (int i = 0; i < segment.pages().size(); i++) {
                ImageRef ref = lease.hostPages().get(i);
                sources.add(new RestoreCommands.SourcePage(segment.groupId(), segment.pages().get(i).position(),
                        ref.offset(), ref.lengthBytes()));
            }
        }
        this.destination = destination;
        try {
            restoring = restoreOwner.restore(destination, sources);
        } catch (RuntimeException e) {
            restoring = Future.failedFuture(e);
        }
        return restoring;
    }

    /** A hint that nobody wants the device copy: queued copies are dropped, submitted ones drain. */
    public void cancelRestore() {
        if (restoring != null && !restoring.isComplete()) {
            restoreOwner.cancel(destination);
        }
    }

    /** {@link #release()}; {@code quarantine}: the engine holding the pages lost its session (see the owners). */
    public Future<Integer> release(boolean quarantine) {
        if (released) {
            return Future.succeededFuture(0);
        }
        released = true;
        if (restoring != null && !restoring.isComplete()) {
            // The copies read these pages: they are released once every copy is terminal.
            return restoring.transform(ar -> releaseLeases(quarantine));
        }
        return releaseLeases(quarantine);
    }

    private Future<Integer> releaseLeases(boolean quarantine) {
        List<Future<Boolean>> releases = new ArrayList<>();
        for (SegmentLease lease : leases) {
            releases.add(owners.release(lease, quarantine));
        }
        return Future.join(releases).map(v -> releases.size());
    }
}
