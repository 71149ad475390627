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
 */
public final class RoleProxies {
    private RoleProxies() {}

    public static <R> Future<R> request(EventBus bus, String address, Object command, DeliveryOptions options) {
        return bus.<R>request(address, command, options).transform(ar -> {
            if (ar.succeeded()) {
                return Future.succeededFuture(ar.result().body());
            }
            return Future.failedFuture(toOrbitException(ar.cause()));
        });
    }

    /** Binds a role's handler to an address, turning OrbitExceptions into typed replies. */
    public static <C, R> void serve(EventBus bus, String address, Function<C, Future<R>> handler) {
        bus.<C>localConsumer(address, (Message<C> message) -> {
            Future<R> result;
            try {
                result = handler.apply(message.body());
            } catch (RuntimeException e) {
                result = Future.failedFuture(e);
            }
            result.onComplete(ar -> {
                if (ar.succeeded()) {
                    message.reply(ar.result());
                } else if (ar.cause() instanceof OrbitException orbit) {
                    message.fail(orbit.reason().getNumber(), orbit.detail());
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
