package io.orbitkv.engine;

import io.orbitkv.common.OrbitException;
import io.orbitkv.protocol.engine.EngineServiceGrpcService;
import io.orbitkv.protocol.engine.ErrorReason;
import io.vertx.core.Future;
import io.vertx.grpc.common.GrpcMessage;
import io.vertx.grpc.common.ServiceMethod;
import java.util.List;
import java.util.function.BooleanSupplier;
import java.util.function.Function;

/**
 * One call of the engine API: its engine.proto method (name, request decoder, reply encoder) and the
 * {@link EngineOperations} method behind it. {@link #all} is the one list both doors serve, so the gRPC door and the
 * event-bus bridge expose the same operations, decode requests with the same generated parser and refuse with the
 * same typed errors.
 */
record EngineCall<Q, R>(ServiceMethod<Q, R> method, Function<Q, Future<R>> operation) {

    /** Every engine call, in engine.proto order. */
    static List<EngineCall<?, ?>> all(EngineOperations operations) {
        return List.of(
                new EngineCall<>(EngineServiceGrpcService.Register, operations::register),
                new EngineCall<>(EngineServiceGrpcService.Unregister, operations::unregister),
                new EngineCall<>(EngineServiceGrpcService.Heartbeat, operations::heartbeat),
                new EngineCall<>(EngineServiceGrpcService.AllocatePublish, operations::allocatePublish),
                new EngineCall<>(EngineServiceGrpcService.SealPublish, operations::sealPublish),
                new EngineCall<>(EngineServiceGrpcService.AbortPublish, operations::abortPublish),
                new EngineCall<>(EngineServiceGrpcService.SubmitQuery, operations::submitQuery),
                new EngineCall<>(EngineServiceGrpcService.SubmitDemand, operations::submitDemand),
                new EngineCall<>(EngineServiceGrpcService.PollQuery, operations::pollQuery),
                new EngineCall<>(EngineServiceGrpcService.CancelQuery, operations::cancelQuery),
                new EngineCall<>(EngineServiceGrpcService.ReleaseLease, operations::releaseLease),
                new EngineCall<>(EngineServiceGrpcService.Retain, operations::retain),
                new EngineCall<>(EngineServiceGrpcService.Unretain, operations::unretain),
                new EngineCall<>(EngineServiceGrpcService.Stats, operations::stats),
                new EngineCall<>(EngineServiceGrpcService.Ping, operations::ping));
    }

    /** The gRPC full method name, e.g. {@code orbitkv.engine.v1.EngineService/Register}: also its bridge address. */
    String fullName() {
        return method.fullMethodName();
    }

    /**
     * Decodes one request message (identity-encoded) with the method's generated decoder; anything it cannot parse
     * is {@code MALFORMED_REQUEST}. The one decode path of both doors.
     */
    Q decode(GrpcMessage message) {
        try {
            return method.decoder().decode(message);
        } catch (OrbitException e) {
            throw e;
        } catch (Exception e) {
            throw new OrbitException(ErrorReason.MALFORMED_REQUEST, "the body is not a valid " + method.methodName()
                    + " request: " + e.getMessage());
        }
    }

    /**
     * The same call, answered SHUTTING_DOWN (and not run) once {@code closing} says so: the engine role's first step
     * of an ordered stop, before anything behind the doors is torn down.
     */
    EngineCall<Q, R> refusingWhen(BooleanSupplier closing) {
        return new EngineCall<>(method, request -> closing.getAsBoolean()
                ? Future.failedFuture(new OrbitException(ErrorReason.SHUTTING_DOWN, "the Manager is stopping"))
                : operation.apply(request));
    }

    /** Runs the operation; an exception thrown before its future exists becomes that future's failure. */
    Future<R> run(Q request) {
        try {
            return operation.apply(request);
        } catch (RuntimeException e) {
            return Future.failedFuture(e);
        }
    }
}
