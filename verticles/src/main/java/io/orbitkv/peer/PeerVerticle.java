package io.orbitkv.peer;

import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.cluster.MembershipPort;
import io.orbitkv.common.LocalCodec;
import io.orbitkv.common.RoleProxies;
import io.orbitkv.common.RateLimitedLog;
import io.orbitkv.common.Ticker;
import io.orbitkv.cost.CostProxy;
import io.orbitkv.nativeio.shm.SharedMemoryFile;
import io.orbitkv.model.MemberChange;
import io.orbitkv.model.MemberNetwork;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.protocol.peer.PeerTransferGrpcService;
import io.orbitkv.storage.StorageProxy;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.VerticleBase;
import io.vertx.core.eventbus.EventBus;
import io.vertx.core.http.ClientAuth;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpVersion;
import io.vertx.core.net.PemKeyCertOptions;
import io.vertx.core.net.PemTrustOptions;
import io.vertx.grpc.client.GrpcClient;
import io.vertx.grpc.server.GrpcServer;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.Objects;

/**
 * The peer role of one Manager (with {@code cluster.enabled} and {@code peer.port}): two roles on one context behind
 * one deployment. {@link PeerSource} lends this Manager's pages to other members (gRPC Reserve/Release, the transfer
 * port); {@link PeerRequester} fetches a peer's pages into local slots, for local callers through {@link PeerProxy}.
 * This class owns what both share: the pool mapping, the transport, the gRPC server and client, and their lifecycle.
 *
 * <p>Design note (lifecycle). Start maps the pool, starts its prefault on a worker ({@link #startPrefault}), then
 * the transfer port, then the gRPC port, and serves the proxy. Stop withdraws the proxy first (callers get
 * SHUTTING_DOWN), ends every source lease, closes the servers and the transport (a receive in flight is failed and
 * fenced), waits for the prefault, and only then unmaps the pool. A requester that dies leaves its leases to expire
 * or to its departure from membership; a source that dies closes or stalls the transfer, and the requester fences
 * at its budget and aborts its slots.
 */
public final class PeerVerticle extends VerticleBase {
    /**
     * Test seam (requester side): consulted before each reserve this role sends, after its own membership check of the
     * owner passed; the reserve goes out when the answered future completes. A test holds it to restart the source
     * between that check and the reserve (the source then judges the evidence's incarnation itself).
     */
    @FunctionalInterface
    public interface ReserveGate {
        ReserveGate OPEN = owner -> Future.succeededFuture();

        Future<Void> beforeReserve(PeerOwner owner);
    }

    private final PeerSettings settings;
    private final CostProxy cost;
    private final MemberNetwork cluster;
    private final MembershipPort membership;
    private final Path poolPath;
    private final long poolBytes;
    private final MeterRegistry registry;
    private final Ticker ticker;

    private Context context;
    private SharedMemoryFile pool;
    /** The payload transport: {@link #tcp} or {@link #mooncake}, whichever {@code peer.transport} names. */
    private PeerTransport transport;
    private TcpPeerTransport tcp;
    /** Refused TLS handshakes on the control port, one WARN per kind and interval. */
    private final RateLimitedLog controlRefusals = new RateLimitedLog(org.slf4j.LoggerFactory.getLogger(PeerVerticle.class));
    private MooncakePeerTransport mooncake;
    private HttpServer grpcServer;
    private GrpcClient grpcClient;
    private PeerSource source;
    private PeerRequester requester;
    private PeerWarmer warmer;
    private ReserveGate reserveGate = ReserveGate.OPEN;
    /** The start-up prefault of this role's pool mapping ({@link #startPrefault}): ended, how long, asked to stop. */
    private final Promise<Void> prefaulted = Promise.promise();
    private volatile long prefaultNanos = -1;
    private volatile boolean prefaultStop;
    /** One prefault write per this many bytes ({@link #poolPageBytes}); 4 KiB unless told the pool is on huge pages. */
    private long prefaultPageBytes = PoolPrefault.PAGE;

