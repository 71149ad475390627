package io.orbitkv.common;

import io.orbitkv.protocol.engine.ErrorReason;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.eventbus.DeliveryOptions;
import io.vertx.core.eventbus.EventBus;
import io.vertx.core.eventbus.Message;
import io.vertx.core.eventbus.MessageConsumer;
import io.vertx.core.eventbus.ReplyException;
import io.vertx.core.eventbus.ReplyFailure;
import io.vertx.core.internal.ContextInternal;
import io.vertx.core.shareddata.LocalMap;
import io.vertx.core.shareddata.Shareable;
import java.util.List;
import java.util.function.Function;

/**
 * The one mechanism behind every typed role proxy: a local request/reply whose failure comes back as the same
 * {@link OrbitException} the receiving role threw.
 *
 * <p>Design note (the fast path): a role's handler always runs on the role's own context, which keeps its state
 * confined. Between roles of one Manager, though, the event bus adds a reply address, a consumer and a timer per
 * call; measured, that roughly doubled the query round trip. So {@link #serve} also records the handler and its
 * context in the Vertx's local shared map, and {@link #request} from a Vert.x thread calls it directly: on the role's
 * own event-loop thread as a plain call (the handler's future completes in place), otherwise by hopping to the role's
 * context and completing on the caller's. Callers outside Vert.x (tools, tests) still go through the event bus. Either way the
 * caller sees the same typed failures.
 *
 * <p>Withdrawal: a stopping role calls {@link #withdrawAll} first thing; its handlers leave the direct path and the
 * event bus together, so from then on every caller gets SHUTTING_DOWN (NO_HANDLERS on the bus) instead of reaching a
 * role that is tearing its state down. With several event loops the same holds: the hop to the role's context is
 * only taken while the handler is still served.
 */
public final class RoleProxies {
    private static final String LOCAL_ROLES = "orbitkv.local-roles";

    private RoleProxies() {}

    /**
     * A role handler, the context that owns its state, and its event-bus consumer. Shareable: lives in the Vertx's
     * local map until the role withdraws it.
     */
    private record LocalRole(Context context, Function<Object, Future<Object>> handler,
                             MessageConsumer<?> consumer) implements Shareable {}

    @SuppressWarnings("unchecked")
    public static <R> Future<R> request(EventBus bus, String address, Object command, DeliveryOptions options) {
        Context caller = Vertx.currentContext();
        if (caller != null) {
            LocalRole role = caller.owner().sharedData().<String, LocalRole>getLocalMap(LOCAL_ROLES).get(address);
            if (role != null) {
                return (Future<R>) callLocal(caller, role, command);
            }
        }
        return bus.<R>request(address, command, options).transform(ar -> {
            if (ar.succeeded()) {
                return Future.succeededFuture(ar.result().body());
            }
            return Future.failedFuture(toOrbitException(ar.cause()));
        });
    }

    private static Future<Object> callLocal(Context caller, LocalRole role, Object command) {
        // Same thread (the role's context runs on the caller's event loop, the default with one loop): a plain call.
        // Confinement is per thread, so this keeps the role's state single-threaded without a task hop.
        if (caller == role.context() || (role.context().isEventLoopContext()
                && ((ContextInternal) role.context()).nettyEventLoop().inEventLoop())) {
            return invoke(role, command);
        }
        Promise<Object> answer = ((ContextInternal) caller).promise();
        role.context().runOnContext(v -> invoke(role, command).onComplete(answer));
        return answer.future();
    }

    private static Future<Object> invoke(LocalRole role, Object command) {
        try {
            return role.handler().apply(command);
        } catch (RuntimeException e) {
            return Future.failedFuture(e);
        }
    }

    /**
     * Withdraws every handler the role running on {@code context} serves: from the direct path and from the event
     * bus, at once. A role calls it first thing in {@code stop()}, so from then on callers get SHUTTING_DOWN instead of
     * reaching a role that is tearing its state down. Answers how many it withdrew.
     */
    public static int withdrawAll(Context context) {
        LocalMap<String, LocalRole> roles = context.owner().sharedData().getLocalMap(LOCAL_ROLES);
        int withdrawn = 0;
        for (String address : List.copyOf(roles.keySet())) {
            LocalRole role = roles.get(address);
            if (role != null && role.context() == context && roles.remove(address, role)) {
                role.consumer().unregister();
                withdrawn++;
            }
        }
        return withdrawn;
    }

    /** Whether a handler is served at {@code address} on the direct path (for tests of withdrawal). */
    public static boolean served(Vertx vertx, String address) {
        return vertx.sharedData().getLocalMap(LOCAL_ROLES).get(address) != null;
    }

    /**
     * Binds a role's handler to an address, turning typed failures into coded replies; returns the consumer. Called
     * on the role's context; {@link #withdrawAll} undoes it.
     */
    @SuppressWarnings("unchecked")
    public static <C, R> MessageConsumer<C> serve(EventBus bus, String address, Function<C, Future<R>> handler) {
        MessageConsumer<C> consumer = bus.<C>localConsumer(address, (Message<C> message) -> {
            Future<R> result;
            try {
                result = handler.apply(message.body());
            } catch (RuntimeException e) {
                result = Future.failedFuture(e);
            }
            result.onComplete(ar -> {
                if (ar.succeeded()) {
                    message.reply(ar.result());
                } else if (ar.cause() instanceof TypedFailure typed) {
                    message.fail(typed.failureCode(), typed.detail());
                } else {
                    message.fail(-1, String.valueOf(ar.cause()));
                }
            });
        });
        Context owner = Vertx.currentContext();
        if (owner != null) {
            Function<Object, Future<Object>> untyped = c -> (Future<Object>) (Future<?>) handler.apply((C) c);
            owner.owner().sharedData().<String, LocalRole>getLocalMap(LOCAL_ROLES)
                    .put(address, new LocalRole(owner, untyped, consumer));
        }
        return consumer;
    }

    static Throwable toOrbitException(Throwable cause) {
        if (cause instanceof ReplyException reply && reply.failureType() == ReplyFailure.RECIPIENT_FAILURE) {
            ErrorReason reason = ErrorReason.forNumber(reply.failureCode());
            if (reason != null && reason != ErrorReason.ERROR_REASON_UNSPECIFIED) {
                return new OrbitException(reason, reply.getMessage());
            }
        }
        if (cause instanceof ReplyException reply && reply.failureType() == ReplyFailure.NO_HANDLERS) {
            return new OrbitException(ErrorReason.SHUTTING_DOWN, "role not available: " + reply.getMessage());
        }
        return cause;
    }
}
