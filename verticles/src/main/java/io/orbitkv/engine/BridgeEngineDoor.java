package io.orbitkv.engine;

import io.orbitkv.common.OrbitException;
import io.orbitkv.protocol.engine.ErrorReason;
import io.vertx.core.Future;
import io.vertx.core.Handler;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.eventbus.Message;
import io.vertx.core.eventbus.MessageConsumer;
import io.vertx.core.internal.VertxInternal;
import io.vertx.core.internal.VertxWrapper;
import io.vertx.core.internal.net.NetSocketInternal;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import io.vertx.core.net.NetServer;
import io.vertx.core.net.NetServerOptions;
import io.vertx.core.net.NetSocket;
import io.vertx.core.net.impl.NetServerInternal;
import io.vertx.ext.bridge.BridgeOptions;
import io.vertx.ext.bridge.PermittedOptions;
import io.vertx.ext.eventbus.bridge.tcp.TcpEventBusBridge;
import io.vertx.grpc.common.GrpcMessage;
import io.vertx.grpc.common.WireFormat;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The second door of the engine role: the Vert.x TCP event-bus bridge (vertx-tcp-eventbus-bridge) on
 * {@code bridge.host:bridge.port}, off unless {@code bridge.port} is set, serving the same {@link EngineCall}s as
 * the gRPC door to clients that do not speak gRPC.
 *
 * <p>Wire contract (the bridge's framing: a 4-byte big-endian length, then UTF-8 JSON). A request is
 * <pre>{"type":"send", "address":"orbitkv.engine.v1.EngineService/Register", "replyAddress":"r-1",
 *  "headers":{"x-orbitkv-token":"..."}, "body":"&lt;base64 of the protobuf RegisterRequest&gt;"}</pre>
 * Its answer is {@code {"type":"message","address":"r-1","body":"<base64 of the protobuf RegisterReply>",...}} or a
 * failure frame {@code {"type":"err","address":"r-1","sourceAddress":...,"failureCode":13,
 * "failureType":"RECIPIENT_FAILURE","message":"INVALID_IDENTITY: ..."}}: the ErrorReason's number and the same
 * {@code "REASON: explanation"} text the gRPC door sends as its status message. A failure about a frame whose reply
 * address could not be read has no {@code address}. The event-bus addresses are the calls' gRPC full names: the
 * bridge's public API. The roles' own addresses are never reachable: the inbound permitted list ({@link #options})
 * names exactly the engine calls, nothing is permitted outbound, and {@link BridgeFrameGuard} checks both again
 * before the bridge sees a frame.
 *
 * <p>Design note (payload encoding): the body is the base64 of the request's protobuf bytes, decoded by the very
 * decoder the gRPC door uses ({@link EngineCall#decode}), then checked by the same {@link EngineOperations} and
 * {@link EngineRequests}. So one request means the same on both doors, down to unsigned 64-bit fields, unknown
 * fields and default values, and is refused with the same reason and text; clients reuse their generated protobuf
 * classes. The protobuf JSON mapping ({@code JsonFormat}) was not chosen: it is a second parser with its own
 * accept/reject rules (field names, enum names or numbers, 64-bit integers as strings, unknown fields refused),
 * so the same request could be refused differently, or only on one door; it also needs protobuf-java-util. Page
 * payloads never travel here (as on gRPC, only descriptors into the shared-memory pool); base64 costs 4/3 of a
 * control message's size, which {@code bridge.max-frame} allows for.
 *
 * <p>Design note (ownership and concurrency): this door owns the bridge and its server (bound on the engine role's
 * context, so every connection, consumer and operation runs on the role's event loop), one {@link BridgeFrameGuard}
 * per open connection (removed when it closes) and one local consumer per engine call. To put the guard in front of
 * the bridge's own frame parser, the bridge is created through a {@link VertxWrapper} that keeps the server the bridge
 * makes; its connection handler is then wrapped (a public NetServer getter/setter), so each new connection gets its
 * guard in the netty pipeline before the bridge installs its parser. The guard stamps a trusted connection header
 * on what it admits; a consumer serves only messages from an open connection and tells the guard when the
 * operation has completed (the per-connection outstanding limit). Closing the connection forgets its requests;
 * operations already running complete and their answers are dropped.
 */
final class BridgeEngineDoor {
    /** Set by the guard on admitted frames only (client headers are dropped): the bridge connection a request came on. */
    static final String CONNECTION_HEADER = "x-orbitkv-bridge-connection";
    private static final Logger LOG = LoggerFactory.getLogger(BridgeEngineDoor.class);

    private final Vertx vertx;
    private final EngineSettings settings;
    private final EngineAuthenticator authenticator;
    private final List<EngineCall<?, ?>> calls;
    private final Set<String> addresses = new LinkedHashSet<>();
    private final BridgeMetrics metrics;
    private final Map<Long, BridgeFrameGuard> connections = new HashMap<>();
    private final List<MessageConsumer<Object>> consumers = new ArrayList<>();
    private long nextConnectionId = 1;
    private TcpEventBusBridge bridge;
    private NetServer server;

    BridgeEngineDoor(Vertx vertx, EngineSettings settings, EngineAuthenticator authenticator, List<EngineCall<?, ?>> calls,
                     BridgeMetrics metrics) {
        this.vertx = vertx;
        this.settings = settings;
        this.authenticator = authenticator;
        this.calls = List.copyOf(calls);
        for (EngineCall<?, ?> call : calls) {
            addresses.add(call.fullName());
        }
        this.metrics = metrics;
    }

    /** The bridge's permissions: inbound exactly the engine calls' addresses, outbound nothing. */
    static BridgeOptions options(List<EngineCall<?, ?>> calls) {
        BridgeOptions options = new BridgeOptions();
        for (EngineCall<?, ?> call : calls) {
            options.addInboundPermitted(new PermittedOptions().setAddress(call.fullName()));
        }
        return options;
    }

    /** Registers a consumer per engine call, then listens. Call on the engine role's context. */
    Future<Void> listen() {
        List<Future<Void>> registered = new ArrayList<>();
        for (EngineCall<?, ?> call : calls) {
            MessageConsumer<Object> consumer = serve(call);
            consumers.add(consumer);
            registered.add(consumer.completion());
        }
        ServerCapture capture = new ServerCapture(vertx);
        bridge = TcpEventBusBridge.create(capture, options(calls), new NetServerOptions(), null);
        NetServer created = capture.server;
        if (created == null) {
            return Future.failedFuture(new IllegalStateException(
                    "this vertx-tcp-eventbus-bridge no longer creates its server through Vertx.createNetServer"));
        }
        Handler<NetSocket> bridgeConnections = created.connectHandler();
        created.connectHandler(socket -> accept(socket, bridgeConnections));
        return Future.all(registered)
                .compose(v -> bridge.listen(settings.bridgePort(), settings.bridgeHost()))
                .map(listening -> {
                    server = created;
                    return null;
                });
    }

    /** The port actually bound; -1 before listening. */
    int port() {
        return server == null ? -1 : server.actualPort();
    }

    /** Stops listening (open connections are closed) and withdraws the consumers. */
    Future<Void> close() {
        List<Future<Void>> closing = new ArrayList<>();
        for (MessageConsumer<Object> consumer : consumers) {
            closing.add(consumer.unregister());
        }
        if (bridge != null) {
            closing.add(bridge.close());
        }
        return Future.join(closing).mapEmpty();
    }

    private void accept(NetSocket socket, Handler<NetSocket> bridgeConnections) {
        if (!(socket instanceof NetSocketInternal internal)) {
            LOG.error("bridge connection without a netty pipeline ({}): closed", socket.getClass().getName());
            socket.close();
            return;
        }
        if (connections.size() >= settings.bridgeMaxConnections()) {
            metrics.rejected(ErrorReason.TOO_MANY_OUTSTANDING);
            String message = new OrbitException(ErrorReason.TOO_MANY_OUTSTANDING, "the bridge serves at most "
                    + settings.bridgeMaxConnections() + " connections at once (bridge.max-connections)").getMessage();
            socket.write(Buffer.buffer(BridgeFrameGuard.frameBytes(BridgeFrameGuard.failure(null, null,
                    ErrorReason.TOO_MANY_OUTSTANDING_VALUE, message)))).eventually(socket::close);
            return;
        }
        long id = nextConnectionId++;
        BridgeFrameGuard guard = new BridgeFrameGuard(id, authenticator, addresses, settings.bridgeMaxFrameBytes(),
                settings.bridgeMaxOutstandingPerConnection(), metrics, () -> {
                    connections.remove(id);
                    metrics.connections.decrementAndGet();
                });
        connections.put(id, guard);
        metrics.connections.incrementAndGet();
        guard.install(internal.channelHandlerContext().pipeline(), internal.channelHandlerContext().name());
        bridgeConnections.handle(socket);
    }

    private <Q, R> MessageConsumer<Object> serve(EngineCall<Q, R> call) {
        return vertx.eventBus().localConsumer(call.fullName(), message -> onRequest(call, message));
    }

    private <Q, R> void onRequest(EngineCall<Q, R> call, Message<Object> message) {
        BridgeFrameGuard connection = connectionOf(message);
        if (connection == null) {
            refuse(call, message, new OrbitException(ErrorReason.UNAUTHENTICATED_CALLER,
                    "engine calls on the event bus are served to open bridge connections only"));
            return;
        }
        Future<R> result;
        try {
            result = call.run(decode(call, message.body()));
        } catch (RuntimeException e) {
            result = Future.failedFuture(e);
        }
        result.onComplete(ar -> {
            connection.requestFinished();
            if (ar.succeeded()) {
                message.reply(Base64.getEncoder().encodeToString(
                        call.method().encoder().encode(ar.result(), WireFormat.PROTOBUF).payload().getBytes()));
            } else {
                refuse(call, message, ar.cause());
            }
        });
    }

    private BridgeFrameGuard connectionOf(Message<Object> message) {
        String id = message.headers().get(CONNECTION_HEADER);
        if (id == null) {
            return null;
        }
        try {
            BridgeFrameGuard guard = connections.get(Long.parseLong(id));
            return guard != null && guard.isOpen() ? guard : null;
        } catch (NumberFormatException e) {
            return null;
        }
    }

    /** The body: the base64 (RFC 4648 basic alphabet) of the request's protobuf bytes; "" is the empty message. */
    private <Q> Q decode(EngineCall<Q, ?> call, Object body) {
        if (!(body instanceof String text)) {
            throw new OrbitException(ErrorReason.MALFORMED_REQUEST, "the body must be a string, the base64 of the"
                    + " protobuf " + call.method().methodName() + " request; got " + kindOf(body));
        }
        if (text.length() / 4L * 3 > settings.maxMessageBytes() + 3) {
            throw oversized();
        }
        byte[] bytes;
        try {
            bytes = Base64.getDecoder().decode(text);
        } catch (IllegalArgumentException e) {
            throw new OrbitException(ErrorReason.MALFORMED_REQUEST, "the body is not base64: " + e.getMessage());
        }
        if (bytes.length > settings.maxMessageBytes()) {
            throw oversized();
        }
        return call.decode(GrpcMessage.message("identity", WireFormat.PROTOBUF, Buffer.buffer(bytes)));
    }

    private OrbitException oversized() {
        return new OrbitException(ErrorReason.OVERSIZED_REQUEST, "a message is larger than grpc.max-message ("
                + settings.maxMessageBytes() + " bytes)");
    }

    private static String kindOf(Object body) {
        return switch (body) {
            case null -> "none";
            case JsonObject ignored -> "a JSON object";
            case JsonArray ignored -> "a JSON array";
            case Number ignored -> "a number";
            case Boolean ignored -> "a boolean";
            default -> body.getClass().getSimpleName();
        };
    }

    private void refuse(EngineCall<?, ?> call, Message<Object> message, Throwable cause) {
        if (cause instanceof OrbitException orbit) {
            metrics.rejected(orbit.reason());
            message.fail(orbit.reason().getNumber(), orbit.getMessage());
        } else {
            metrics.internalError();
            LOG.warn("engine call {} on the bridge failed inside the Manager", call.method().methodName(), cause);
            message.fail(ErrorReason.ERROR_REASON_UNSPECIFIED_VALUE,
                    "internal error: " + cause.getClass().getSimpleName() + ": " + cause.getMessage());
        }
    }

    /** Keeps the server the bridge creates, so its connection handler can be wrapped (see the class note). */
    private static final class ServerCapture extends VertxWrapper {
        private NetServerInternal server;

        ServerCapture(Vertx vertx) {
            super((VertxInternal) vertx);
        }

        @Override
        public NetServerInternal createNetServer(NetServerOptions options) {
            server = super.createNetServer(options);
            return server;
        }
    }
}
