package io.orbitkv.planning;

import io.orbitkv.common.RoleProxies;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.eventbus.DeliveryOptions;
import io.vertx.core.eventbus.EventBus;
import io.vertx.core.eventbus.ReplyException;
import io.vertx.core.eventbus.ReplyFailure;
import io.orbitkv.model.plan.PlanningException;
import io.orbitkv.model.plan.PlanningFailure;
import io.orbitkv.model.plan.PreparationResult;

/**
 * Typed proxy of the planning role: one method per command; callers never see event-bus addresses. Failures come back
 * as {@link PlanningException} with the role's {@link PlanningFailure}.
 */
public final class PlanningProxy implements PlanningPort {
    static final String PREPARE = "orbitkv.planning.prepare";
    static final String CANCEL = "orbitkv.planning.cancel";
    static final String RELEASE = "orbitkv.planning.release";
    static final String STATS = "orbitkv.planning.stats";

    private final EventBus bus;
    private final DeliveryOptions options = new DeliveryOptions().setSendTimeout(30_000).setLocalOnly(true);
    private final DeliveryOptions prepareOptions = new DeliveryOptions().setSendTimeout(Long.MAX_VALUE / 2)
            .setLocalOnly(true);

    public PlanningProxy(Vertx vertx) {
        this.bus = vertx.eventBus();
    }

    /**
     * Prepares a demand; see {@link PlanningCommands.Prepare}. No send timeout: the demand's waiting budget bounds
     * planning and acquisition, and a device copy may run long; the answer comes when the preparation ends.
     */
    @Override
    public Future<PreparationResult> prepare(PlanningCommands.Prepare command) {
        return RoleProxies.<PreparationResult>request(bus, PREPARE, command, prepareOptions)
                .recover(failure -> Future.failedFuture(typed(failure)));
    }

    /** Revokes interest in a preparation; completes after it drained, with the pages released because of it. */
    @Override
    public Future<Integer> cancel(long id, boolean quarantine) {
        return request(CANCEL, new PlanningCommands.Cancel(id, quarantine));
    }

    /** Ends what a preparation holds once; answers the pages released (0 when already ended). */
    @Override
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
