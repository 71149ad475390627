package io.orbitkv.planning;

import io.orbitkv.common.RoleProxies;
import io.orbitkv.restore.RestoreCommands;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.eventbus.DeliveryOptions;
import io.vertx.core.eventbus.EventBus;
import io.vertx.core.eventbus.ReplyException;
import io.vertx.core.eventbus.ReplyFailure;

/**
 * Typed proxy of the planning role: one method per command; callers never see event-bus addresses. Failures come back
 * as {@link PlanningException} with the role's {@link PlanningFailure}.
 */
public final class PlanningProxy implements PlanningPort {
    static final String PLAN = "orbitkv.planning.plan";
    static final String EXECUTE = "orbitkv.planning.execute";
    static final String CANCEL = "orbitkv.planning.cancel";
    static final String ACQUIRED = "orbitkv.planning.acquired";
    static final String PROMOTE = "orbitkv.planning.promote";
    static final String FINISH = "orbitkv.planning.finish";
    static final String CANCEL_FINISH = "orbitkv.planning.cancel-finish";
    static final String RELEASE = "orbitkv.planning.release";
    static final String STATS = "orbitkv.planning.stats";

    private final EventBus bus;
    private final DeliveryOptions options = new DeliveryOptions().setSendTimeout(30_000).setLocalOnly(true);
    private final DeliveryOptions finishOptions = new DeliveryOptions().setSendTimeout(Long.MAX_VALUE / 2)
            .setLocalOnly(true);

    public PlanningProxy(Vertx vertx) {
        this.bus = vertx.eventBus();
    }

    /** Discovery and a plan; holds nothing. */
    public Future<PlanningRole.Planned> plan(DemandView demand) {
        return request(PLAN, new PlanningCommands.MakePlan(demand));
    }

    /** Acquires and prepares {@code plan} under {@code id}; see {@link PlanningCommands.Execute}. */
    public Future<PlanningCommands.PreparedPlan> execute(long id, DemandView demand, Plan plan) {
        return request(EXECUTE, new PlanningCommands.Execute(id, demand, plan));
    }

    /**
     * Completes true once execution {@code id} holds every segment's lease (see {@link PlanningPort#acquired}). No
     * send timeout: a peer plan's acquisition runs within the query's waiting budget, and the answer comes at the
     * latest when the execution ends.
     */
    public Future<Boolean> acquired(long id) {
        return RoleProxies.<Boolean>request(bus, ACQUIRED, new PlanningCommands.Acquired(id), finishOptions)
                .recover(failure -> Future.failedFuture(typed(failure)));
    }

    /** Revokes interest in execution {@code id}; completes after it drained (true when it was live). */
    public Future<Boolean> cancel(long id) {
        return request(CANCEL, new PlanningCommands.Cancel(id));
    }

    /**
     * Runs prepared engine-restore plan {@code id}'s device copy (the restore role is its owner); completes when every
     * copy is terminal, with what was restored or the restore role's typed failure. No send timeout: copies may run long.
     */
    public Future<RestoreCommands.Restored> finish(long id, EngineDestination destination) {
        return RoleProxies.<RestoreCommands.Restored>request(bus, FINISH, new PlanningCommands.Finish(id, destination),
                finishOptions).recover(failure -> Future.failedFuture(typed(failure)));
    }

    /** A hint that nobody wants prepared plan {@code id}'s device copy; its {@link #finish} completes once drained. */
    public Future<Boolean> cancelFinish(long id) {
        return request(CANCEL_FINISH, new PlanningCommands.CancelFinish(id));
    }

    /** A real demand took over speculative execution {@code id}; true when it was still running. */
    public Future<Boolean> promote(long id) {
        return request(PROMOTE, new PlanningCommands.Promote(id));
    }

    /** Ends a prepared plan's leases once; answers how many leases this call ended (0 when already ended). */
    public Future<Integer> release(long id, boolean quarantine) {
        return request(RELEASE, new PlanningCommands.Release(id, quarantine));
    }

    public Future<PlanningCommands.PlanningStats> stats() {
        return request(STATS, new PlanningCommands.GetStats());
    }

    private <R> Future<R> request(String address, Object command) {
        return RoleProxies.<R>request(bus, address, command, options).recover(failure -> Future.failedFuture(
                typed(failure)));
    }

    static Throwable typed(Throwable failure) {
        if (failure instanceof ReplyException reply && reply.failureType() == ReplyFailure.RECIPIENT_FAILURE) {
            PlanningFailure planning = PlanningFailure.forCode(reply.failureCode());
            if (planning != null) {
                return new PlanningException(planning, reply.getMessage());
            }
        }
        return failure;
    }
}
