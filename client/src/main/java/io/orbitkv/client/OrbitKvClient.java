package io.orbitkv.client;

import io.orbitkv.protocol.engine.*;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.HttpVersion;
import io.vertx.core.net.SocketAddress;
import io.vertx.core.transport.Transport;
import io.vertx.grpc.client.GrpcClient;
import io.vertx.grpc.client.GrpcClientOptions;
import io.vertx.grpc.common.GrpcStatus;
import io.vertx.grpc.common.ServiceMethod;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * Engine-side connection to a Manager over gRPC (Unix socket or TCP). Every call carries the Manager's engine token.
 *
 * <p>Design note: the client owns its Vertx (with a native transport, needed for Unix sockets) and one HTTP/2
 * connection; {@link #close()} closes both. Calls return Futures; plain threads may {@code await()} them. Refusals
 * come back as {@link OrbitKvException} with the Manager's typed reason.
 */
public final class OrbitKvClient implements AutoCloseable {
    public static final String TOKEN_HEADER = "x-orbitkv-token";

    private final Vertx vertx;
    private final GrpcClient grpc;
    private final SocketAddress address;
    private final String token;

    private OrbitKvClient(Vertx vertx, GrpcClient grpc, SocketAddress address, String token) {
        this.vertx = vertx;
        this.grpc = grpc;
        this.address = address;
        this.token = token;
    }

    public static OrbitKvClient connectUnix(Path socket, String token) {
        return connect(SocketAddress.domainSocketAddress(socket.toString()), token);
    }

    public static OrbitKvClient connectTcp(String host, int port, String token) {
        return connect(SocketAddress.inetSocketAddress(port, host), token);
    }

    /** Reads the engine token the Manager wrote into its data directory. */
    public static String readToken(Path tokenFile) throws IOException {
        return Files.readString(tokenFile).strip();
    }

    private static OrbitKvClient connect(SocketAddress address, String token) {
        // epoll: Vert.x 5.0.7's io_uring transport refuses Unix domain sockets.
        Vertx vertx = Vertx.builder().with(new VertxOptions().setPreferNativeTransport(true).setEventLoopPoolSize(1))
                .withTransport(Transport.EPOLL).build();
        if (address.isDomainSocket() && !vertx.isNativeTransportEnabled()) {
            vertx.close();
            throw new IllegalStateException("Unix sockets need a native transport: " + vertx.unavailableNativeTransportCause());
        }
        GrpcClient grpc = GrpcClient.client(vertx, new GrpcClientOptions().setMaxMessageSize(64L << 20),
                new HttpClientOptions().setProtocolVersion(HttpVersion.HTTP_2).setHttp2ClearTextUpgrade(false));
        return new OrbitKvClient(vertx, grpc, address, token);
    }

    Vertx vertx() {
        return vertx;
    }

    /**
     * One raw unary call with the token header; a non-OK status becomes an OrbitKvException. The typed methods of
     * {@link EngineSession} cover the API; this is for tools and tests that need to send exactly what they want.
     */
    public <Q, R> Future<R> call(ServiceMethod<R, Q> method, Q request) {
        return grpc.request(address, method).compose(req -> {
            req.headers().set(TOKEN_HEADER, token);
            return req.end(request).compose(v -> req.response()).compose(resp -> resp.last().recover(failure -> {
                GrpcStatus status = resp.status();
                if (status == null || status == GrpcStatus.OK) {
                    return Future.failedFuture(failure);
                }
                String message = resp.statusMessage() == null ? status.name() : resp.statusMessage();
                // A refusal without a payload travels as a trailers-only response: the reason may then sit in the
                // headers; the status message always starts with it ("REASON: explanation").
                String reasonName = resp.trailers().get("orbitkv-error-reason");
                if (reasonName == null) {
                    reasonName = resp.headers().get("orbitkv-error-reason");
                }
                if (reasonName == null && message.indexOf(':') > 0) {
                    reasonName = message.substring(0, message.indexOf(':'));
                }
                ErrorReason reason = ErrorReason.ERROR_REASON_UNSPECIFIED;
                if (reasonName != null) {
                    try {
                        reason = ErrorReason.valueOf(reasonName);
                    } catch (IllegalArgumentException unknown) {
                        // A newer Manager's reason, or not a Manager refusal: UNSPECIFIED; the message explains.
                    }
                }
                return Future.failedFuture(new OrbitKvException(reason, status.name(), message));
            }));
        });
    }

    public Future<PingReply> ping() {
        return call(EngineServiceGrpcClient.Ping, PingRequest.getDefaultInstance());
    }

    /** Registers an instance, maps the pool, and starts heartbeats. */
    public Future<EngineSession> register(InstanceIdentity identity, InstanceRole role) {
        return register(RegisterRequest.newBuilder().setIdentity(identity).setRole(role).build());
    }

    public Future<EngineSession> register(RegisterRequest request) {
        return call(EngineServiceGrpcClient.Register, request).compose(reply -> vertx.executeBlocking(
                () -> new EngineSession(this, identityOf(request), reply)));
    }

    private static InstanceIdentity identityOf(RegisterRequest request) {
        return request.getIdentity();
    }

    @Override
    public void close() {
        try {
            grpc.close().await(10, TimeUnit.SECONDS);
        } catch (Exception ignored) {
            // Closing anyway.
        }
        try {
            vertx.close().await(10, TimeUnit.SECONDS);
        } catch (Exception e) {
            throw new IllegalStateException("client did not close in time", e);
        }
    }
}