    /**
     * @param cost the cost role's proxy (peer fetch operation and complete-route samples keyed by the peer's
     *             incarnation), or null
     */
    public PeerVerticle(PeerSettings settings, MemberNetwork cluster, MembershipPort membership, Path poolPath,
                        long poolBytes, MeterRegistry registry, CostProxy cost, Ticker ticker) {
        this.cost = cost;
        this.settings = settings;
        this.cluster = cluster;
        this.membership = membership;
        this.poolPath = poolPath;
        this.poolBytes = poolBytes;
        this.registry = registry;
        this.ticker = ticker;
    }

    /**
     * The pool's page size for the start-up prefault ({@link PoolPrefault#pageBytes}: the Manager asks the mount once
     * and tells this role before deploying it). Answers this.
     */
    public PeerVerticle poolPageBytes(long pageBytes) {
        this.prefaultPageBytes = pageBytes;
        return this;
    }

    @Override
    public Future<?> start() {
        context = vertx.getOrCreateContext();
        StorageProxy storage = new StorageProxy(vertx);
        PemKeyCertOptions keyCert = new PemKeyCertOptions().setCertPath(cluster.tlsCert().toString())
                .setKeyPath(cluster.tlsKey().toString());
        PemTrustOptions trust = new PemTrustOptions().addCertPath(cluster.tlsCa().toString());
        grpcClient = GrpcClient.client(vertx, new HttpClientOptions().setSsl(true).setUseAlpn(true)
                .setProtocolVersion(HttpVersion.HTTP_2).setHttp2ClearTextUpgrade(false)
                .setVerifyHost(true).setKeyCertOptions(keyCert).setTrustOptions(trust).setConnectTimeout(5_000));
        String memberId = membership.memberId(); // names the transport's threads
        if (settings.mooncakeTe() != null) {
            transport = mooncake = new MooncakePeerTransport(vertx, settings, registry, memberId);
        } else {
            transport = tcp = new TcpPeerTransport(vertx, settings, registry, cluster.tlsCa(), cluster.tlsCert(),
                    cluster.tlsKey(), memberId, ticker).plaintextInPlace(prefaultPageBytes > PoolPrefault.PAGE);
        }
        source = new PeerSource(vertx, settings, cluster.host(), membership, storage, () -> pool.segment(), registry,
                ticker);
        if (mooncake != null) {
            source.grantExtension(mooncake.grantExtension());
        }
        requester = new PeerRequester(context, membership, grpcClient, storage, transport, () -> pool.segment(), cost,
                registry, ticker);
        requester.reserveGate(reserveGate);
        warmer = new PeerWarmer(vertx, settings, membership, grpcClient, transport, storage, () -> pool.segment(),
                registry);
        membership.addListener(new MembershipPort.Listener() {
            @Override
            public void onMembership(MemberChange change) {
                context.runOnContext(v -> {
                    source.dropDeparted();
                    warmer.onMembership(); // a round per member: those already warm open nothing new
                });
            }

            @Override
            public void onPeersUnknown() {}

            @Override
            public void onPeersKnown() {
                context.runOnContext(v -> {
                    source.dropDeparted();
                    warmer.onMembership();
                });
            }
        });
        GrpcServer grpc = GrpcServer.server(vertx);
        grpc.callHandler(PeerTransferGrpcService.Reserve, source::onReserve);
        grpc.callHandler(PeerTransferGrpcService.Release, source::onRelease);
        String payloadHost = cluster.host();
        return vertx.executeBlocking(() -> SharedMemoryFile.map(poolPath, poolBytes))
                .compose(mapped -> {
                    pool = mapped;
                    startPrefault();
                    if (mooncake != null) { // no transfer port: TE's own listeners serve what leases expose
                        return vertx.executeBlocking(() -> mooncake.start(payloadHost, poolPath, poolBytes,
                                pool.segment()), false).mapEmpty();
                    }
                    return tcp.serve(payloadHost, settings.transferPort(), poolPath, pool.segment(),
                            source.transferSource());
                })
                .compose(port -> vertx.createHttpServer(new HttpServerOptions().setHost(cluster.host())
                        .setPort(settings.port()).setSsl(true).setUseAlpn(true).setClientAuth(ClientAuth.REQUIRED)
                        .setKeyCertOptions(keyCert).setTrustOptions(trust)).requestHandler(grpc)
                        .exceptionHandler(failure -> controlRefusals.warn("peer control tls handshake refused",
                                null, RateLimitedLog.describe(failure)))
                        .listen())
                .onSuccess(server -> {
                    grpcServer = server;
                    serveProxy();
                    // in the background: the start does not wait for the members' paths (members seen later
                    // arrive as membership changes)
                    warmer.start();
                }).mapEmpty();
    }

