package io.orbitkv.events;

import io.orbitkv.common.RoleProxies;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.eventbus.DeliveryOptions;
import io.vertx.core.eventbus.EventBus;

/** Typed proxy of the events role: one method per command; callers never see event-bus addresses. */
public final class EventsProxy {
    static final String SUMMARY = "orbitkv.events.summary";

    private final EventBus bus;
    private final DeliveryOptions options = new DeliveryOptions().setSendTimeout(10_000).setLocalOnly(true);

    public EventsProxy(Vertx vertx) {
        this.bus = vertx.eventBus();
    }

    /** The router summary (recomputed at most every {@code events.summary.min-interval-ms}). */
    public Future<EventsCommands.RouterSummary> summary() {
        return RoleProxies.request(bus, SUMMARY, new EventsCommands.GetSummary(), options);
    }
}
