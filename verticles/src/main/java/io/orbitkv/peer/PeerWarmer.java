package io.orbitkv.peer;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.cluster.MembershipRole;
import io.orbitkv.model.MemberRecord;
import io.orbitkv.protocol.peer.PeerReleaseRequest;
import io.orbitkv.protocol.peer.PeerTransferGrpcClient;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.net.SocketAddress;
import io.vertx.grpc.client.GrpcClient;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Makes the paths to the other members ready before a fetch needs them, so that the first fetch from a member costs
 * about what later ones do: its control channel (one Release of lease 0, which no source grants, over the gRPC
 * client's pooled HTTP/2 connection: that opens the connection and completes the mutual TLS handshake) and
 * {@code peer.warm-connections} transfer connections ({@link PeerTransport#warm}).
 *
 * <p>Design note (bounds, failure, concurrency). Runs on the peer role's context: at start, for a member that joins,
 * restarts or changes its record, when etcd answers again, and every {@code peer.warm-interval-ms} (topping up what
 * idle timeouts closed; the probe also keeps the control connection from idling out). At most one round per member is
 * in flight, it opens at most {@code peer.warm-connections} connections, and it ends within
 * {@code peer.warm-timeout-ms} (an open still under way then is bounded by the client's connect timeout, and if it
 * succeeds later its connection is pooled like any other). A failure is counted and blocks nothing: a fetch that finds
 * no warm connection opens one as it would without warming. Nothing here holds a lease, a pin or a slot.
 */
final class PeerWarmer {
    private static final Logger LOG = LoggerFactory.getLogger(PeerWarmer.class);
    /** A lease id no source grants (ids start at 1): its release is a no-op answer, a pure probe. */
    static final long PROBE_LEASE_ID = 0;
    static final String TRANSFER_ENDPOINT = "peer-transfer";

    private final Vertx vertx;
    private final PeerSettings settings;
    private final MembershipRole membership;
    private final GrpcClient grpc;
    private final PeerTransport transport;
    private final Set<String> inFlight = new HashSet<>();
    /** Read by the metrics scrape (the gauge), written on the role's context. */
    private final Set<String> warm = java.util.concurrent.ConcurrentHashMap.newKeySet();
    private final Counter rounds;
    private final Counter controlFailures;
    private final Counter transferFailures;
    private long timer = -1;
    private boolean stopped;

    PeerWarmer(Vertx vertx, PeerSettings settings, MembershipRole membership, GrpcClient grpc, PeerTransport transport,
               MeterRegistry registry) {
        this.vertx = vertx;
        this.settings = settings;
        this.membership = membership;
        this.grpc = grpc;
        this.transport = transport;
        rounds = Counter.builder("orbitkv_peer_warm_rounds_total")
                .description("Warming rounds run for other members (control channel probe and transfer connections)")
                .register(registry);
        controlFailures = Counter.builder("orbitkv_peer_warm_failures_total").tag("part", "control")
                .description("Warming that failed, by part (control: the gRPC probe; transfer: a member's transfer "
                        + "connections short of peer.warm-connections at the round's end)").register(registry);
        transferFailures = Counter.builder("orbitkv_peer_warm_failures_total").tag("part", "transfer")
                .description("Warming that failed, by part (control: the gRPC probe; transfer: a member's transfer "
                        + "connections short of peer.warm-connections at the round's end)").register(registry);
        if (transport instanceof TcpPeerTransport tcp) {
            FunctionCounter.builder("orbitkv_peer_warmed_connections_total", tcp, TcpPeerTransport::connectionsWarmed)
                    .description("Transfer connections opened and verified ahead of need (warming)").register(registry);
            FunctionCounter.builder("orbitkv_peer_transfer_connections_opened_total", tcp,
                            TcpPeerTransport::connectionsOpened)
                    .description("Transfer connections a receive had to open because no idle one was ready")
                    .register(registry);
        }
        Gauge.builder("orbitkv_peer_warm_members", warm, Set::size)
                .description("Members whose last warming round ended with the control channel and every transfer "
                        + "connection ready").register(registry);
    }

    boolean enabled() {
        return settings.warmConnections() > 0;
    }

    /** Warms every current member now, and again every {@code peer.warm-interval-ms}. */
    void start() {
        if (!enabled() || stopped) {
            return;
        }
        warmAll();
        if (settings.warmIntervalMillis() > 0) {
            timer = vertx.setPeriodic(settings.warmIntervalMillis(), t -> warmAll());
        }
    }

    void stop() {
        stopped = true;
        if (timer >= 0) {
            vertx.cancelTimer(timer);
        }
    }

    void warmAll() {
        membership.members().values().forEach(this::warm);
    }

    /** A member left: it is no longer counted warm. */
    void forget(MemberRecord member) {
        warm.remove(member.id());
    }

    /** One bounded round for {@code member}; skipped for this Manager, a member without a peer port, or one in flight. */
    void warm(MemberRecord member) {
        String id = member.id();
        String control = member.endpoints().get(PeerRequester.PEER_ENDPOINT);
        if (stopped || !enabled() || id.equals(membership.memberId()) || control == null || !inFlight.add(id)) {
            return;
        }
        rounds.increment();
        long timeout = settings.warmTimeoutMillis();
        int colon = control.lastIndexOf(':');
        PeerTransferGrpcClient client = PeerTransferGrpcClient.create(grpc, SocketAddress.inetSocketAddress(
                Integer.parseInt(control.substring(colon + 1)), control.substring(0, colon)));
        Future<Boolean> probe = client.release(PeerReleaseRequest.newBuilder().setLeaseId(PROBE_LEASE_ID).build())
                .timeout(timeout, TimeUnit.MILLISECONDS).map(reply -> true)
                .otherwise(e -> {
                    controlFailures.increment();
                    LOG.debug("warming the control channel to {} failed: {}", id, e.toString());
                    return false;
                });
        String transfer = member.endpoints().get(TRANSFER_ENDPOINT);
        Future<Boolean> connections = transfer == null ? Future.succeededFuture(true)
                : transport.warm(transfer, id, settings.warmConnections()).timeout(timeout, TimeUnit.MILLISECONDS)
                        .map(ready -> ready >= settings.warmConnections())
                        .otherwise(e -> false)
                        .andThen(ar -> {
                            if (!ar.result()) {
                                transferFailures.increment();
                                LOG.debug("warming the transfer connections to {} ended short", id);
                            }
                        });
        Future.join(probe, connections).onComplete(ar -> {
            inFlight.remove(id);
            if (probe.result() && connections.result() && membership.members().containsKey(id)) {
                warm.add(id);
            } else {
                warm.remove(id);
            }
        });
    }
}
