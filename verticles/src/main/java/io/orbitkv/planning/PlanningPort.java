package io.orbitkv.planning;

import io.orbitkv.restore.RestoreCommands;
import io.vertx.core.Future;

/**
 * The planning role's commands as admission uses them: implemented by its typed proxy (the Manager) and by its
 * handlers (called directly in tests), so admission is written once against either. Plans hold nothing; an execution
 * holds its leases under the caller's id until released (see {@link PlanningHandlers}). Futures complete on the
 * caller's event loop.
 */
public interface PlanningPort {

    /** Discovery and a plan; holds nothing. */
    Future<PlanningRole.Planned> plan(DemandView demand);

    /** Acquires and prepares {@code plan} under {@code id}; see {@link PlanningCommands.Execute}. */
    Future<PlanningCommands.PreparedPlan> execute(long id, DemandView demand, Plan plan);

    /**
     * Completes true once execution {@code id} holds every segment's lease and before any of its transfers is
     * submitted (a peer plan: the source leases are granted), false when it stopped first or is not running.
     */
    Future<Boolean> acquired(long id);

    /** Ends a prepared plan's leases once; answers how many leases this call ended (0 when already ended). */
    Future<Integer> release(long id, boolean quarantine);

    /** A real demand took over speculative execution {@code id}: its transfers become demand reads. */
    Future<Boolean> promote(long id);

    /** Revokes interest in execution {@code id}: queued transfers are dropped, submitted ones drain. */
    Future<Boolean> cancel(long id);

    /** The device copy of prepared engine-restore plan {@code id}; completes when every copy is terminal. */
    Future<RestoreCommands.Restored> finish(long id, EngineDestination destination);

    /** A hint that nobody wants prepared plan {@code id}'s device copy. */
    Future<Boolean> cancelFinish(long id);
}
