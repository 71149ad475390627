package io.orbitkv.peer;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.model.AllocateResult;
import io.orbitkv.model.MemberDirectory;
import io.orbitkv.model.MemberRecord;
import com.google.protobuf.ByteString;
import io.orbitkv.model.SlotGrant;
import io.orbitkv.model.StateKey;
import io.orbitkv.protocol.peer.PeerGrant;
import io.orbitkv.protocol.peer.PeerReleaseRequest;
import io.orbitkv.protocol.peer.PeerReserveRequest;
import io.orbitkv.protocol.peer.PeerTransferGrpcClient;
import io.orbitkv.storage.StorageProxy;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.net.SocketAddress;
import io.vertx.grpc.client.GrpcClient;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Makes the paths to the other members ready before a fetch needs them, so that the first fetch from a member costs
 * about what later ones do: {@code peer.warm-connections} transfer connections ({@link PeerTransport#warm}), then a
 * probe lease over the control channel (the gRPC client's pooled HTTP/2 connection, opened and mutually authenticated
 * by it) and one of those connections, so the code a fetch runs on both sides has run once too: the source allocates
 * one {@value PeerSource#PROBE_PAGE_BYTES}-byte page for it and grants it with its checksum, this side allocates a slot,
 * receives the page into it, checks its CRC32C, frees the slot and releases the lease, whose end frees the source's
 * page. Neither side seals it, pins anything or charges credits, and a probe never evicts: it takes a slot only while
 * a quarter of the pool is free ({@link PeerSource#roomForProbe}), i.e. on a Manager whose storage commands may still
 * be cold; a Manager with a full pool has run them for its own engines.
 *
 * <p>Design note (bounds, failure, concurrency). Runs on the peer role's context: at start, for a member that joins,
 * restarts or changes its record (a round for each member then), when etcd answers again, and every {@code peer.warm-interval-ms} (topping up what
 * idle timeouts closed; the probe also keeps the control connection from idling out). At most one round per member is
 * in flight, it opens at most {@code peer.warm-connections} connections, and it ends within
 * {@code peer.warm-timeout-ms} (an open still under way then is bounded by the client's connect timeout, and if it
 * succeeds later its connection is pooled like any other). A failure is counted and blocks nothing: a fetch that finds
 * no warm connection opens one as it would without warming. A round ends holding nothing: its slot is aborted (after
 * the fence when the transfer failed), its lease released (or expired at the source within
 * {@value PeerSource#PROBE_LEASE_MS} ms).
 */
final class PeerWarmer {
    private static final Logger LOG = LoggerFactory.getLogger(PeerWarmer.class);
    static final String TRANSFER_ENDPOINT = "peer-transfer";

    private final Vertx vertx;
    private final PeerSettings settings;
    private final MemberDirectory membership;
    private final GrpcClient grpc;
    private final PeerTransport transport;
    private final StorageProxy storage;
    private final Supplier<MemorySegment> pool;
    static final long RETRY_MS = 1_000;
    /** The largest probe page this requester accepts (a source sends {@value PeerSource#PROBE_PAGE_BYTES} bytes). */
    static final long PROBE_PAGE_MAX_BYTES = 64 << 10;

    private final Set<String> inFlight = new HashSet<>();
    /** Members with a retry pending, and the delay of their next one (doubling up to the interval; reset when warm). */
    private final java.util.Map<String, Long> retryDelayMs = new java.util.HashMap<>();
    private final Set<String> retrying = new HashSet<>();
    /** Read by the metrics scrape (the gauge), written on the role's context. */
    private final Set<String> warm = java.util.concurrent.ConcurrentHashMap.newKeySet();
    private final Counter rounds;
    private final Counter controlFailures;
    private final Counter transferFailures;
    private final Counter probePages;
    private long timer = -1;
    private boolean stopped;

    PeerWarmer(Vertx vertx, PeerSettings settings, MemberDirectory membership, GrpcClient grpc, PeerTransport transport,
               StorageProxy storage, Supplier<MemorySegment> pool, MeterRegistry registry) {
        this.vertx = vertx;
        this.settings = settings;
        this.membership = membership;
        this.grpc = grpc;
        this.transport = transport;
        this.storage = storage;
        this.pool = pool;
        probePages = Counter.builder("orbitkv_peer_warm_probe_pages_total")
                .description("Probe pages received into a slot allocated for them, checked against the source's "
                        + "CRC32C and freed again (never sealed)").register(registry);
        rounds = Counter.builder("orbitkv_peer_warm_rounds_total")
                .description("Warming rounds run for other members (control channel probe and transfer connections)")
                .register(registry);
        controlFailures = Counter.builder("orbitkv_peer_warm_failures_total").tag("part", "control")
                .description("Warming that failed, by part (control: the probe lease; transfer: a member's transfer "
                        + "connections short of peer.warm-connections at the round's end)").register(registry);
        transferFailures = Counter.builder("orbitkv_peer_warm_failures_total").tag("part", "transfer")
                .description("Warming that failed, by part (control: the probe lease; transfer: a member's transfer "
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

    /** The members changed: members that left are no longer counted warm; the others get a round. */
    void onMembership() {
        warm.removeIf(id -> !membership.members().containsKey(id));
        retryDelayMs.keySet().removeIf(id -> !membership.members().containsKey(id));
        warmAll();
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
        String transfer = member.endpoints().get(TRANSFER_ENDPOINT);
        Future<Integer> opened = transfer == null ? Future.succeededFuture(0)
                : transport.warm(transfer, id, settings.warmConnections()).timeout(timeout, TimeUnit.MILLISECONDS)
                        .otherwise(e -> 0);
        Future<Boolean> connections = opened.map(ready -> transfer == null || ready >= settings.warmConnections())
                .andThen(ar -> {
                    if (!ar.result()) {
                        transferFailures.increment();
                        LOG.debug("warming the transfer connections to {} ended short", id);
                    }
                });
        // Then a probe lease (no pages) over the warm paths: the source's reserve handler and transfer server and
        // this side's reserve, receive and transfer classes run once before a fetch needs them.
        Future<Boolean> probe = opened.compose(ready -> client.reserve(PeerReserveRequest.newBuilder()
                        .setNamespace(ByteString.copyFrom(new byte[StateKey.NAMESPACE_BYTES]))
                        .setSourceIncarnation(member.incarnation()).setRequesterIncarnation(membership.incarnation())
                        .setLeaseMs(timeout).build())
                .timeout(timeout, TimeUnit.MILLISECONDS)
                .compose(reply -> {
                    if (!reply.hasGrant()) {
                        return Future.failedFuture("the probe was refused: " + reply.getReject().getReason());
                    }
                    PeerGrant grant = reply.getGrant();
                    if (ready < Math.max(1, settings.transferLoops())) {
                        // a loop without a warm connection would open one for it: the lease goes unused
                        client.release(PeerReleaseRequest.newBuilder().setLeaseId(grant.getLeaseId()).build());
                        return Future.succeededFuture(true);
                    }
                    if (grant.getPagesCount() == 0) { // the source had no room for a probe page, or exposes none
                        return transport.receive(grant.getTransferEndpoint(), grant.getLeaseId(),
                                grant.getTransferToken().toByteArray(), List.of(), Duration.ofMillis(timeout))
                                .completion().map(v -> true);
                    }
                    return probePage(client, grant, id, timeout).eventually(() -> client.release(
                            PeerReleaseRequest.newBuilder().setLeaseId(grant.getLeaseId()).build())
                            .timeout(timeout, TimeUnit.MILLISECONDS));
                }))
                .otherwise(e -> {
                    controlFailures.increment();
                    LOG.debug("the warming probe to {} failed: {}", id, e.toString());
                    return false;
                });
        Future.join(probe, connections).onComplete(ar -> {
            inFlight.remove(id);
            if (probe.result() && connections.result() && membership.members().containsKey(id)) {
                warm.add(id);
                retryDelayMs.remove(id);
            } else {
                warm.remove(id);
                retryLater(id);
            }
        });
    }

    /**
     * The probe lease's page, received as a fetch receives one: a slot allocated here (the storage role's allocate),
     * the transfer into it with the transport's checksum, the CRC32C compared with the grant's, then the slot aborted
     * (never sealed: nothing of it becomes resident). A failed transfer is fenced before the slot goes. Without ample
     * free room in the pool ({@link PeerSource#roomForProbe}) the page lands in a scratch buffer instead. The caller
     * releases the lease.
     */
    private Future<Boolean> probePage(PeerTransferGrpcClient client, PeerGrant grant, String member, long timeout) {
        long length = grant.getPages(0).getLengthBytes();
        if (grant.getPagesCount() != 1 || length < 1 || length > PROBE_PAGE_MAX_BYTES) {
            return Future.failedFuture("the probe lease is not one page of at most " + PROBE_PAGE_MAX_BYTES + " bytes");
        }
        Future<AllocateResult> allocation = storage.stats().compose(stats -> !PeerSource.roomForProbe(stats)
                ? Future.succeededFuture()
                : storage.allocate(PeerRequester.PEER_INSTANCE, List.of(PeerSource.probeKey(membership.memberId()
                        + ">" + member + ":" + grant.getLeaseId())), List.of(length)));
        return allocation.compose(allocated -> {
            SlotGrant slot = allocated == null ? null : allocated.slots().getFirst();
            MemorySegment destination = slot != null && slot.allocated()
                    ? pool.get().asSlice(slot.ref().offset(), length) : Arena.ofAuto().allocate(length, 4096);
            PeerTransport.Receive receive = transport.receive(grant.getTransferEndpoint(), grant.getLeaseId(),
                    grant.getTransferToken().toByteArray(), List.of(new PeerTransport.Destination(destination)),
                    Duration.ofMillis(timeout));
            return receive.completion().transform(ar -> {
                boolean intact = ar.succeeded() && crc32c(receive, destination) == grant.getPages(0).getCrc32C();
                Future<Void> fenced = ar.succeeded() ? Future.succeededFuture() : receive.fence();
                Future<Integer> freed = allocated == null ? Future.succeededFuture(0)
                        : fenced.compose(v -> storage.abort(PeerRequester.PEER_INSTANCE, allocated.publishId()));
                return freed.transform(f -> {
                    if (ar.failed()) {
                        return Future.failedFuture(ar.cause());
                    }
                    if (!intact) {
                        return Future.failedFuture("the probe page's CRC32C does not match its grant");
                    }
                    probePages.increment();
                    return Future.succeededFuture(true);
                });
            });
        });
    }

    /** The received page's CRC32C: the transport's, or computed here when it computed none. */
    private static int crc32c(PeerTransport.Receive receive, MemorySegment page) {
        List<Integer> received = receive.receivedChecksums();
        if (received != null && received.size() == 1) {
            return received.getFirst();
        }
        java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
        crc.update(page.asByteBuffer());
        return (int) crc.getValue();
    }

    /**
     * A round that failed is tried again after {@value #RETRY_MS} ms, then twice as long each time up to the interval
     * (one retry pending per member), not only at the next interval: the usual cause is transient (the member's role
     * still starting, or its membership not showing this Manager yet, so it refuses the probe).
     */
    private void retryLater(String id) {
        if (stopped || !retrying.add(id)) {
            return;
        }
        long delay = retryDelayMs.getOrDefault(id, RETRY_MS);
        long cap = settings.warmIntervalMillis() > 0 ? settings.warmIntervalMillis() : 60_000;
        retryDelayMs.put(id, Math.min(cap, delay * 2));
        vertx.setTimer(delay, t -> {
            retrying.remove(id);
            MemberRecord now = membership.members().get(id);
            if (now != null) {
                warm(now);
            }
        });
    }
}
