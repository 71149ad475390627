package io.orbitkv.planning;

import io.vertx.core.Future;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Supplier;
import io.orbitkv.model.plan.PlanningException;
import io.orbitkv.model.plan.PlanningFailure;
import io.orbitkv.model.plan.PreparationResult;

/**
 * The planning role's command handlers, free of the event bus ({@link PlanningVerticle} serves them; tests call them
 * directly): demand preparations by the caller's id ({@link DemandPreparation} holds the design note).
 *
 * <p>A preparation stays here while it runs or holds pages, and leaves when it ended holding nothing: after a result
 * that holds nothing, a release, or a cancel once drained. Ids are the caller's; a repeated live id is refused.
 *
 * <p>Concurrency: confined to the planning role's event loop.
 */
public final class PlanningHandlers implements PlanningPort {
    private final PlanningRole role;
    private final Supplier<Future<Boolean>> dramTight;
    private final Map<Long, DemandPreparation> preparations = new HashMap<>();

    /** @param dramTight whether the pool is short of free space now (asked for speculative demands only) */
    public PlanningHandlers(PlanningRole role, Supplier<Future<Boolean>> dramTight) {
        this.role = Objects.requireNonNull(role, "role");
        this.dramTight = Objects.requireNonNull(dramTight, "dramTight");
    }

    @Override
    public Future<PreparationResult> prepare(PlanningCommands.Prepare command) {
        if (preparations.containsKey(command.id())) {
            return Future.failedFuture(new PlanningException(PlanningFailure.INVALID_INPUT, "preparation "
                    + command.id() + " is live already"));
        }
        DemandPreparation replaced = command.replaces() == 0 ? null : preparations.get(command.replaces());
        DemandPreparation[] self = new DemandPreparation[1];
        self[0] = new DemandPreparation(command, role, dramTight,
                () -> preparations.remove(command.id(), self[0]));
        preparations.put(command.id(), self[0]);
        self[0].start(replaced);
        return self[0].result();
    }

    @Override
    public Future<Integer> cancel(long id, boolean quarantine) {
        DemandPreparation preparation = preparations.get(id);
        return preparation == null ? Future.succeededFuture(0) : preparation.cancel(quarantine);
    }

    @Override
    public Future<Integer> release(long id, boolean quarantine) {
        DemandPreparation preparation = preparations.get(id);
        return preparation == null ? Future.succeededFuture(0) : preparation.release(quarantine);
    }

    /**
     * Ordered stop: every preparation is cancelled and drained (submitted reads and copies complete) and what it held
     * is released. Admission cancelled its tickets before this, so normally nothing is left.
     */
    public Future<Void> shutdown() {
        List<Future<?>> waits = new ArrayList<>();
        for (DemandPreparation preparation : List.copyOf(preparations.values())) {
            waits.add(preparation.cancel(false));
        }
        return Future.join(waits).transform(ar -> Future.succeededFuture());
    }

    public PlanningCommands.PlanningStats stats() {
        int held = 0;
        for (DemandPreparation preparation : preparations.values()) {
            if (preparation.state() == DemandPreparation.State.HELD
                    || preparation.state() == DemandPreparation.State.COPYING) {
                held++;
            }
        }
        return new PlanningCommands.PlanningStats(preparations.size() - held, held, role.executor().heldLeases());
    }

    public PlanningRole role() {
        return role;
    }
}
