package io.orbitkv.restore;

import io.orbitkv.common.RoleProxies;
import io.orbitkv.protocol.engine.RestoreRoute;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.eventbus.DeliveryOptions;
import io.vertx.core.eventbus.EventBus;
import java.util.List;
import io.orbitkv.model.plan.RestoreTarget;
import io.orbitkv.model.plan.Restored;

/** Typed proxy of the restore role (one method per command). */
public final class RestoreProxy {
    static final String REGISTER = "orbitkv.restore.register";
    static final String EXECUTE = "orbitkv.restore.execute";
    static final String CANCEL = "orbitkv.restore.cancel";
    static final String RELEASE_INSTANCE = "orbitkv.restore.release-instance";
    static final String STATS = "orbitkv.restore.stats";

    private final EventBus bus;
    // A restore answers when its copies are terminal: no send timeout may end it while copies are in flight.
    private final DeliveryOptions options = new DeliveryOptions().setSendTimeout(Long.MAX_VALUE / 2).setLocalOnly(true);

    public RestoreProxy(Vertx vertx) {
        this.bus = vertx.eventBus();
    }

    /** Maps/imports the instance's destinations (replacing earlier ones), all or nothing; answers the routes. */
    public Future<RestoreCommands.Registered> registerDestinations(long instance, List<RestoreCommands.DestinationSpec> destinations) {
        return RoleProxies.request(bus, REGISTER, new RestoreCommands.RegisterDestinations(instance, destinations), options);
    }

    /**
     * Copies the sources into the target destination; completes when every copy is terminal: with what was restored,
     * or failed (ROUTE_UNAVAILABLE / UNKNOWN_DESTINATION / INVALID_DESTINATION before anything moved; RESTORE_FAILED
     * after a failed or cancelled copy drained). The caller keeps the sources until then.
     */
    public Future<Restored> execute(long instance, long ticket, RestoreTarget target,
                                                   List<RestoreCommands.SourcePage> sources) {
        return RoleProxies.request(bus, EXECUTE, new RestoreCommands.Execute(instance, ticket, target, sources), options);
    }

    /** Stops submitting the ticket's restore; its {@link #execute} future completes once submitted copies drained. */
    public Future<Boolean> cancel(long instance, long ticket) {
        return RoleProxies.request(bus, CANCEL, new RestoreCommands.Cancel(instance, ticket), options);
    }

    /** Cancels and drains the instance's restores, then unmaps its destinations; answers how many were unmapped. */
    public Future<Integer> releaseInstance(long instance) {
        return RoleProxies.request(bus, RELEASE_INSTANCE, new RestoreCommands.ReleaseInstance(instance), options);
    }

    /**
     * Every Manager-executed restore route, in enum order, with its availability on this process and, when
     * unavailable, the cause. Answered here without a message: the native probes behind it ran once per process.
     */
    public static List<RestoreCommands.RouteStatus> routes() {
        return RestoreRoutes.all();
    }

    /** {@link #routes} for one route. */
    public static RestoreCommands.RouteStatus route(RestoreRoute route) {
        return RestoreRoutes.of(route);
    }

    public Future<RestoreCommands.RestoreStats> stats() {
        return RoleProxies.request(bus, STATS, new RestoreCommands.GetStats(), options);
    }
}
