package io.orbitkv.model.plan;

import java.util.List;
import java.util.Objects;
import java.util.Optional;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.plan.Plan;

/**
 * How a demand's preparation ended without a failure.
 *
 * @param plan      the last plan made (its boundary and reason)
 * @param held      for HOST_READY and RESTORED, the host pages held per group, groups and positions ascending
 * @param takenOver HOST_READY only: the speculative preparation this one took over instead of planning again
 * @param restored  RESTORED only: what the device copy restored
 * @param waitSpent a later boundary was reachable once pages being written are sealed, but the waiting budget ended
 */
public record PreparationResult(Kind kind, Plan plan, List<HeldGroup> held, Optional<TakeOver> takenOver,
                                Restored restored, boolean waitSpent) {

    public enum Kind {
        /** Pages being written would allow a later boundary and waiting budget is left: nothing is held. */
        WAITING_FOR_WRITES,
        /** Replans ran out, or a queue was full, with waiting budget left: nothing is held, try again later. */
        RETRY_LATER,
        /** Recompute: the plan restores nothing (or speculation was refused or dropped). Nothing is held. */
        RECOMPUTE,
        /** The plan's pages are held in local DRAM, their legality re-checked on what was acquired. */
        HOST_READY,
        /** The device copy completed; the sources are held until released. */
        RESTORED
    }

    /** Where a take-over found the hint's preparation. */
    public enum TakeOver { RESIDENT, IN_FLIGHT }

    /** The host pages of one group: positions ascending, {@code refs} parallel to them. */
    public record HeldGroup(int groupId, List<Integer> positions, List<ImageRef> refs) {
        public HeldGroup {
            positions = List.copyOf(positions);
            refs = List.copyOf(refs);
        }
    }

    public PreparationResult {
        Objects.requireNonNull(kind, "kind");
        Objects.requireNonNull(plan, "plan");
        held = List.copyOf(held);
        Objects.requireNonNull(takenOver, "takenOver");
    }

    public static PreparationResult nothingHeld(Kind kind, Plan plan, boolean waitSpent) {
        return new PreparationResult(kind, plan, List.of(), Optional.empty(), null, waitSpent);
    }
}
