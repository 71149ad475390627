package io.orbitkv.planning;

import io.orbitkv.common.RoleProxies;
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
public final class PlanningProxy {
    static final String PLAN = "orbitkv.planning.plan";
    static final String EXECUTE = "orbitkv.planning.execute";
    static final String CANCEL = "orbitkv.planning.cancel";
    static final String PROMOTE = "orbitkv.planning.promote";
    static final String RELEASE = "orbitkv.planning.release";
    static final String STATS = "orbitkv.planning.stats";

    private final EventBus bus;
    private final DeliveryOptions options = new DeliveryOptions().setSendTimeout(30_000).setLocalOnly(true);

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

    /** Revokes interest in execution {@code id}; completes after it drained (true when it was live). */
    public Future<Boolean> cancel(long id) {
        return request(CANCEL, new PlanningCommands.Cancel(id));
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
