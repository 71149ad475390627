package io.orbitkv.engine;

import io.orbitkv.common.RoleProxies;
import io.orbitkv.model.ProducerRef;
import io.orbitkv.model.ProducerState;
import io.orbitkv.model.StateKey;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.eventbus.DeliveryOptions;
import io.vertx.core.eventbus.EventBus;
import java.util.List;

/**
 * Typed proxy of the engine role's producer evidence (P/D): where a named producer session stands for a consumer's
 * pages. The engine role answers for its own sessions, and asks the producer's Manager for another Manager's.
 */
public final class ProducerProxy implements ProducerPort {
    static final String STATUS = "orbitkv.engine.producer-status";

    /** The command: the producer and the keys the consumer demands. */
    public record Status(ProducerRef producer, List<StateKey> keys) {
        public Status {
            keys = List.copyOf(keys);
        }
    }

    static final List<Class<?>> MESSAGE_TYPES = List.of(Status.class, ProducerState.class);

    private final EventBus bus;
    /** Above the remote ask's own bound ({@link ProducerStatusService#REMOTE_TIMEOUT_MILLIS}). */
    private final DeliveryOptions options = new DeliveryOptions().setSendTimeout(5_000).setLocalOnly(true);

    public ProducerProxy(Vertx vertx) {
        this.bus = vertx.eventBus();
    }

    @Override
    public Future<ProducerState> status(ProducerRef producer, List<StateKey> keys) {
        return RoleProxies.request(bus, STATUS, new Status(producer, keys), options);
    }
}
