package io.orbitkv.engine;

import io.netty.channel.Channel;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import io.orbitkv.common.OrbitException;
import io.orbitkv.engine.EngineAuthenticator.Caller;
import io.orbitkv.protocol.engine.ErrorReason;
import io.vertx.core.Future;
import io.vertx.core.Handler;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpConnection;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.core.net.SocketAddress;
import io.vertx.core.net.impl.ConnectionBase;
import io.vertx.grpc.common.GrpcMessage;
import io.vertx.grpc.common.GrpcStatus;
import io.vertx.grpc.common.MessageSizeOverflowException;
import io.vertx.grpc.server.GrpcProtocol;
import io.vertx.grpc.server.GrpcServer;
import io.vertx.grpc.server.GrpcServerOptions;
import io.vertx.grpc.server.GrpcServerRequest;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalInt;
import java.util.zip.GZIPInputStream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The gRPC door of the engine role: a Vert.x gRPC server on the Unix socket and on TCP, each call authenticated by
 * {@link EngineAuthenticator}, decoded strictly, handed to {@link EngineOperations}, and answered with its reply or a
 * typed status (gRPC status, message {@code "REASON: explanation"}, trailer {@value #REASON_TRAILER}).
 *
 * <p>Design note (strict decoding): vertx-grpc-server 5.0.7 decodes a unary request in
 * {@code GrpcServerRequestImpl.handler}, and on a body that is not a valid message it cancels the stream (the client
 * sees CANCELLED, nothing is counted); its deframer throws out of the HTTP data handler on a compressed frame without
 * a {@code grpc-encoding} (the stream then never ends). So this door takes the raw messages instead
 * ({@code messageHandler}) and decodes them itself with the method's decoder, gunzips within the message limit, and
 * feeds the deframer through a {@link FrameGuard} that refuses bad frame flags first. A unary call must carry exactly
 * one message, and is answered when its request ends: zero or two messages, a truncated frame, an undecodable body or
 * an unsupported encoding is {@code INVALID_ARGUMENT / MALFORMED_REQUEST}, counted; an oversized frame is
 * {@code OVERSIZED_REQUEST}. Only plain gRPC over HTTP/2 is served (no gRPC-Web, no transcoding).
 *
 * <p>Design note (the Unix socket, race-free): the socket is bound inside a fresh directory created mode 0700 in the
 * socket's parent (mkdir applies the mode atomically; the umask can only remove bits), chmod-ed 0600 there, then
 * renamed onto the configured path, and the directory removed. Between bind and chmod no other user can reach it
 * (they cannot traverse the directory), and at its public path it is 0600 from its first moment. Setting the umask
 * around bind would also work for the socket, but the umask is process-wide: every file another thread creates
 * meanwhile would get it too. (The bind path is about 26 bytes longer than the configured one: a configured path
 * too close to the 107-byte limit of Unix sockets is refused at start, naming the limit.) Callers on the Unix socket
 * are checked by {@code SO_PEERCRED} (netty's {@link EpollDomainSocketChannel#peerCredentials()}, read per call from
 * the connection's channel) against the allowed uids, before the token.
 *
 * <p>Confined to the engine role's event loop (both servers are created on its context).
 */
final class GrpcEngineDoor {
    static final String TOKEN_HEADER = "x-orbitkv-token";
    static final String REASON_TRAILER = "orbitkv-error-reason";
    private static final Logger LOG = LoggerFactory.getLogger(GrpcEngineDoor.class);

    private enum Door { UNIX, TCP }

    /** The HTTP request whose gRPC call is being dispatched right now (see {@link #arrive}). */
    private record Arrival(HttpServerRequest request, Door door) {}

    private final Vertx vertx;
    private final EngineSettings settings;
    private final EngineAuthenticator authenticator;
    private final EngineMetrics metrics;
    private final GrpcServer grpc;
    private final List<HttpServer> servers = new ArrayList<>();
    private HttpServer tcpServer;
    private Arrival arriving;

    GrpcEngineDoor(Vertx vertx, EngineSettings settings, EngineAuthenticator authenticator, List<EngineCall<?, ?>> calls,
                   EngineMetrics metrics) {
        this.vertx = vertx;
        this.settings = settings;
        this.authenticator = authenticator;
        this.metrics = metrics;
        this.grpc = GrpcServer.server(vertx, new GrpcServerOptions().setMaxMessageSize(settings.maxMessageBytes())
                .removeEnabledProtocol(GrpcProtocol.WEB).removeEnabledProtocol(GrpcProtocol.WEB_TEXT)
                .removeEnabledProtocol(GrpcProtocol.TRANSCODING));
        for (EngineCall<?, ?> call : calls) {
            bind(call);
        }
    }

    /** Listens on the Unix socket, then on TCP. */
    Future<Void> listen() {
        HttpServerOptions options = new HttpServerOptions().setUseAlpn(false).setHttp2ClearTextEnabled(true);
        Future<HttpServer> unix = vertx.executeBlocking(() -> PrivateSocket.prepare(settings.unixSocket()))
                .compose(socket -> vertx.createHttpServer(options).requestHandler(r -> arrive(r, Door.UNIX))
                        .listen(SocketAddress.domainSocketAddress(socket.bindPath().toString()))
                        .compose(server -> vertx.executeBlocking(() -> {
                            socket.publish();
                            return server;
                        }).recover(failure -> server.close().transform(ignored -> Future.failedFuture(failure))))
                        .onFailure(failure -> socket.discard()));
        return unix.compose(server -> {
            servers.add(server);
            return vertx.createHttpServer(options).requestHandler(r -> arrive(r, Door.TCP))
                    .listen(settings.tcpPort(), settings.tcpHost());
        }).map(server -> {
            servers.add(server);
            tcpServer = server;
            return null;
        });
    }

    int tcpPort() {
        return tcpServer == null ? -1 : tcpServer.actualPort();
    }

    /** Stops listening and removes the socket file. */
    Future<Void> close() {
        List<Future<Void>> closing = new ArrayList<>();
        for (HttpServer server : servers) {
            closing.add(server.close());
        }
        return Future.join(closing).eventually(() -> vertx.executeBlocking(() -> {
            Files.deleteIfExists(settings.unixSocket());
            return null;
        })).mapEmpty();
    }

    /**
     * Remembers which request (and door) a call handler is about to be dispatched for: the gRPC server dispatches
     * synchronously inside {@code handle}, and its request object does not expose the HTTP request it reads from.
     */
    private void arrive(HttpServerRequest request, Door door) {
        arriving = new Arrival(request, door);
        try {
            grpc.handle(request);
        } finally {
            arriving = null;
        }
    }

    private <Q, R> void bind(EngineCall<Q, R> call) {
        grpc.callHandler(call.method(), request -> {
            Arrival arrival = arriving;
            if (arrival == null || arrival.request().headers() != request.headers()) {
                throw new IllegalStateException("gRPC call dispatched outside its HTTP request");
            }
            new UnaryCall<>(call, request, arrival).start();
        });
    }

    /** One unary call from arrival to its one answer. */
    private final class UnaryCall<Q, R> {
        private final EngineCall<Q, R> call;
        private final GrpcServerRequest<Q, R> request;
        private final Arrival arrival;
        private final FrameGuard guard;
        private boolean answered;
        private Q message;

        UnaryCall(EngineCall<Q, R> call, GrpcServerRequest<Q, R> request, Arrival arrival) {
            this.call = call;
            this.request = request;
            this.arrival = arrival;
            this.guard = new FrameGuard(arrival.request().getHeader("grpc-encoding") != null);
        }

        @SuppressWarnings("unchecked")
        void start() {
            // The gRPC request deframes the HTTP body it was handed as a Handler<Buffer>; the guard sits in between.
            if (!(request instanceof Handler<?> deframer)) {
                throw new IllegalStateException("this vertx-grpc-server no longer deframes through its request");
            }
            arrival.request().handler(chunk -> {
                if (answered) {
                    return;
                }
                String problem = guard.check(chunk);
                if (problem != null) {
                    refuse(new OrbitException(ErrorReason.MALFORMED_REQUEST, problem));
                    return;
                }
                ((Handler<Buffer>) deframer).handle(chunk);
            });
            // A failure of the request stream itself (not a reset: that goes to the response): answer it, typed.
            request.exceptionHandler(failure -> refuse(new OrbitException(ErrorReason.MALFORMED_REQUEST,
                    "the request stream failed: " + failure)));
            try {
                authenticator.check(callerOf(arrival));
            } catch (OrbitException refused) {
                refuse(refused);
                return;
            }
            request.invalidMessageHandler(invalid -> refuse(invalid instanceof MessageSizeOverflowException
                    ? new OrbitException(ErrorReason.OVERSIZED_REQUEST, "a message is larger than grpc.max-message ("
                            + settings.maxMessageBytes() + " bytes)")
                    : new OrbitException(ErrorReason.MALFORMED_REQUEST, "invalid gRPC message: " + invalid.getMessage())));
            request.messageHandler(this::onMessage);
            request.endHandler(v -> onEnd());
        }

        private void onMessage(GrpcMessage received) {
            if (answered) {
                return;
            }
            if (message != null) {
                refuse(new OrbitException(ErrorReason.MALFORMED_REQUEST, "a unary call carries exactly one message"));
                return;
            }
            try {
                message = call.decode(identityEncoded(received));
            } catch (OrbitException e) {
                refuse(e);
            } catch (Exception e) {
                refuse(new OrbitException(ErrorReason.MALFORMED_REQUEST, "the body is not a valid "
                        + call.method().methodName() + " request: " + e.getMessage()));
            }
        }

        private void onEnd() {
            if (answered) {
                return;
            }
            if (guard.midFrame()) {
                refuse(new OrbitException(ErrorReason.MALFORMED_REQUEST, "the request ended inside a gRPC frame (truncated body)"));
                return;
            }
            if (message == null) {
                refuse(new OrbitException(ErrorReason.MALFORMED_REQUEST, "the request carries no message"));
                return;
            }
            call.run(message).onComplete(ar -> {
                if (answered) {
                    return;
                }
                if (ar.succeeded()) {
                    answered = true;
                    request.response().end(ar.result());
                } else {
                    refuse(ar.cause());
                }
            });
        }

        private GrpcMessage identityEncoded(GrpcMessage received) throws IOException {
            return switch (received.encoding()) {
                case "identity" -> received;
                case "gzip" -> GrpcMessage.message("identity", received.format(), gunzip(received.payload()));
                default -> throw new OrbitException(ErrorReason.MALFORMED_REQUEST, "unsupported grpc-encoding '"
                        + received.encoding() + "' (identity or gzip)");
            };
        }

        /** Inflates at most the message limit: a small body that inflates beyond it is refused, not buffered. */
        private Buffer gunzip(Buffer compressed) throws IOException {
            long limit = settings.maxMessageBytes();
            try (InputStream in = new GZIPInputStream(new ByteArrayInputStream(compressed.getBytes()))) {
                byte[] inflated = in.readNBytes((int) Math.min(Integer.MAX_VALUE - 8, limit + 1));
                if (inflated.length > limit) {
                    throw new OrbitException(ErrorReason.OVERSIZED_REQUEST, "a gzip message inflates beyond grpc.max-message ("
                            + limit + " bytes)");
                }
                return Buffer.buffer(inflated);
            }
        }

        private void refuse(Throwable cause) {
            if (answered) {
                return;
            }
            answered = true;
            if (cause instanceof OrbitException orbit) {
                metrics.rejected(orbit.reason());
                request.response().trailers().set(REASON_TRAILER, orbit.reason().name());
                request.response().status(statusOf(orbit.reason())).statusMessage(orbit.getMessage()).end();
            } else {
                metrics.internalErrors.increment();
                LOG.warn("engine call {} failed inside the Manager", call.method().methodName(), cause);
                request.response().status(GrpcStatus.INTERNAL)
                        .statusMessage("internal error: " + cause.getClass().getSimpleName() + ": " + cause.getMessage()).end();
            }
        }
    }

    private static Caller callerOf(Arrival arrival) {
        String token = arrival.request().getHeader(TOKEN_HEADER);
        return arrival.door() == Door.UNIX ? Caller.unixPeer(token, peerUid(arrival.request().connection()))
                : Caller.withoutPeer(token);
    }

    /** The caller's uid by SO_PEERCRED, or empty when this connection has no readable peer credentials. */
    static OptionalInt peerUid(HttpConnection connection) {
        if (connection instanceof ConnectionBase base) {
            Channel channel = base.channel();
            if (channel instanceof EpollDomainSocketChannel domain) {
                try {
                    return OptionalInt.of(domain.peerCredentials().uid());
                } catch (IOException e) {
                    return OptionalInt.empty();
                }
            }
        }
        return OptionalInt.empty();
    }

    static GrpcStatus statusOf(ErrorReason reason) {
        return switch (reason) {
            case UNAUTHENTICATED_CALLER -> GrpcStatus.UNAUTHENTICATED;
            case MALFORMED_REQUEST, INVALID_IDENTITY, DESCRIPTOR_OUTSIDE_POOL, INVALID_DEMAND, REVISION_BACKWARDS,
                 INVALID_DESTINATION -> GrpcStatus.INVALID_ARGUMENT;
            case OVERSIZED_REQUEST, POOL_EXHAUSTED, TOO_MANY_OUTSTANDING, BUDGET_EXCEEDED, TOO_MANY_SESSIONS,
                 TOO_MANY_ANSWERED ->
                    GrpcStatus.RESOURCE_EXHAUSTED;
            case UNKNOWN_INSTANCE, UNKNOWN_LEASE, UNKNOWN_TICKET, UNKNOWN_PUBLISH, UNKNOWN_DESTINATION -> GrpcStatus.NOT_FOUND;
            case ROUTE_UNAVAILABLE -> GrpcStatus.FAILED_PRECONDITION;
            case RESTORE_FAILED -> GrpcStatus.ABORTED;
            case STALE_SESSION_EPOCH, DUPLICATE_OPERATION -> GrpcStatus.FAILED_PRECONDITION;
            case NAMESPACE_MISMATCH, PEER_NOT_ALLOWED -> GrpcStatus.PERMISSION_DENIED;
            case SHUTTING_DOWN -> GrpcStatus.UNAVAILABLE;
            default -> GrpcStatus.UNKNOWN;
        };
    }

    /**
     * Follows the gRPC framing of a request body (1 flag byte, 4 length bytes, payload) and refuses a frame whose flag
     * the deframer would choke on: anything but 0 (plain) or 1 (compressed, and only with a {@code grpc-encoding}).
     */
    static final class FrameGuard {
        private final boolean encodingDeclared;
        private int headerBytesSeen;
        private long lengthSoFar;
        private long payloadLeft;

        FrameGuard(boolean encodingDeclared) {
            this.encodingDeclared = encodingDeclared;
        }

        /** Null when the chunk's frame headers are acceptable, otherwise what is wrong. */
        String check(Buffer chunk) {
            int i = 0;
            int length = chunk.length();
            while (i < length) {
                if (payloadLeft > 0) {
                    long skip = Math.min(payloadLeft, length - i);
                    payloadLeft -= skip;
                    i += (int) skip;
                    continue;
                }
                byte b = chunk.getByte(i++);
                if (headerBytesSeen == 0) {
                    if (b != 0 && b != 1) {
                        return "gRPC frame flag " + (b & 0xff) + " is neither 0 nor 1";
                    }
                    if (b == 1 && !encodingDeclared) {
                        return "a compressed gRPC frame without a grpc-encoding header";
                    }
                    lengthSoFar = 0;
                } else {
                    lengthSoFar = lengthSoFar << 8 | (b & 0xff);
                }
                if (++headerBytesSeen == 5) {
                    headerBytesSeen = 0;
                    payloadLeft = lengthSoFar;
                }
            }
            return null;
        }

        /** Whether the body so far stops inside a frame (a header or a payload). */
        boolean midFrame() {
            return headerBytesSeen > 0 || payloadLeft > 0;
        }
    }

    /**
     * The Unix socket while it is being bound: a private 0700 directory beside the configured path, the bind path
     * inside it, then {@link #publish} (0600, rename onto the configured path) or {@link #discard}.
     */
    record PrivateSocket(Path target, Path directory, Path bindPath) {
        /** sun_path holds 108 bytes including the terminating NUL. */
        static final int MAX_SOCKET_PATH_BYTES = 107;

        static PrivateSocket prepare(Path target) throws IOException {
            Path parent = target.toAbsolutePath().getParent();
            Files.createDirectories(parent);
            Path directory = Files.createTempDirectory(parent, ".bind-",
                    PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
            Path bindPath = directory.resolve("engine.sock");
            if (bindPath.toString().getBytes(StandardCharsets.UTF_8).length > MAX_SOCKET_PATH_BYTES) {
                Files.delete(directory);
                throw new IOException("the engine socket " + target + " is too deep: binding it needs "
                        + bindPath.toString().length() + " bytes of path, Unix sockets allow " + MAX_SOCKET_PATH_BYTES
                        + " (choose a shorter grpc.unix-socket)");
            }
            return new PrivateSocket(target, directory, bindPath);
        }

        void publish() throws IOException {
            Files.setPosixFilePermissions(bindPath, PosixFilePermissions.fromString("rw-------"));
            Files.move(bindPath, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            Files.delete(directory);
        }

        void discard() {
            try {
                Files.deleteIfExists(bindPath);
                Files.deleteIfExists(directory);
            } catch (IOException e) {
                LOG.warn("could not remove the socket bind directory {}", directory, e);
            }
        }
    }
}
