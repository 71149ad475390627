package io.orbitkv.manager;

import io.orbitkv.admission.TenantShares;
import io.orbitkv.cluster.ClusterSettings;
import io.orbitkv.codecs.extent.SsdExtentHeader;
import io.orbitkv.cost.CostSettings;
import io.orbitkv.peer.PeerAttemptPolicy;
import io.orbitkv.peer.PeerSettings;
import io.orbitkv.planning.TransferScheduler;
import io.orbitkv.ssd.SsdSettings;
import io.orbitkv.ssd.SsdWritePolicy;
import io.vertx.core.json.JsonObject;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The Manager's validated configuration. Built from a flat map of dotted keys (defaults from {@code
 * conf/orbitkv.yaml}, then environment variables, then command-line flags) by {@link #from(Map)}, which rejects the
 * first invalid value with a {@link ConfigException} naming the key.
 */
public record ManagerConfig(
        Path dataDir,
        long poolSizeBytes,
        long poolChunkBytes,
        Path poolShmDir,
        HugePages poolHugePages,
        Path grpcUnixSocket,
        String grpcTcpHost,
        int grpcTcpPort,
        long grpcMaxMessageBytes,
        int grpcMaxPagesPerRequest,
        String metricsHost,
        int metricsPort,
        long sessionTtlMillis,
        int queryMaxOutstandingPerInstance,
        int queryMaxOutstanding,
        long queryWaitBudgetMillis,
        long queryReplyTtlMillis,
        double queryByteBudgetFraction,
        double publishBudgetFraction,
        Path authTokenFile,
        double queryInstanceBudgetFraction,
        double querySpeculativeFraction,
        TenantShares queryTenantShares,
        int eventLoopThreads,
        CostSettings cost,
        SsdTier ssd,
        SessionPolicy sessions,
        BridgeDoor bridge,
        AnsweredBounds answered,
        Optional<ClusterSettings> cluster,
        PeerSettings peer,
        PeerAttemptPolicy peerAttempts,
        TransferScheduler.Settings planningTransfers) {

    /**
     * {@code pool.huge-pages}: what the Manager does when {@code pool.shm-dir} does not back the pool with huge pages
     * (see {@link io.orbitkv.nativeio.shm.PoolPages}): start on 4 KiB pages with one WARN line, or refuse to start.
     */
    public enum HugePages {
        PREFER, REQUIRE
    }

    /**
     * Answered queries kept pollable ({@code query.reply-ttl-ms}): at most {@code perInstance} per engine instance and
     * {@code total} in the Manager; beyond, the eldest answer without a lease is forgotten early, else a new query is
     * refused TOO_MANY_ANSWERED.
     */
    public record AnsweredBounds(int perInstance, int total) {}

    /**
     * The event-bus bridge door (off unless {@code bridge.port} is set).
     *
     * @param port                         {@code -1} = off; 0 = an ephemeral port
     * @param maxFrameBytes                a longer frame is refused (OVERSIZED_REQUEST)
     * @param maxOutstandingPerConnection  requests of one connection in the Manager at once
     * @param maxConnections               connections open at once
     */
    public record BridgeDoor(String host, int port, long maxFrameBytes, int maxOutstandingPerConnection,
                             int maxConnections) {
        public boolean enabled() {
            return port >= 0;
        }
    }

    /**
     * Engine sessions and who may open them.
     *
     * @param quarantineMillis how long the pool slots a session held when it ended (lapse, unregister, resume) are
     *                         kept out of reuse: its engine may still be copying out of, or writing into, them
     * @param maxRegistered    sessions registered at once; one more is refused with TOO_MANY_SESSIONS
     * @param allowedPeerUids  users allowed on the Unix socket (SO_PEERCRED); empty = the Manager's own uid
     */
    public record SessionPolicy(long quarantineMillis, int maxRegistered, Set<Integer> allowedPeerUids) {}

    /**
     * The SSD tier's settings; {@code directory} null = off. {@code defaultDirectory}: the Manager creates it
     * (inside the data directory); an explicitly configured directory must already exist and be writable.
     */
    public record SsdTier(Path directory, boolean defaultDirectory, long capacityBytes, long extentPayloadBytes,
                          SsdWritePolicy writePolicy, int queueDepth, boolean syncWrites,
                          boolean preallocate, boolean writeFromPool, int offerHandoffCapacity,
                          int residencyHandoffCapacity) {
        public boolean enabled() {
            return directory != null;
        }

        public SsdSettings settings() {
            return new SsdSettings().directory(directory).capacityBytes(capacityBytes)
                    .extentBytes(extentPayloadBytes + SsdExtentHeader.HEADER_BLOCK_BYTES)
                    .writePolicy(writePolicy).queueDepth(queueDepth).syncWrites(syncWrites).preallocate(preallocate).writeFromSource(writeFromPool)
                    .offerHandoffCapacity(offerHandoffCapacity).residencyHandoffCapacity(residencyHandoffCapacity);
        }
    }


    /** Every key with its default, as documented in the README and conf/orbitkv.yaml. */
    public static final Map<String, String> DEFAULTS = defaults();

    private static Map<String, String> defaults() {
        Map<String, String> d = new TreeMap<>();
        d.put("data-dir", "./data");
        d.put("pool.size", "1GiB");
        d.put("pool.chunk", "2MiB");
        d.put("pool.shm-dir", "/dev/shm");
        // prefer: huge pages where pool.shm-dir gives them, else 4 KiB pages and a WARN; require: else refuse to start.
        d.put("pool.huge-pages", "prefer");
        d.put("grpc.unix-socket", "");
        d.put("grpc.tcp-host", "127.0.0.1");
        d.put("grpc.tcp-port", "50055");
        d.put("grpc.max-message", "16MiB");
        d.put("grpc.max-pages-per-request", "65536");
        d.put("metrics.host", "127.0.0.1");
        d.put("metrics.port", "9091");
        d.put("session.ttl-ms", "30000");
        // Empty: twice session.ttl-ms.
        d.put("session.quarantine-ms", "");
        d.put("session.max-registered", "4096");
        // Comma-separated uids allowed on the Unix socket; empty = only the Manager's own.
        d.put("grpc.allowed-uids", "");
        d.put("query.max-outstanding-per-instance", "256");
        d.put("query.max-outstanding", "8192");
        d.put("query.max-answered-per-instance", "1024");
        d.put("query.max-answered", "32768");
        d.put("query.wait-budget-ms", "5000");
        d.put("query.reply-ttl-ms", "30000");
        d.put("query.byte-budget-fraction", "0.75");
        // Of the query byte budget: demand lease bytes one engine instance may hold.
        d.put("query.instance-budget-fraction", "1.0");
        // Of the pool: the cap on speculative warming leases (they also only use what demand leaves of the budget).
        d.put("query.speculative-fraction", "0.1");
        // "a=0.5,b=0.5": tenants' shares of the query byte budget; empty = equal shares among active tenants.
        d.put("query.tenant-shares", "");
        d.put("publish.budget-fraction", "0.5");
        d.put("auth.token-file", "");
        d.put("manager.event-loop-threads", "1");
        d.put("cost.observations", "false");
        d.put("cost.selection", "false");
        d.put("cost.intake-capacity", "1024");
        // The planning role's per-medium transfer queues (SSD reads back into DRAM today).
        d.put("planning.transfers.outstanding-per-medium", "256MiB");
        d.put("planning.transfers.speculative-fraction", "0.25");
        d.put("planning.transfers.max-queued-per-medium", "1024");
        // arrival: each class by arrival; slack: by latest start time (no TTFT gain measured yet: perf/README verdicts).
        d.put("planning.transfers.order", "arrival");
        d.put("ssd.enabled", "true");
        d.put("ssd.dir", "");
        d.put("ssd.capacity", "2GiB");
        d.put("ssd.extent", "2MiB");
        d.put("ssd.write-policy", "all");
        d.put("ssd.queue-depth", "16");
        d.put("ssd.offer-handoff-capacity", Integer.toString(SsdSettings.OFFER_HANDOFF_CAPACITY_DEFAULT));
        d.put("ssd.residency-handoff-capacity", Integer.toString(SsdSettings.RESIDENCY_HANDOFF_CAPACITY_DEFAULT));
        d.put("ssd.sync-writes", "false");
        d.put("ssd.preallocate", "true");
        d.put("ssd.write-from-pool", "false");
        d.put("bridge.host", "127.0.0.1");
        // Empty: the event-bus bridge is off.
        d.put("bridge.port", "");
        d.put("bridge.max-frame", "24MiB");
        d.put("bridge.max-outstanding-per-connection", "64");
        d.put("bridge.max-connections", "64");
        // The cluster (off by default: a single Manager needs none of it). See the README's Cluster section.
        d.put("cluster.enabled", "false");
        // Peer transfer (only with the cluster): -1 = off. See the README's Cluster section.
        d.put("peer.port", "-1");
        d.put("peer.transfer-port", "-1");
        d.put("peer.transport", "tls");
        d.put("peer.max-lease-ms", "10000");
        d.put("peer.credit-bytes", "256MiB");
        d.put("peer.max-keys", "4096");
        d.put("peer.test-flip-page", "0");
        d.put("peer.test-stall-lease-pages", "0");
        d.put("peer.staging-bytes", "64MiB");
        d.put("peer.prefault-bytes", "4GiB");
        d.put("peer.transfer-loops", "auto");
        // 0: the CRC32C inline on the loop (PeerSettings.VERIFY_THREADS_DEFAULT); auto: min(4, cores / 4) verifiers.
        d.put("peer.verify-threads", "0");
        d.put("peer.attempt-timeout-ms", String.valueOf(PeerAttemptPolicy.CEILING_DEFAULT_MS));
        d.put("peer.fallback-reserve-ms", String.valueOf(PeerAttemptPolicy.FALLBACK_RESERVE_DEFAULT_MS));
        d.put("cluster.member-id", "");
        d.put("cluster.etcd-endpoints", "http://127.0.0.1:2379");
        d.put("cluster.prefix", "/orbitkv");
        d.put("cluster.lease-ttl-s", "5");
        d.put("cluster.host", "127.0.0.1");
        d.put("cluster.eventbus-port", "0");
        d.put("cluster.hazelcast-port", "5701");
        d.put("cluster.hazelcast-seeds", "");
        d.put("cluster.tls.ca", "");
        d.put("cluster.tls.cert", "");
        d.put("cluster.tls.key", "");
        d.put("cluster.inventory.interval-ms", "50");
        d.put("cluster.inventory.max-batch", "1024");
        d.put("cluster.inventory.max-keys-per-peer", "65536");
        // Test hook only: the inventory publisher skips its N-th non-empty batch (0 = never).
        d.put("cluster.inventory.test-drop-batch", "0");
        return Map.copyOf(d);
    }

    public static ManagerConfig from(Map<String, String> raw) {
        for (String key : raw.keySet()) {
            if (!DEFAULTS.containsKey(key)) {
                throw new ConfigException(key, "unknown key (known keys: " + String.join(", ", new TreeMap<>(DEFAULTS).keySet()) + ")");
            }
        }
        Map<String, String> v = new TreeMap<>(DEFAULTS);
        v.putAll(raw);
        Path dataDir = path(v, "data-dir", false);
        long pool = size(v, "pool.size", 4L << 20, 1L << 40);
        long chunk = size(v, "pool.chunk", 64L << 10, 1L << 30);
        if (chunk % 4096 != 0) {
            throw new ConfigException("pool.chunk", "must be a multiple of 4KiB, got " + v.get("pool.chunk"));
        }
        if (pool % chunk != 0) {
            throw new ConfigException("pool.size", "must be a multiple of pool.chunk (" + v.get("pool.chunk") + "), got " + v.get("pool.size"));
        }
        String socket = v.get("grpc.unix-socket");
        String token = v.get("auth.token-file");
        return new ManagerConfig(
                dataDir,
                pool,
                chunk,
                path(v, "pool.shm-dir", false),
                hugePages(v),
                socket.isBlank() ? dataDir.resolve("engine.sock") : Path.of(socket),
                host(v, "grpc.tcp-host"),
                port(v, "grpc.tcp-port"),
                size(v, "grpc.max-message", 64L << 10, 1L << 30),
                (int) integer(v, "grpc.max-pages-per-request", 1, 1 << 20),
                host(v, "metrics.host"),
                port(v, "metrics.port"),
                integer(v, "session.ttl-ms", 100, 24L * 3600 * 1000),
                (int) integer(v, "query.max-outstanding-per-instance", 1, 1 << 20),
                (int) integer(v, "query.max-outstanding", 1, 1 << 24),
                integer(v, "query.wait-budget-ms", 0, 3600_000),
                integer(v, "query.reply-ttl-ms", 100, 3600_000),
                fraction(v, "query.byte-budget-fraction"),
                fraction(v, "publish.budget-fraction"),
                token.isBlank() ? dataDir.resolve("engine.token") : Path.of(token),
                fraction(v, "query.instance-budget-fraction"),
                fraction(v, "query.speculative-fraction"),
                tenantShares(v, "query.tenant-shares"),
                (int) integer(v, "manager.event-loop-threads", 1, 256),
                costSettings(v),
                ssdTier(v, dataDir),
                sessionPolicy(v),
                bridgeDoor(v),
                new AnsweredBounds((int) integer(v, "query.max-answered-per-instance", 1, 1 << 20),
                        (int) integer(v, "query.max-answered", 1, 1 << 24)),
                cluster(v),
                peer(v),
                peerAttempts(v),
                planningTransfers(v));
    }

    /**
     * The planning role's transfer queues, one per source medium: outstanding (submitted, not yet terminal) bytes, the
     * share of them speculative reads may hold, and how many transfers may wait.
     */
    private static TransferScheduler.Settings planningTransfers(Map<String, String> v) {
        long outstanding = size(v, "planning.transfers.outstanding-per-medium", 4096, 1L << 40);
        double speculative = fraction(v, "planning.transfers.speculative-fraction");
        int queued = (int) integer(v, "planning.transfers.max-queued-per-medium", 1, 1 << 20);
        String order = v.get("planning.transfers.order").strip();
        if (!order.equals("slack") && !order.equals("arrival")) {
            throw new ConfigException("planning.transfers.order", "must be slack or arrival, got '" + order + "'");
        }
        return TransferScheduler.Settings.uniform(outstanding, speculative, queued).withSlackOrder(order.equals("slack"));
    }

    private static HugePages hugePages(Map<String, String> v) {
        return switch (v.get("pool.huge-pages").strip().toLowerCase(Locale.ROOT)) {
            case "prefer" -> HugePages.PREFER;
            case "require" -> HugePages.REQUIRE;
            default -> throw new ConfigException("pool.huge-pages", "must be prefer or require, got '"
                    + v.get("pool.huge-pages") + "'");
        };
    }

    private static PeerSettings peer(Map<String, String> v) {
        int port = (int) integer(v, "peer.port", -1, 65535);
        int transferPort = (int) integer(v, "peer.transfer-port", -1, 65535);
        if ((port > 0) != (transferPort > 0)) {
            throw new ConfigException("peer.transfer-port", "peer.port and peer.transfer-port are set together (or neither)");
        }
        if (port > 0 && !bool(v, "cluster.enabled")) {
            throw new ConfigException("peer.port", "needs cluster.enabled (peers are cluster members)");
        }
        String transport = v.get("peer.transport").strip();
        if (!transport.equals("tls") && !transport.equals("plaintext")) {
            throw new ConfigException("peer.transport", "must be tls or plaintext, got '" + transport + "'");
        }
        return new PeerSettings(port, transferPort, transport.equals("plaintext"),
                integer(v, "peer.max-lease-ms", 10, 600_000), size(v, "peer.credit-bytes", 4096, 1L << 40),
                (int) integer(v, "peer.max-keys", 1, 1 << 16), integer(v, "peer.test-flip-page", 0, Long.MAX_VALUE),
                (int) integer(v, "peer.test-stall-lease-pages", 0, 1 << 16), size(v, "peer.staging-bytes", 0, 1L << 40),
                size(v, "peer.prefault-bytes", 0, 1L << 50),
                countOrAuto(v, "peer.transfer-loops", PeerSettings.defaultTransferLoops(), 64),
                countOrAuto(v, "peer.verify-threads",
                        PeerSettings.autoVerifyThreads(Runtime.getRuntime().availableProcessors()), 64));
    }

    /** A count of threads or loops: {@code auto} (then {@code auto}'s value for this host) or 0..{@code max}. */
    private static int countOrAuto(Map<String, String> v, String key, int auto, int max) {
        return v.get(key).strip().equals("auto") ? auto : (int) integer(v, key, 0, max);
    }

    /**
     * How a requester bounds one peer attempt: a ceiling of its own (0: none; never above {@code peer.max-lease-ms},
     * which caps it anyway) and the reserve it leaves of a demand's waiting budget for the fallback route.
     */
    private static PeerAttemptPolicy peerAttempts(Map<String, String> v) {
        long ceiling = integer(v, "peer.attempt-timeout-ms", 0, 600_000);
        long maxLease = integer(v, "peer.max-lease-ms", 10, 600_000);
        if (ceiling > maxLease) {
            throw new ConfigException("peer.attempt-timeout-ms", "must not exceed peer.max-lease-ms (" + maxLease
                    + "): a source lease never lasts longer, got " + ceiling);
        }
        if (ceiling > 0 && ceiling < 10) {
            throw new ConfigException("peer.attempt-timeout-ms", "must be 0 (no ceiling) or at least 10 ms, got "
                    + ceiling);
        }
        return new PeerAttemptPolicy(ceiling, integer(v, "peer.fallback-reserve-ms", 0, 600_000));
    }

    private static Optional<ClusterSettings> cluster(Map<String, String> v) {
        if (!bool(v, "cluster.enabled")) {
            return Optional.empty();
        }
        String id = v.get("cluster.member-id").strip();
        if (!ClusterSettings.validMemberId(id)) {
            throw new ConfigException("cluster.member-id", "must be 1..63 of [a-z0-9-] starting with a letter or digit (it is "
                    + "the only peer label metrics carry), got '" + id + "'");
        }
        List<URI> endpoints = new ArrayList<>();
        for (String e : v.get("cluster.etcd-endpoints").split(",")) {
            if (e.isBlank()) {
                continue;
            }
            try {
                URI uri = new URI(e.strip());
                if (!"http".equals(uri.getScheme()) && !"https".equals(uri.getScheme()) || uri.getHost() == null || uri.getPort() < 0) {
                    throw new URISyntaxException(e, "not http(s)://host:port");
                }
                endpoints.add(uri);
            } catch (URISyntaxException ex) {
                throw new ConfigException("cluster.etcd-endpoints", "must be comma-separated http://host:port URLs, got '"
                        + v.get("cluster.etcd-endpoints") + "'");
            }
        }
        if (endpoints.isEmpty()) {
            throw new ConfigException("cluster.etcd-endpoints", "at least one etcd URL is needed");
        }
        String prefix = v.get("cluster.prefix").strip();
        if (!prefix.matches("/[A-Za-z0-9._/-]{1,100}") || prefix.endsWith("/")) {
            throw new ConfigException("cluster.prefix", "must be an etcd key prefix such as /orbitkv, got '" + prefix + "'");
        }
        List<String> seeds = new ArrayList<>();
        for (String seed : v.get("cluster.hazelcast-seeds").split(",")) {
            if (!seed.isBlank()) {
                if (!seed.strip().matches("[A-Za-z0-9.:\\[\\]-]+:\\d{1,5}")) {
                    throw new ConfigException("cluster.hazelcast-seeds", "must be comma-separated host:port, got '" + seed + "'");
                }
                seeds.add(seed.strip());
            }
        }
        Path ca = tlsFile(v, "cluster.tls.ca");
        Path cert = tlsFile(v, "cluster.tls.cert");
        Path key = tlsFile(v, "cluster.tls.key");
        return Optional.of(new ClusterSettings(id, endpoints, prefix,
                (int) integer(v, "cluster.lease-ttl-s", 2, 300), host(v, "cluster.host"), port(v, "cluster.eventbus-port"),
                (int) integer(v, "cluster.hazelcast-port", 1, 65535), seeds, ca, cert, key,
                integer(v, "cluster.inventory.interval-ms", 5, 60_000),
                (int) integer(v, "cluster.inventory.max-batch", 1, 1 << 16),
                (int) integer(v, "cluster.inventory.max-keys-per-peer", 16, 1 << 24),
                integer(v, "cluster.inventory.test-drop-batch", 0, Long.MAX_VALUE)));
    }

    /** A TLS file the cluster needs: named, and readable now (else the Manager would fail later, at first contact). */
    private static Path tlsFile(Map<String, String> v, String key) {
        String p = v.get(key).strip();
        if (p.isEmpty()) {
            throw new ConfigException(key, "is required with cluster.enabled (make them with ./scripts/orbitkv cluster certs)");
        }
        Path path = Path.of(p);
        if (!Files.isReadable(path)) {
            throw new ConfigException(key, path + " is not a readable file");
        }
        return path;
    }

    private static BridgeDoor bridgeDoor(Map<String, String> v) {
        int port = v.get("bridge.port").isBlank() ? -1 : port(v, "bridge.port");
        return new BridgeDoor(host(v, "bridge.host"), port, size(v, "bridge.max-frame", 1024, (1L << 30)),
                (int) integer(v, "bridge.max-outstanding-per-connection", 1, 1 << 16),
                (int) integer(v, "bridge.max-connections", 1, 1 << 16));
    }

    private static SessionPolicy sessionPolicy(Map<String, String> v) {
        long ttl = integer(v, "session.ttl-ms", 100, 24L * 3600 * 1000);
        long quarantine = v.get("session.quarantine-ms").isBlank() ? 2 * ttl
                : integer(v, "session.quarantine-ms", 0, 7L * 24 * 3600 * 1000);
        int maxRegistered = (int) integer(v, "session.max-registered", 1, 1 << 20);
        Set<Integer> uids = new TreeSet<>();
        for (String uid : v.get("grpc.allowed-uids").split(",")) {
            if (!uid.isBlank()) {
                try {
                    uids.add(Integer.parseUnsignedInt(uid.strip()));
                } catch (NumberFormatException e) {
                    throw new ConfigException("grpc.allowed-uids", "must be comma-separated numeric uids, got '"
                            + v.get("grpc.allowed-uids") + "'");
                }
            }
        }
        return new SessionPolicy(quarantine, maxRegistered, Set.copyOf(uids));
    }

    private static SsdTier ssdTier(Map<String, String> v, Path dataDir) {
        long extent = size(v, "ssd.extent", 4096, 1L << 30);
        if (extent % 4096 != 0) {
            throw new ConfigException("ssd.extent", "must be a multiple of 4KiB, got " + v.get("ssd.extent"));
        }
        long capacity = size(v, "ssd.capacity", 0, 1L << 50);
        if (capacity < extent + 4096) {
            throw new ConfigException("ssd.capacity", "must hold at least one extent of " + (extent + 4096) + " bytes, got " + capacity);
        }
        SsdWritePolicy policy = switch (v.get("ssd.write-policy").strip().toLowerCase(Locale.ROOT)) {
            case "all" -> SsdWritePolicy.ALL;
            case "reuse-aware" -> SsdWritePolicy.REUSE_AWARE;
            default -> throw new ConfigException("ssd.write-policy", "must be all or reuse-aware, got '" + v.get("ssd.write-policy") + "'");
        };
        int depth = (int) integer(v, "ssd.queue-depth", 1, 4096);
        boolean sync = bool(v, "ssd.sync-writes");
        boolean preallocate = bool(v, "ssd.preallocate");
        boolean fromPool = bool(v, "ssd.write-from-pool");
        int offers = (int) integer(v, "ssd.offer-handoff-capacity", 1, 1 << 24);
        int residency = (int) integer(v, "ssd.residency-handoff-capacity", 1, 1 << 24);
        if (!bool(v, "ssd.enabled")) {
            return new SsdTier(null, false, capacity, extent, policy, depth, sync, preallocate, fromPool, offers,
                    residency);
        }
        String dir = v.get("ssd.dir").strip();
        return new SsdTier(dir.isEmpty() ? dataDir.resolve("ssd") : Path.of(dir), dir.isEmpty(), capacity, extent,
                policy, depth, sync, preallocate, fromPool, offers, residency);
    }

    /** ORBITKV_COST_OBSERVATIONS=1 (cost.observations) turns observation and shadow on; selection needs both. */
    private static CostSettings costSettings(Map<String, String> v) {
        boolean observations = bool(v, "cost.observations");
        boolean selection = bool(v, "cost.selection");
        return new CostSettings(observations, observations && selection,
                (int) integer(v, "cost.intake-capacity", 1, 1 << 20));
    }

    private static boolean bool(Map<String, String> v, String key) {
        return switch (v.get(key).strip().toLowerCase(Locale.ROOT)) {
            case "1", "true", "yes", "on" -> true;
            case "0", "false", "no", "off" -> false;
            default -> throw new ConfigException(key, "must be true/false (or 1/0), got '" + v.get(key) + "'");
        };
    }

    /** A pool file name unique to this Manager's data directory and process. */
    public Path poolPath(long incarnation) {
        return poolShmDir.resolve("orbitkv-pool-" + ProcessHandle.current().pid() + "-" + Long.toHexString(incarnation));
    }

    public JsonObject toJson() {
        return new JsonObject()
                .put("data-dir", dataDir.toString()).put("pool.size", poolSizeBytes).put("pool.chunk", poolChunkBytes)
                .put("pool.shm-dir", poolShmDir.toString())
                .put("pool.huge-pages", poolHugePages.name().toLowerCase(Locale.ROOT))
                .put("grpc.unix-socket", grpcUnixSocket.toString())
                .put("grpc.tcp-host", grpcTcpHost).put("grpc.tcp-port", grpcTcpPort)
                .put("metrics.host", metricsHost).put("metrics.port", metricsPort);
    }

    private static final Pattern SIZE = Pattern.compile("(\\d+)\\s*([KMGT]i?B|B)?", Pattern.CASE_INSENSITIVE);

    static long parseSize(String key, String text) {
        Matcher m = SIZE.matcher(text.strip());
        if (!m.matches()) {
            throw new ConfigException(key, "must be a size such as 1GiB, 512MiB or 4096, got '" + text + "'");
        }
        long n;
        try {
            n = Long.parseLong(m.group(1));
        } catch (NumberFormatException e) {
            throw new ConfigException(key, "number too large: '" + text + "'");
        }
        String unit = m.group(2) == null ? "B" : m.group(2).toUpperCase(Locale.ROOT);
        int shift = switch (unit.charAt(0)) {
            case 'K' -> 10;
            case 'M' -> 20;
            case 'G' -> 30;
            case 'T' -> 40;
            default -> 0;
        };
        if (shift > 0 && !unit.contains("I")) {
            throw new ConfigException(key, "use binary units (KiB, MiB, GiB, TiB), got '" + text + "'");
        }
        if (n > (Long.MAX_VALUE >> shift)) {
            throw new ConfigException(key, "size too large: '" + text + "'");
        }
        return n << shift;
    }

    private static long size(Map<String, String> v, String key, long min, long max) {
        long n = parseSize(key, v.get(key));
        if (n < min || n > max) {
            throw new ConfigException(key, "must be between " + min + " and " + max + " bytes, got " + n);
        }
        return n;
    }

    private static long integer(Map<String, String> v, String key, long min, long max) {
        long n;
        try {
            n = Long.parseLong(v.get(key).strip());
        } catch (NumberFormatException e) {
            throw new ConfigException(key, "must be an integer, got '" + v.get(key) + "'");
        }
        if (n < min || n > max) {
            throw new ConfigException(key, "must be between " + min + " and " + max + ", got " + n);
        }
        return n;
    }

    private static int port(Map<String, String> v, String key) {
        return (int) integer(v, key, 0, 65535);
    }

    private static double fraction(Map<String, String> v, String key) {
        double d;
        try {
            d = Double.parseDouble(v.get(key).strip());
        } catch (NumberFormatException e) {
            throw new ConfigException(key, "must be a fraction in (0, 1], got '" + v.get(key) + "'");
        }
        if (!(d > 0 && d <= 1)) {
            throw new ConfigException(key, "must be a fraction in (0, 1], got " + d);
        }
        return d;
    }

    private static TenantShares tenantShares(Map<String, String> v, String key) {
        try {
            return TenantShares.parse(v.get(key));
        } catch (IllegalArgumentException e) {
            throw new ConfigException(key, e.getMessage());
        }
    }

    private static String host(Map<String, String> v, String key) {
        String h = v.get(key).strip();
        if (h.isEmpty() || h.contains(" ") || h.contains("/")) {
            throw new ConfigException(key, "must be a host name or address, got '" + v.get(key) + "'");
        }
        return h;
    }

    private static Path path(Map<String, String> v, String key, boolean mayBeEmpty) {
        String p = v.get(key).strip();
        if (p.isEmpty() && !mayBeEmpty) {
            throw new ConfigException(key, "must not be empty");
        }
        try {
            return Path.of(p);
        } catch (InvalidPathException e) {
            throw new ConfigException(key, "not a valid path: " + e.getMessage());
        }
    }
}
