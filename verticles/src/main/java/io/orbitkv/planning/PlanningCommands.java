package io.orbitkv.planning;

import java.util.Objects;
import java.util.Optional;
import io.orbitkv.model.plan.DemandView;
import io.orbitkv.model.plan.EngineDestination;
import io.orbitkv.model.plan.PreparationResult;
import io.orbitkv.model.plan.PreparationCallbacks;

/** Messages the planning role accepts. Local records only (see {@link io.orbitkv.common.LocalCodec}). */
public final class PlanningCommands {
    private PlanningCommands() {}

    /**
     * Prepare a demand under the caller's id (unique per caller for the Manager's life): plan, admit, execute, replan,
     * re-check, and for an engine-restore demand copy into {@code destination}. Answered with how it ended (a
     * {@link PreparationResult}) or a typed failure once nothing is running. What it holds stays held under {@code id}
     * until {@link Release} or {@link Cancel}.
     *
     * @param replaces  the caller's earlier preparation of the same request (0: none): taken over when the
     *                  take-over rule allows, otherwise cancelled and drained before the first plan
     * @param admission admission's side: the byte gate and progress (see {@link PreparationCallbacks})
     */
    public record Prepare(long id, DemandView demand, Optional<EngineDestination> destination, long replaces,
                          PreparationCallbacks admission) {
        public Prepare {
            Objects.requireNonNull(demand, "demand");
            Objects.requireNonNull(destination, "destination");
            Objects.requireNonNull(admission, "admission");
        }
    }

    /**
     * Revokes interest in preparation {@code id}; answered once it drained, with the pages released because of it.
     * {@code quarantine}: the engine holding them lost its session.
     */
    public record Cancel(long id, boolean quarantine) {}

    /** Ends what preparation {@code id} holds; answered with the pages released (0 when already ended). */
    public record Release(long id, boolean quarantine) {}

    public record GetStats() {}

    /** Running preparations, held ones, and leases the execution owners granted and have not seen released. */
    public record PlanningStats(int executing, int prepared, long heldLeases) {}

    static final java.util.List<Class<?>> MESSAGE_TYPES = java.util.List.of(Prepare.class, PreparationResult.class,
            Cancel.class, Release.class, GetStats.class, PlanningStats.class);
}
