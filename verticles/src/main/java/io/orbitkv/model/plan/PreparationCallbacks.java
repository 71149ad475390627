package io.orbitkv.model.plan;

import io.vertx.core.Future;
import java.util.List;
import io.orbitkv.model.plan.Plan;
import io.orbitkv.model.plan.PreparationResult;

/**
 * Admission's side of one demand's preparation: planning asks it to admit each plan's bytes before acquiring anything,
 * and tells it how far preparation got. Planning calls these on its own loop; the implementation hops to admission's.
 */
public interface PreparationCallbacks {

    /** How far a payload-moving plan got: its sources are being leased, or every lease is held. */
    enum Stage { CANDIDATE, RESERVED }

    /**
     * Charges {@code plan}'s bytes to the demand's budgets, replacing what an earlier plan of this preparation charged.
     * True: charged, execute it; false: a speculative demand whose confidence does not cover the bytes (a miss);
     * failed: a typed refusal (over budget), which ends the preparation.
     */
    Future<Boolean> admit(Plan plan);

    /** A payload-moving plan started (its detail is {@code stage}), or all its leases are now held. */
    void moving(Stage stage);

    /**
     * The plan is host-ready under its leases and its device copy starts: the demand holds the pages from now on
     * (admission leases them), until the copy is terminal and the preparation's result says how it ended.
     */
    void copying(Plan plan, List<PreparationResult.HeldGroup> held);
}
