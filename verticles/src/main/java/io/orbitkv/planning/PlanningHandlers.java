package io.orbitkv.planning;

import io.orbitkv.restore.RestoreCommands;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.Supplier;

/**
 * The planning role's command handlers, free of the event bus ({@link PlanningVerticle} serves them; tests call them
 * directly): plans through {@link PlanningRole}, executions by caller id, and the prepared plans they produced.
 *
 * <p>Design note (ownership): an execution owns its segments' leases while it runs ({@link PlanExecutor}); once it
 * succeeds, the prepared plan is held here under the caller's id until {@link #release} (or {@link #cancel}, which
 * also ends a prepared plan), so the caller (admission) names leases by id and never touches an owner. An execution
 * cancelled while running completes (fails CANCELLED) only after its submitted work drained and its leases ended; if
 * it had already succeeded, cancel releases what it prepared. Ids are the caller's; a repeated id is refused.
 *
 * <p>Concurrency: confined to the planning role's event loop.
 */
public final class PlanningHandlers implements PlanningPort {
    private final PlanningRole role;
    private final Supplier<Future<Boolean>> dramTight;
    private final Map<Long, PlanExecutor.Preparation> executing = new HashMap<>();
    private final Map<Long, PlanExecutor.Prepared> prepared = new HashMap<>();
    /** Executions asking whether DRAM is tight before they start, and which of them were promoted meanwhile. */
    private final Set<Long> starting = new HashSet<>();
    private final Set<Long> promotedBeforeStart = new HashSet<>();
    /** {@link #acquired} asked while the execution was still starting: answered once it started (or did not). */
    private final Map<Long, List<Promise<Boolean>>> acquiredBeforeStart = new HashMap<>();

    /** @param dramTight whether the pool is short of free space now (asked for speculative demands only) */
    public PlanningHandlers(PlanningRole role, Supplier<Future<Boolean>> dramTight) {
        this.role = Objects.requireNonNull(role, "role");
        this.dramTight = Objects.requireNonNull(dramTight, "dramTight");
    }

    public Future<PlanningRole.Planned> plan(DemandView demand) {
        return role.planWithWrites(demand);
    }

    public Future<PlanningCommands.PreparedPlan> execute(long id, DemandView demand, Plan plan) {
        if (executing.containsKey(id) || prepared.containsKey(id)) {
            return Future.failedFuture(new PlanningException(PlanningFailure.INVALID_INPUT, "execution " + id
                    + " is live already"));
        }
        Future<Boolean> tight = demand.speculative() ? dramTight.get().otherwise(false) : Future.succeededFuture(false);
        starting.add(id);
        return tight.compose(isTight -> {
            starting.remove(id);
            boolean promoted = promotedBeforeStart.remove(id);
            List<Promise<Boolean>> waiting = acquiredBeforeStart.remove(id);
            PlanExecutor.Preparation preparation;
            try {
                preparation = role.execute(demand, plan, isTight);
            } catch (RuntimeException e) {
                if (waiting != null) {
                    waiting.forEach(w -> w.tryComplete(false));
                }
                throw e;
            }
            executing.put(id, preparation);
            if (waiting != null) {
                waiting.forEach(w -> preparation.acquired().onComplete(w));
            }
            if (promoted) {
                role.promote(preparation);
            }
            return preparation.result().transform(ar -> {
                executing.remove(id, preparation);
                if (ar.failed()) {
                    return Future.failedFuture(ar.cause());
                }
                prepared.put(id, ar.result());
                return Future.succeededFuture(new PlanningCommands.PreparedPlan(id, ar.result().plan(),
                        ar.result().leases()));
            });
        });
    }

    /**
     * Completes true once execution {@code id} holds every segment's lease (before any transfer is submitted), false
     * when it stopped before that or is not running (it already finished: its result says the rest).
     */
    public Future<Boolean> acquired(long id) {
        PlanExecutor.Preparation preparation = executing.get(id);
        if (preparation != null) {
            return preparation.acquired();
        }
        if (starting.contains(id)) {
            Promise<Boolean> waiter = Promise.promise();
            acquiredBeforeStart.computeIfAbsent(id, k -> new ArrayList<>()).add(waiter);
            return waiter.future();
        }
        return Future.succeededFuture(prepared.containsKey(id));
    }

    /**
     * A real demand took over speculative execution {@code id}: its transfers become demand reads due now (see
     * {@link PlanExecutor.Preparation#promote}). Answers whether it was still running (false: it already finished, or
     * there is no such execution; nothing to do then).
     */
    public Future<Boolean> promote(long id) {
        PlanExecutor.Preparation preparation = executing.get(id);
        if (preparation != null) {
            role.promote(preparation);
            return Future.succeededFuture(true);
        }
        if (starting.contains(id)) {
            promotedBeforeStart.add(id);
            return Future.succeededFuture(true);
        }
        return Future.succeededFuture(false);
    }

    /**
     * The last step of a prepared engine-restore plan: the restore owner copies its host pages into {@code destination}
     * (see {@link PlanExecutor.Prepared#restore}); completes when every copy is terminal. The plan stays held until
     * {@link #release}, which waits for the copies.
     */
    public Future<RestoreCommands.Restored> finish(long id, EngineDestination destination) {
        PlanExecutor.Prepared held = prepared.get(id);
        if (held == null) {
            return Future.failedFuture(new PlanningException(PlanningFailure.INVALID_INPUT, "no prepared plan " + id));
        }
        return held.restore(destination);
    }

    /** A hint that nobody wants prepared plan {@code id}'s device copy: queued copies are dropped, submitted drain. */
    public Future<Boolean> cancelFinish(long id) {
        PlanExecutor.Prepared held = prepared.get(id);
        if (held != null) {
            held.cancelRestore();
        }
        return Future.succeededFuture(held != null);
    }

    /** Revokes interest; completes after the execution drained, or after a prepared plan's leases ended. */
    public Future<Boolean> cancel(long id) {
        PlanExecutor.Preparation preparation = executing.get(id);
        if (preparation != null) {
            // A preparation that succeeds despite the cancel lands in prepared: end it too.
            return preparation.cancel().compose(v -> release(id, false)).map(n -> true);
        }
        cancelFinish(id);
        return release(id, false).map(n -> n > 0);
    }

    public Future<Integer> release(long id, boolean quarantine) {
        PlanExecutor.Prepared held = prepared.remove(id);
        return held == null ? Future.succeededFuture(0) : held.release(quarantine);
    }

    /**
     * Ordered stop: every running execution is cancelled and drained (submitted reads complete), and every prepared
     * plan still held is released. Admission ended its leases before this, so normally nothing is left.
     */
    public Future<Void> shutdown() {
        List<Future<?>> waits = new ArrayList<>();
        for (long id : List.copyOf(executing.keySet())) {
            waits.add(cancel(id));
        }
        for (long id : List.copyOf(prepared.keySet())) {
            cancelFinish(id);
            waits.add(release(id, false));
        }
        return Future.join(waits).transform(ar -> Future.succeededFuture());
    }

    public PlanningCommands.PlanningStats stats() {
        return new PlanningCommands.PlanningStats(executing.size(), prepared.size(), role.executor().heldLeases());
    }

    public PlanningRole role() {
        return role;
    }
}
