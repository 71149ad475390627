package io.orbitkv.planning;

import io.vertx.core.Future;
import io.orbitkv.model.plan.PreparationResult;

/**
 * The planning role's commands as admission uses them: implemented by its typed proxy (the Manager) and by its
 * handlers (called directly in tests), so admission is written once against either. Futures complete on the caller's
 * event loop.
 */
public interface PlanningPort {

    /** Prepares a demand; see {@link PlanningCommands.Prepare}. */
    Future<PreparationResult> prepare(PlanningCommands.Prepare command);

    /** Revokes interest in a preparation; see {@link PlanningCommands.Cancel}. */
    Future<Integer> cancel(long id, boolean quarantine);

    /** Ends what a preparation holds once; see {@link PlanningCommands.Release}. */
    Future<Integer> release(long id, boolean quarantine);
}
