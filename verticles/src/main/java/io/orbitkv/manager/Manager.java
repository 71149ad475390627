package io.orbitkv.manager;

import io.orbitkv.common.ConfigException;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.orbitkv.cluster.ClusterRoles;
import io.orbitkv.cluster.ClusterVertx;
import io.orbitkv.cluster.InventoryRole;
import io.orbitkv.model.MemberRecord;
import io.orbitkv.cluster.MembershipRole;
import io.orbitkv.common.RoleProxies;
import io.orbitkv.cost.CostProxy;
import io.orbitkv.engine.EngineToken;
import io.orbitkv.engine.EngineVerticle;
import io.orbitkv.nativeio.libc.Libc;
import io.orbitkv.nativeio.mooncake.MooncakeTransferEngine;
import io.orbitkv.nativeio.shm.PoolPages;
import io.orbitkv.model.plan.DemandEvidence;
import io.orbitkv.model.plan.EvidenceSource;
import io.orbitkv.model.plan.MembershipView;
import io.orbitkv.model.plan.RouteResources;
import io.orbitkv.restore.RestoreVerticle;
import io.orbitkv.ssd.SsdProxy;
import io.orbitkv.ssd.SsdStats;
import io.orbitkv.storage.PoolSettings;
import io.orbitkv.storage.StorageVerticle;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.VertxBuilder;
import io.vertx.core.VertxOptions;
import io.vertx.core.transport.Transport;
import io.vertx.micrometer.Label;
import io.vertx.micrometer.MicrometerMetricsFactory;
import io.vertx.micrometer.MicrometerMetricsOptions;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One running Manager: its Vertx, its metrics registry, and its role verticles ({@link ManagerRoles}), started in
 * dependency order (cost → ssd → storage → cluster → planning → peer → restore → admission → engine →
 * health/metrics) and stopped in an order that drains each owner before what it uses goes away ({@link #stop}).
 *
 * <p>Design note: each Manager owns its own Vertx and registry, so tests can run several in one JVM. Starting fails
 * (and releases what it made) before anything listens when the data directory or the pool cannot be created.
 */
public final class Manager implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(Manager.class);
    private final Vertx vertx;
    private final ManagerConfig config;
    private final PrometheusMeterRegistry registry;
    private final EngineVerticle engine;
    private final HealthAndMetricsVerticle health;
    private final String token;
    private final Path poolPath;
    private final CostProxy costProxy;
    private final RouteResources planningResources;
    /** The cluster roles; null in single-host mode. */
    private final ClusterRoles cluster;
    /** The peer role; null without {@code peer.port}. */
    private final io.orbitkv.peer.PeerVerticle peer;
    /** The events role; null unless configured. */
    private final io.orbitkv.events.EventsVerticle events;


    /**
     * What an ordered stop saw: reads back from SSD into pool slots that the storage role had submitted and not seen
     * complete, and the SSD role's reads and writes in flight and its committed extents, when the stop began; the steps in the order
     * they completed, and the reads into pool slots still in flight when the pool was unmapped (0 after an ordered
     * stop). Reads and writes in flight are -1 without the SSD tier.
     */
    public record StopReport(long poolReadsInFlightAtStop, int ssdReadsInFlightAtStop, int ssdWritesInFlightAtStop,
                             int ssdCommittedAtStop, List<String> steps, int readsInFlightAtUnmap) {}

    private final StorageVerticle storage;
    private final SsdProxy ssd;
    private final ManagerRoles.Deployments deployments;
    /** From {@link #start} being called to every role deployed (the Vertx, the preparation, the roles). */
    private final long startNanos;
    private Future<StopReport> stopping;

    private Manager(Vertx vertx, ManagerConfig config, PrometheusMeterRegistry registry, ManagerRoles roles,
                    long startNanos) {
        this.vertx = vertx;
        this.startNanos = startNanos;
        this.config = config;
        this.registry = registry;
        this.engine = roles.engine;
        this.health = roles.health;
        this.token = roles.token;
        this.poolPath = roles.poolPath;
        this.storage = roles.storage;
        this.ssd = roles.ssd == null ? null : new SsdProxy(vertx);
        this.deployments = roles.deployments;
        this.costProxy = roles.cost.proxy();
        this.planningResources = roles.planningResources;
        this.cluster = roles.cluster;
        this.peer = roles.peer;
        this.events = roles.events;
    }

    /**
     * The labels Vert.x's own meters may carry: the server's local address, HTTP method and status, event-bus side and
     * failure, pool type and name. Not the remote address, the HTTP path or route, nor the event-bus address: nothing
     * that names a caller or a request may become a label (a gRPC path names only the method, but paths and remote
     * addresses are per-request dimensions in general, and reply addresses are unbounded).
     */
    static final Set<Label> VERTX_METRIC_LABELS = Collections.unmodifiableSet(EnumSet.of(Label.LOCAL, Label.HTTP_METHOD,
            Label.HTTP_CODE, Label.EB_SIDE, Label.EB_FAILURE, Label.POOL_TYPE, Label.POOL_NAME));

    /**
     * A Vertx on the epoll transport: Vert.x 5.0.7's io_uring transport refuses Unix domain sockets, and engines
     * connect over one by default. (The SSD role drives io_uring for file I/O on its own netty loop.) Its own metrics
     * (event bus, HTTP and gRPC servers, worker pools) go to {@code registry}, beside the roles' {@code orbitkv_*}
     * meters, under a registry name of their own: Vert.x keeps its backends in a JVM-wide map by that name, so two
     * Managers in one JVM sharing a name would share the first one's registry.
     */
    /** A Vertx like the Manager's, without Vert.x's own meters (for tests that deploy roles by hand). */
    public static Vertx newVertx(int eventLoopThreads) {
        return Vertx.builder().with(new VertxOptions().setPreferNativeTransport(true).setEventLoopPoolSize(eventLoopThreads))
                .withTransport(Transport.EPOLL).build();
    }

    public static Vertx newVertx(int eventLoopThreads, MeterRegistry registry, String registryName) {
        return vertxBuilder(registry).with(vertxOptions(eventLoopThreads, registryName)).build();
    }

    private static VertxOptions vertxOptions(int eventLoopThreads, String registryName) {
        MicrometerMetricsOptions metrics = new MicrometerMetricsOptions().setEnabled(true).setRegistryName(registryName)
                .setLabels(EnumSet.copyOf(VERTX_METRIC_LABELS));
        return new VertxOptions().setPreferNativeTransport(true).setEventLoopPoolSize(eventLoopThreads)
                .setMetricsOptions(metrics);
    }

    private static VertxBuilder vertxBuilder(MeterRegistry registry) {
        VertxGaugeReregistration.install(); // Vert.x re-registers its per-handler gauge: a harmless WARN otherwise
        return Vertx.builder().withMetrics(new MicrometerMetricsFactory(registry))
                .withTransport(Transport.EPOLL);
    }

    /**
     * The Manager's Vertx: plain, or with {@code cluster.enabled} clustered (Hazelcast, mutual-TLS event bus; see
     * {@link ClusterVertx}). Blocks while the clustered one joins.
     */
    private static Vertx managerVertx(ManagerConfig config, MeterRegistry registry, String registryName,
                                      int eventBusPort) throws Exception {
        if (config.cluster().isEmpty()) {
            return newVertx(config.eventLoopThreads(), registry, registryName);
        }
        return ClusterVertx.start(vertxBuilder(registry), vertxOptions(config.eventLoopThreads(), registryName),
                config.cluster().get(), eventBusPort, Duration.ofSeconds(60));
    }

    /**
     * {@code pool.huge-pages} (before the pool file exists): tells whether {@code pool.shm-dir} backs the pool with
     * huge pages ({@link PoolPages}); logs it; on 4 KiB pages warns once (prefer) or refuses to start (require). The
     * one place that asks: the answer goes to the storage role (creating, gauges) and the peer role (prefault).
     */
    static PoolPages.Answer checkHugePages(ManagerConfig config) throws java.io.IOException {
        Path dir = config.pool().shmDir();
        PoolPages.Answer pages = PoolPages.of(dir);
        String mount = "mount -t tmpfs -o huge=within_size,mode=0700,size=<N> orbitkv-pool <dir>, then pool.shm-dir: <dir>";
        if (pages.hugePages()) {
            LOG.info("the DRAM pool is on huge pages: {} ({})", dir, pages.describe());
            return pages;
        }
        if (config.pool().hugePages() == PoolSettings.HugePages.REQUIRE) {
            throw new ConfigException("pool.huge-pages", "require, but " + dir + " gives 4 KiB pages ("
                    + pages.describe() + "); put the pool on a huge-page tmpfs: " + mount);
        }
        LOG.warn("the DRAM pool is on 4 KiB pages: {} ({}); copies into and out of it measured 2-4x slower than on "
                + "huge pages on a paravirtualised host; for huge pages: {}", dir, pages.describe(), mount);
        return pages;
    }

    /** What the blocking part of start prepared: the engine token and the pool directory's page answer. */
    private record Prepared(String token, PoolPages.Answer poolPages) {}

    /** Starts a Manager on its own Vertx; the future fails with a clear cause, leaving nothing running. */
    public static Future<Manager> start(ManagerConfig config) {
        return start(config, RestoreVerticle.CopyGate.OPEN);
    }

    /**
     * Starts a Manager whose restore workers pass {@code restoreGate} before each copy batch: a test seam that lets
     * a test hold copies in flight to observe admission and cancellation; {@link #start(ManagerConfig)} passes none.
     * Steps: a Vertx (clustered with the cluster on), the blocking preparation (data directory, pool directory, token),
     * the roles built from their settings, deployed in dependency order.
     */
    public static Future<Manager> start(ManagerConfig config, RestoreVerticle.CopyGate restoreGate) {
        long calledNanos = System.nanoTime();
        PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        // Time-ordered and random (see MemberRecord.newIncarnation): peers fence evidence of older incarnations.
        long incarnation = MemberRecord.newIncarnation(System.currentTimeMillis(), new SecureRandom().nextLong());
        int probedPort = config.cluster().map(ClusterVertx::eventBusPort).orElse(-1);
        Vertx joined;
        for (int attempt = 1; ; attempt++) {
            try {
                joined = managerVertx(config, registry, "orbitkv-manager-" + Long.toHexString(incarnation), probedPort);
                break;
            } catch (Exception e) {
                // A free port probed for the event bus can be handed to another socket (even one of the cluster
                // join's own outgoing connections) before the bus binds it: probe again, a bounded number of times.
                boolean probed = config.cluster().isPresent() && config.cluster().get().eventBusPort() == 0;
                if (!probed || attempt == 3 || !addressInUse(e)) {
                    return Future.failedFuture(new IllegalStateException("cannot join the event-bus cluster: "
                            + e.getMessage(), e));
                }
                LOG.warn("the event-bus port {} was taken between its probe and its bind; probing another", probedPort);
                probedPort = ClusterVertx.eventBusPort(config.cluster().get());
            }
        }
        int eventBusPort = probedPort;
        Vertx vertx = joined;
        if (!vertx.isNativeTransportEnabled()) {
            vertx.close();
            return Future.failedFuture(new IllegalStateException("no native transport (io_uring/epoll): Unix-socket gRPC is unavailable: "
                    + vertx.unavailableNativeTransportCause()));
        }
        RoleProxies.bindMetrics(vertx, registry);
        Path poolPath = config.pool().poolPath(incarnation);
        // Where the start's time goes, in order (milliseconds): logged once started.
        Map<String, Long> phases = Collections.synchronizedMap(new LinkedHashMap<>());
        phases.put("vertx", TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - calledNanos));
        long preparing = System.nanoTime();
        Future<Manager> started = vertx.executeBlocking(() -> prepare(config))
                .map(prepared -> {
                    phases.put("prepare", TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - preparing));
                    return new ManagerRoles(config, prepared.token(), prepared.poolPages(), vertx, registry,
                            incarnation, eventBusPort, poolPath, restoreGate);
                })
                .compose(roles -> roles.deployInOrder(vertx, phases))
                .map(roles -> {
                    long startNanos = System.nanoTime() - calledNanos;
                    LOG.info("started in {} ms: {}", TimeUnit.NANOSECONDS.toMillis(startNanos), phases(phases));
                    return new Manager(vertx, config, registry, roles, startNanos);
                });
        return outsideVertx(vertx, started);
    }

    private static String phases(Map<String, Long> phases) {
        StringBuilder text = new StringBuilder();
        synchronized (phases) {
            phases.forEach((phase, millis) -> text.append(text.isEmpty() ? "" : ", ").append(phase).append(' ')
                    .append(millis).append(" ms"));
        }
        return text.toString();
    }

    /**
     * The blocking part of start, on a worker: the data directory, the pool directory and its page answer, the SSD
     * directory when it is the default one, stale pool files of dead Managers, the engine token.
     */
    private static Prepared prepare(ManagerConfig config) throws IOException {
        prepareDataDir(config.dataDir());
        if (!Files.isDirectory(config.pool().shmDir())) {
            throw new ConfigException("pool.shm-dir", config.pool().shmDir() + " is not a directory");
        }
        PoolPages.Answer poolPages = checkHugePages(config);
        if (config.ssd().enabled() && config.ssd().defaultDirectory()) {
            Files.createDirectories(config.ssd().directory());
            Files.setPosixFilePermissions(config.ssd().directory(), PosixFilePermissions.fromString("rwx------"));
        }
        for (Path stale : StalePools.removeDead(config.pool().shmDir())) {
            LOG.info("removed the pool file {} of a Manager that is no longer running", stale);
        }
        // The Transfer Engine is probed once, when its class loads (a library copy and dlopen, a second or more on a
        // loaded host): here, on a worker, so that /health on the event loop only reads the answer; and only where a
        // peer transport could use it (a single-host Manager never loads it).
        if (usesTransferEngine(config)) {
            LOG.debug("Mooncake Transfer Engine loaded: {}", MooncakeTransferEngine.isAvailable());
        }
        // The engine door's first use initialises the wire descriptors and gRPC's server classes (seconds on a loaded
        // host); done here, on a worker, so that the engine role's start does not block its event loop with it.
        io.orbitkv.protocol.engine.EngineProto.getDescriptor();
        new io.vertx.grpc.server.GrpcServerOptions();
        try {
            return new Prepared(EngineToken.loadOrCreate(config.engine().tokenFile(), Libc.effectiveUid()), poolPages);
        } catch (EngineToken.InsecureTokenFileException e) {
            throw new ConfigException("auth.token-file", e.getMessage());
        }
    }

    /** Whether {@code failure} or one of its causes is a bind to an address already in use. */
    static boolean addressInUse(Throwable failure) {
        for (Throwable t = failure; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (t instanceof java.net.BindException
                    || (t.getMessage() != null && t.getMessage().contains("Address already in use"))) {
                return true;
            }
        }
        return false;
    }

    /** Whether this Manager has a peer transport that could move payload over the Transfer Engine. */
    static boolean usesTransferEngine(ManagerConfig config) {
        return config.cluster().isPresent() && config.peer().enabled();
    }

    /**
     * The caller's future is completed outside any Vert.x context: on failure the Vertx is closed first, from a thread
     * it does not own, so nothing is left running when the caller hears of the failure.
     */
    private static Future<Manager> outsideVertx(Vertx vertx, Future<Manager> started) {
        CompletableFuture<Manager> result = new CompletableFuture<>();
        started.onComplete(ar -> {
            if (ar.succeeded()) {
                result.complete(ar.result());
                return;
            }
            Thread.ofPlatform().name("orbitkv-start-failure").start(() -> {
                try {
                    vertx.close().await(30, TimeUnit.SECONDS);
                } catch (Exception ignored) {
                    // Reporting the start failure matters more than a slow close.
                }
                result.completeExceptionally(ar.cause());
            });
        });
        return Future.fromCompletionStage(result);
    }

    private static void prepareDataDir(Path dataDir) throws IOException {
        try {
            Files.createDirectories(dataDir);
        } catch (IOException e) {
            throw new ConfigException("data-dir", "cannot create " + dataDir + ": " + e);
        }
        if (!Files.isWritable(dataDir)) {
            throw new ConfigException("data-dir", dataDir + " is not writable");
        }
        Files.setPosixFilePermissions(dataDir, PosixFilePermissions.fromString("rwx------"));
    }

    /** The cost role's proxy: observation can be switched on or off at run time through it. */
    public CostProxy cost() {
        return costProxy;
    }

    /** The cost identities of this Manager's DRAM pool and SSD store (with this incarnation), as planning keys them. */
    public RouteResources planningResources() {
        return planningResources;
    }

    public ManagerConfig config() {
        return config;
    }

    public PrometheusMeterRegistry registry() {
        return registry;
    }

    /**
     * The line {@code orbitkv manager} prints once everything listens (scripts and tests parse it): where engines
     * connect, metrics, the pool, the token, the bridge, and with the cluster on its member id and incarnation.
     */
    public String readyLine() {
        return readyLine(OptionalLong.empty());
    }

    /**
     * The ready line; with {@code processToReadyMillis} (the launcher's: from the JVM's start to now) it says
     * {@code ready in N ms (Manager start M ms)}, without it {@code Manager start M ms} (a Manager in a JVM that
     * ran other things first).
     */
    public String readyLine(OptionalLong processToReadyMillis) {
        String bridge = bridgePort() < 0 ? "off" : "tcp " + config.engine().bridge().host() + ":" + bridgePort();
        String line = String.format("OrbitKV Manager ready: grpc unix:%s and tcp %s:%d, metrics http://%s:%d/metrics, pool %d bytes at %s, token %s, bridge %s",
                unixSocket(), config.engine().tcpHost(), grpcTcpPort(), config.metricsHost(), metricsPort(),
                config.pool().sizeBytes(), poolPath(), config.engine().tokenFile(), bridge);
        long startMillis = TimeUnit.NANOSECONDS.toMillis(startNanos);
        line += processToReadyMillis.isPresent()
                ? ", ready in " + processToReadyMillis.getAsLong() + " ms (Manager start " + startMillis + " ms)"
                : ", Manager start " + startMillis + " ms";
        if (cluster != null) {
            line += ", cluster member " + cluster.settings().memberId() + " incarnation " + cluster.membership().incarnation();
        }
        return line;
    }

    /** Whether peers of this Manager are current members (the planner's membership port); none in single-host mode. */
    public MembershipView membership() {
        return cluster == null ? MembershipView.NONE : cluster.membership();
    }

    /**
     * Peer evidence for the planner's discovery (peer DRAM and SSD records from the inventory streams; merge them with
     * the storage role's local records). None in single-host mode.
     */
    public EvidenceSource peerEvidence() {
        return cluster == null ? demand -> Future.succeededFuture(DemandEvidence.none())
                : cluster.inventory();
    }

    /** The inventory role when the cluster is enabled (tests and tools read the peer directory through it). */
    public Optional<InventoryRole> inventoryRole() {
        return cluster == null ? Optional.empty() : Optional.of(cluster.inventory());
    }

    /** The peer role when {@code peer.port} is set (tests and tools fetch through it). */
    public java.util.Optional<io.orbitkv.peer.PeerProxy> peer() {
        return peer == null ? java.util.Optional.empty() : java.util.Optional.of(new io.orbitkv.peer.PeerProxy(vertx));
    }

    /** The peer role's verticle when {@code peer.port} is set (tests and tools: its transport, prefault, seams). */
    public java.util.Optional<io.orbitkv.peer.PeerVerticle> peerRole() {
        return java.util.Optional.ofNullable(peer);
    }

    /** The events role (KV events, router summary) when configured. */
    public Optional<io.orbitkv.events.EventsVerticle> eventsRole() {
        return Optional.ofNullable(events);
    }

    /** The membership role when the cluster is enabled. */
    public Optional<MembershipRole> membershipRole() {
        return cluster == null ? Optional.empty() : Optional.of(cluster.membership());
    }

    /** From {@link #start} being called to every role deployed. */
    public Duration startDuration() {
        return Duration.ofNanos(startNanos);
    }

    public Vertx vertx() {
        return vertx;
    }

    public int grpcTcpPort() {
        return engine.tcpPort();
    }

    /** The event-bus bridge's bound port; -1 when it is off. */
    public int bridgePort() {
        return engine.bridgePort();
    }

    public int metricsPort() {
        return health.actualPort();
    }

    public Path unixSocket() {
        return config.engine().unixSocket();
    }

    /** The co-located channel's socket, or null when it is off. */
    public Path colocatedSocket() {
        return config.engine().colocated().socket();
    }

    public String token() {
        return token;
    }

    public Path poolPath() {
        return poolPath;
    }

    /**
     * Stops in order, so that nothing is torn down under a part still using it: (1) the engine role refuses every call
     * with SHUTTING_DOWN and closes its doors; (2) the admission role withdraws its handlers, cancels every query and
     * ends every lease (their in-flight work drains); the planning role then withdraws its handlers, waits for the
     * executions still running (their submitted reads complete) and ends what they prepared; then the restore role
     * drains the copies its workers submitted (they read pool slots) and withdraws its handlers; (3) the storage role
     * withdraws its handlers and waits for the
     * reads it submitted to the SSD role; (4) the SSD role withdraws its handlers and drains: submitted reads and
     * writes complete (a write from the pool reads its slot until then), queued writes are dropped, committed extents
     * stay on disk; (5) only then is the pool unmapped and its file removed; (6) the cost role, then the Vertx.
     * Idempotent: a second call answers the first one's future.
     */
    public synchronized Future<Void> stop() {
        return stopWithReport().mapEmpty();
    }

    /** {@link #stop}, answering what the ordered stop saw (tests of the ordering). */
    public synchronized Future<StopReport> stopWithReport() {
        if (stopping != null) {
            return stopping;
        }
        List<String> steps = Collections.synchronizedList(new ArrayList<>());
        long poolReads = storage.readsInFlight();
        Future<SsdStats> before = ssd == null ? Future.succeededFuture(null)
                : ssd.stats().otherwise((SsdStats) null);
        Future<StopReport> ordered = before.compose(stats -> undeploy(deployments.health, "health", steps)
                .compose(v -> undeploy(deployments.events, "events-closed", steps))
                .compose(v -> undeploy(deployments.peer, "peer-leases-released", steps))
                .compose(v -> cluster == null ? Future.<Void>succeededFuture()
                        : cluster.undeploy(vertx).onSuccess(x -> steps.add("cluster-left")))
                .compose(v -> undeploy(deployments.engine, "engine-refusing-and-closed", steps))
                .compose(v -> undeploy(deployments.admission, "queries-cancelled-and-leases-ended", steps))
                .compose(v -> undeploy(deployments.planning, "plans-drained", steps))
                .compose(v -> undeploy(deployments.restore, "restores-drained-and-destinations-unmapped", steps))
                .compose(v -> storage.quiesce().onSuccess(x -> steps.add("storage-quiesced")))
                .compose(v -> undeploy(deployments.ssd, "ssd-drained", steps))
                .compose(v -> undeploy(deployments.storage, "pool-unmapped", steps))
                .compose(v -> undeploy(deployments.cost, "cost", steps))
                .map(v -> new StopReport(poolReads, stats == null ? -1 : stats.readsInFlight(),
                        stats == null ? -1 : stats.writesInFlight(), stats == null ? -1 : stats.committedExtents(),
                        List.copyOf(steps),
                        storage.readsInFlightAtUnmap())));
        // The Vertx is closed from a thread it does not own (closing it from one of its loops would complete the
        // close on an executor it just terminated), then the caller hears of the outcome, outside any Vert.x context.
        CompletableFuture<StopReport> result = new CompletableFuture<>();
        ordered.onComplete(ar -> Thread.ofPlatform().name("orbitkv-stop").start(() -> {
            try {
                vertx.close().await(30, TimeUnit.SECONDS);
            } catch (Exception e) {
                LOG.warn("closing the Vertx after the ordered stop failed", e);
            }
            if (ar.succeeded()) {
                result.complete(ar.result());
            } else {
                result.completeExceptionally(ar.cause());
            }
        }));
        Future<StopReport> stopped = Future.fromCompletionStage(result);
        stopping = stopped;
        return stopped;
    }

    private Future<Void> undeploy(String deploymentId, String step, List<String> steps) {
        if (deploymentId == null) {
            return Future.succeededFuture();
        }
        return vertx.undeploy(deploymentId).onSuccess(v -> steps.add(step));
    }

    @Override
    public void close() throws Exception {
        stop().await(30, TimeUnit.SECONDS);
    }
}