    private void serveProxy() {
        EventBus bus = vertx.eventBus();
        LocalCodec.register(vertx, PeerCommands.MESSAGE_TYPES.toArray(Class<?>[]::new));
        RoleProxies.<PeerCommands.Acquire, PeerCommands.Acquired>serve(bus, PeerProxy.ACQUIRE,
                c -> requester.acquire(c.pages()));
        RoleProxies.<PeerCommands.Submit, PeerCommands.Fetched>serve(bus, PeerProxy.SUBMIT,
                c -> requester.submit(c.acquired(), c.pin()));
        RoleProxies.<PeerCommands.Abandon, Void>serve(bus, PeerProxy.ABANDON, c -> requester.abandon(c.acquired()));
        RoleProxies.<PeerCommands.Fetch, PeerCommands.Fetched>serve(bus, PeerProxy.FETCH,
                c -> requester.fetch(c.pages()));
    }

    @Override
    public Future<?> stop() {
        RoleProxies.withdrawAll(context);
        prefaultStop = true;
        if (pool == null) {
            prefaulted.tryComplete(); // never mapped: no prefault ran
        }
        source.stop();
        if (warmer != null) {
            warmer.stop();
        }
        Future<Void> servers = grpcServer == null ? Future.succeededFuture() : grpcServer.close();
        return servers.compose(v -> transport.close()).compose(v -> grpcClient.close())
                .compose(v -> prefaulted.future().otherwiseEmpty()) // the worker stops at its next step
                .compose(v -> vertx.executeBlocking(() -> {
                    if (pool != null) {
                        pool.close();
                    }
                    return null;
                }));
    }

    /**
     * Prefault (design note): a fresh mapping costs a page fault per page (4 KiB, or 2 MiB on huge pages:
     * {@link #poolPageBytes}) at its first write, and on a requester the first write is the receive's recv(2) or copy
     * into a slot, on a loop, mid-transfer. So at start a worker write-faults the first {@code peer.prefault-bytes}
     * of this role's mapping once ({@link PoolPrefault}: no value changes, safe while the pool is in use). It stops
     * early when this role stops; {@link #stop} waits for it before unmapping.
     */
    private void startPrefault() {
        MemorySegment segment = pool.segment();
        long started = ticker.nanos();
        vertx.executeBlocking(() -> PoolPrefault.prefault(segment, settings.prefaultBytes(),
                        prefaultPageBytes, () -> prefaultStop), false)
                .onComplete(ar -> {
                    prefaultNanos = ticker.nanos() - started;
                    prefaulted.tryComplete();
                });
    }

    /** Completes once the start-up prefault of this role's pool mapping ended (see {@link #startPrefault}). */
    public Future<Void> prefaulted() {
        return prefaulted.future();
    }

    /** How long the prefault took (ns), -1 before it ended. */
    public long prefaultNanos() {
        return prefaultNanos;
    }

    /** The settings this role runs with. */
    public PeerSettings settings() {
        return settings;
    }

    /** Test seam: installs {@code gate} (see {@link ReserveGate}); {@link ReserveGate#OPEN} removes it. */
    public void reserveGate(ReserveGate gate) {
        this.reserveGate = Objects.requireNonNull(gate, "gate");
        if (requester != null) {
            requester.reserveGate(gate);
        }
    }

    /**
     * Transfer connections this Manager opened as a requester for a receive that found no idle one (reused ones count
     * once; those warming opened ahead of need count in {@link TcpPeerTransport#connectionsWarmed}; 0 over TE; tests).
     */
    public long transferConnectionsOpened() {
        return tcp == null ? 0 : tcp.connectionsOpened();
    }

    /** The built-in transport (tests: its verifier seam and counts); null with {@code peer.transport: mooncake-te}. */
    public TcpPeerTransport transport() {
        return tcp;
    }

    /** The payload transport this role runs (built-in or Transfer Engine). */
    public PeerTransport peerTransport() {
        return transport;
    }
}
