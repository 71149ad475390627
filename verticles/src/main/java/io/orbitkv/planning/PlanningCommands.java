package io.orbitkv.planning;

import java.util.List;

/** Messages the planning role accepts. Local records only (see {@link io.orbitkv.common.LocalCodec}). */
public final class PlanningCommands {
    private PlanningCommands() {}

    /** Discovery and a plan for a demand; nothing is held. Answered with {@link PlanningRole.Planned}. */
    public record MakePlan(DemandView demand) {}

    /**
     * Acquire and prepare {@code plan} under the caller's id (unique per caller for the Manager's life). Answered with
     * {@link PreparedPlan} once every segment reached the target, or a typed {@link PlanningException} after
     * everything drained and was released.
     */
    public record Execute(long id, DemandView demand, Plan plan) {}

    /** Answered true once execution {@code id} holds every segment's lease (before any transfer), else false. */
    public record Acquired(long id) {}

    /** Revokes interest in execution {@code id}; answered once its submitted work drained and its leases ended. */
    public record Cancel(long id) {}

    /** Runs prepared engine-restore plan {@code id}'s device copy into {@code destination}; see the handlers. */
    public record Finish(long id, EngineDestination destination) {}

    /** A hint that nobody wants prepared plan {@code id}'s device copy. */
    public record CancelFinish(long id) {}

    /** A real demand took over speculative execution {@code id}: its transfers become demand reads due now. */
    public record Promote(long id) {}

    /** Ends the leases of a prepared plan; {@code quarantine}: the engine holding them lost its session. */
    public record Release(long id, boolean quarantine) {}

    /** A prepared plan, held under its id until {@link Release}: one lease per segment, in plan order. */
    public record PreparedPlan(long id, Plan plan, List<SegmentLease> leases) {}

    public record GetStats() {}

    /** Live executions, held prepared plans and leases the execution owners granted and have not seen released. */
    public record PlanningStats(int executing, int prepared, long heldLeases) {}

    static final List<Class<?>> MESSAGE_TYPES = List.of(MakePlan.class, PlanningRole.Planned.class, Execute.class,
            Acquired.class, Cancel.class, Finish.class, CancelFinish.class, Promote.class, Release.class, PreparedPlan.class, GetStats.class, PlanningStats.class);
}
