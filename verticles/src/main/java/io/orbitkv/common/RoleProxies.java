package io.orbitkv.common;

import io.orbitkv.protocol.engine.ErrorReason;
import io.vertx.core.Future;
import io.vertx.core.eventbus.DeliveryOptions;
import io.vertx.core.eventbus.EventBus;
import io.vertx.core.eventbus.Message;
import io.vertx.core.eventbus.ReplyException;
import io.vertx.core.eventbus.ReplyFailure;
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
 */
public final class RoleProxies {
    private static final String LOCAL_ROLES = "orbitkv.local-roles";

    private RoleProxies() {}

    /** A role handler and the context that owns its state. Shareable: lives in the Vertx's local map. */
    private record LocalRole(io.vertx.core.Context context, Function<Object, Future<Object>> handler)
            implements io.vertx.core.shareddata.Shareable {}

    @SuppressWarnings("unchecked")
    public static <R> Future<R> request(EventBus bus, String address, Object command, DeliveryOptions options) {
        io.vertx.core.Context caller = io.vertx.core.Vertx.currentContext();
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

    private static Future<Object> callLocal(io.vertx.core.Context caller, LocalRole role, Object command) {
        // Same thread (the role's context runs on the caller's event loop, the default with one loop): a plain call.
        // Confinement is per thread, so this keeps the role's state single-threaded without a task hop.
        if (caller == role.context() || (role.context().isEventLoopContext()
                && ((io.vertx.core.internal.ContextInternal) role.context()).nettyEventLoop().inEventLoop())) {
            return invoke(role, command);
        }
        io.vertx.core.Promise<Object> answer = ((io.vertx.core.internal.ContextInternal) caller).promise();
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

    /** Withdraws a role's handler from the direct path (its event-bus consumer is unregistered by its owner). */
    public static void withdraw(io.vertx.core.Vertx vertx, String address) {
        vertx.sharedData().<String, LocalRole>getLocalMap(LOCAL_ROLES).remove(address);
    }

    /** Binds a role's handler to an address, turning typed failures into coded replies; returns the consumer. */
    @SuppressWarnings("unchecked")
    public static <C, R> io.vertx.core.eventbus.MessageConsumer<C> serve(EventBus bus, String address,
                                                                      Function<C, Future<R>> handler) {
        io.vertx.core.Context owner = io.vertx.core.Vertx.currentContext();
        if (owner != null) {
            Function<Object, Future<Object>> untyped = c -> (Future<Object>) (Future<?>) handler.apply((C) c);
            owner.owner().sharedData().<String, LocalRole>getLocalMap(LOCAL_ROLES).put(address, new LocalRole(owner, untyped));
        }
        return bus.<C>localConsumer(address, (Message<C> message) -> {
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
