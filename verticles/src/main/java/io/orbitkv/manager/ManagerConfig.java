package io.orbitkv.manager;

import io.orbitkv.common.ConfigException;
import io.orbitkv.common.ConfigValues;
import io.orbitkv.admission.TenantShares;
import io.orbitkv.cluster.ClusterSettings;
import io.orbitkv.codecs.extent.SsdExtentHeader;
import io.orbitkv.cost.CostSettings;
import io.orbitkv.events.EventsSettings;
import io.orbitkv.peer.PeerAttemptPolicy;
import io.orbitkv.peer.PeerSettings;
import io.orbitkv.planning.TransferScheduler;
import io.orbitkv.ssd.SsdSettings;
import io.orbitkv.model.SsdWritePolicy;
import io.vertx.core.json.JsonObject;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

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
        Retention retention,
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
        TransferScheduler.Settings planningTransfers,
        EventsSettings events,
        ColocatedDoor colocated) {

    /**
     * The co-located channel (see the engine role's ColocatedEngineDoor): a SEQPACKET Unix socket beside gRPC.
     *
     * @param socket         its path, or null when {@code engine.colocated-socket} is {@code off}
     * @param maxFrameBytes  a longer frame, either way, is refused (OVERSIZED_REQUEST)
     * @param maxInFlight    requests of one connection in the Manager at once; more: TOO_MANY_OUTSTANDING
     * @param maxConnections connections at once; one more is refused and closed
     */
    public record ColocatedDoor(Path socket, int maxFrameBytes, int maxInFlight, int maxConnections) {
        public boolean enabled() {
            return socket != null;
        }
    }

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
     * Retention hints ({@code retention.*}): all tenants together retain at most {@code budgetFraction} of the pool,
     * each its {@code query.tenant-shares} share of it (equal shares among retaining tenants when none are configured);
     * one retention lives at most {@code maxTtlMillis}.
     */
    public record Retention(double budgetFraction, long maxTtlMillis) {}

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
        // Of the pool: bytes all tenants' retention hints may hold together; one hint lives at most max-ttl-ms.
        d.put("retention.budget-fraction", "0.5");
        d.put("retention.max-ttl-ms", "86400000");
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
        // Empty: <data-dir>/colocated.sock; "off": no co-located channel.
        d.put("engine.colocated-socket", "");
        d.put("engine.colocated-max-frame", "256KiB");
        d.put("engine.colocated-max-in-flight", "32");
        d.put("engine.colocated-max-connections", "64");
        // The cluster (off by default: a single Manager needs none of it). See the README's Cluster section.
        d.put("cluster.enabled", "false");
        // Peer transfer (only with the cluster): -1 = off. See the README's Cluster section.
        d.put("peer.port", "-1");
        d.put("peer.transfer-port", "-1");
        d.put("peer.transport", "tls");
        // Empty: required (a CIDR) before peer.transport mooncake-te is accepted. See docs/mooncake-te.md.
        d.put("peer.mooncake-te.trusted-network", "");
        // tcp: TE's TCP transport; auto: TE picks RDMA where a verbs device exists (perf/rdma/te-rdma.sh), else TCP.
        d.put("peer.mooncake-te.protocol", "tcp");
        d.put("peer.max-lease-ms", "10000");
        d.put("peer.credit-bytes", "256MiB");
        d.put("peer.max-keys", "4096");
        d.put("peer.staging-bytes", "64MiB");
        d.put("peer.prefault-bytes", "4GiB");
        d.put("peer.transfer-loops", "auto");
        // 0: the CRC32C inline on the loop (PeerSettings.VERIFY_THREADS_DEFAULT); auto: min(4, cores / 4) verifiers.
        d.put("peer.verify-threads", "0");
        // auto: one warmed transfer connection per transfer loop to each member (PeerSettings.autoWarmConnections),
        // at most IdleConnections.MAX_PER_ENDPOINT; 0: no warming.
        d.put("peer.warm-connections", "auto");
        d.put("peer.warm-timeout-ms", String.valueOf(PeerSettings.WARM_TIMEOUT_DEFAULT_MS));
        d.put("peer.warm-interval-ms", String.valueOf(PeerSettings.WARM_INTERVAL_DEFAULT_MS));
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
        // Test hooks only, never for operators (0 = off): each breaks something on purpose.
        d.put("fault-injection.peer.flip-page", "0");
        d.put("fault-injection.peer.stall-lease-pages", "0");
        d.put("fault-injection.inventory.drop-batch", "0");
        // KV events for request routers and the router summary (docs/events.md): off unless events.endpoint is set.
        d.putAll(EventsSettings.DEFAULTS);
        return Map.copyOf(d);
    }

    public static ManagerConfig from(Map<String, String> raw) {
        for (String key : raw.keySet()) {
            if (!DEFAULTS.containsKey(key)) {
                throw new ConfigException(key, "unknown key (known keys: " + String.join(", ", new TreeMap<>(DEFAULTS).keySet()) + ")");
            }
        }
        Map<String, String> merged = new TreeMap<>(DEFAULTS);
        merged.putAll(raw);
        ConfigValues v = new ConfigValues(merged);
        Path dataDir = v.path("data-dir", false);
        long pool = v.size("pool.size", 4L << 20, 1L << 40);
        long chunk = v.size("pool.chunk", 64L << 10, 1L << 30);
        if (chunk % 4096 != 0) {
            throw new ConfigException("pool.chunk", "must be a multiple of 4KiB, got " + v.string("pool.chunk"));
        }
        if (pool % chunk != 0) {
            throw new ConfigException("pool.size", "must be a multiple of pool.chunk (" + v.string("pool.chunk") + "), got " + v.string("pool.size"));
        }
        String socket = v.string("grpc.unix-socket");
        String token = v.string("auth.token-file");
        return new ManagerConfig(
                dataDir,
                pool,
                chunk,
                v.path("pool.shm-dir", false),
                hugePages(v),
                socket.isBlank() ? dataDir.resolve("engine.sock") : Path.of(socket),
                v.host("grpc.tcp-host"),
                v.port("grpc.tcp-port"),
                v.size("grpc.max-message", 64L << 10, 1L << 30),
                (int) v.integer("grpc.max-pages-per-request", 1, 1 << 20),
                v.host("metrics.host"),
                v.port("metrics.port"),
                v.integer("session.ttl-ms", 100, 24L * 3600 * 1000),
                (int) v.integer("query.max-outstanding-per-instance", 1, 1 << 20),
                (int) v.integer("query.max-outstanding", 1, 1 << 24),
                v.integer("query.wait-budget-ms", 0, 3600_000),
                v.integer("query.reply-ttl-ms", 100, 3600_000),
                v.fraction("query.byte-budget-fraction"),
                v.fraction("publish.budget-fraction"),
                new Retention(v.fraction("retention.budget-fraction"),
                        v.integer("retention.max-ttl-ms", 1, 30L * 24 * 3600 * 1000)),
                token.isBlank() ? dataDir.resolve("engine.token") : Path.of(token),
                v.fraction("query.instance-budget-fraction"),
                v.fraction("query.speculative-fraction"),
                tenantShares(v, "query.tenant-shares"),
                (int) v.integer("manager.event-loop-threads", 1, 256),
                CostSettings.fromConfig(v),
                ssdTier(v, dataDir),
                sessionPolicy(v),
                bridgeDoor(v),
                new AnsweredBounds((int) v.integer("query.max-answered-per-instance", 1, 1 << 20),
                        (int) v.integer("query.max-answered", 1, 1 << 24)),
                ClusterSettings.fromConfig(v),
                PeerSettings.fromConfig(v),
                PeerAttemptPolicy.fromConfig(v),
                planningTransfers(v),
                EventsSettings.fromConfig(v),
                colocatedDoor(v, dataDir));
    }

    private static ColocatedDoor colocatedDoor(ConfigValues v, Path dataDir) {
        String socket = v.string("engine.colocated-socket").strip();
        Path path = socket.equals("off") ? null : socket.isEmpty() ? dataDir.resolve("colocated.sock") : Path.of(socket);
        return new ColocatedDoor(path, (int) v.size("engine.colocated-max-frame", 4096, 64L << 20),
                (int) v.integer("engine.colocated-max-in-flight", 1, 1 << 16),
                (int) v.integer("engine.colocated-max-connections", 1, 1 << 16));
    }

    /**
     * The planning role's transfer queues, one per source medium: outstanding (submitted, not yet terminal) bytes, the
     * share of them speculative reads may hold, and how many transfers may wait.
     */
    private static TransferScheduler.Settings planningTransfers(ConfigValues v) {
        long outstanding = v.size("planning.transfers.outstanding-per-medium", 4096, 1L << 40);
        double speculative = v.fraction("planning.transfers.speculative-fraction");
        int queued = (int) v.integer("planning.transfers.max-queued-per-medium", 1, 1 << 20);
        String order = v.string("planning.transfers.order").strip();
        if (!order.equals("slack") && !order.equals("arrival")) {
            throw new ConfigException("planning.transfers.order", "must be slack or arrival, got '" + order + "'");
        }
        return TransferScheduler.Settings.uniform(outstanding, speculative, queued).withSlackOrder(order.equals("slack"));
    }

    private static HugePages hugePages(ConfigValues v) {
        return switch (v.string("pool.huge-pages").strip().toLowerCase(Locale.ROOT)) {
            case "prefer" -> HugePages.PREFER;
            case "require" -> HugePages.REQUIRE;
            default -> throw new ConfigException("pool.huge-pages", "must be prefer or require, got '"
                    + v.string("pool.huge-pages") + "'");
        };
    }

    private static BridgeDoor bridgeDoor(ConfigValues v) {
        int port = v.string("bridge.port").isBlank() ? -1 : v.port("bridge.port");
        return new BridgeDoor(v.host("bridge.host"), port, v.size("bridge.max-frame", 1024, (1L << 30)),
                (int) v.integer("bridge.max-outstanding-per-connection", 1, 1 << 16),
                (int) v.integer("bridge.max-connections", 1, 1 << 16));
    }

    private static SessionPolicy sessionPolicy(ConfigValues v) {
        long ttl = v.integer("session.ttl-ms", 100, 24L * 3600 * 1000);
        long quarantine = v.string("session.quarantine-ms").isBlank() ? 2 * ttl
                : v.integer("session.quarantine-ms", 0, 7L * 24 * 3600 * 1000);
        int maxRegistered = (int) v.integer("session.max-registered", 1, 1 << 20);
        Set<Integer> uids = new TreeSet<>();
        for (String uid : v.string("grpc.allowed-uids").split(",")) {
            if (!uid.isBlank()) {
                try {
                    uids.add(Integer.parseUnsignedInt(uid.strip()));
                } catch (NumberFormatException e) {
                    throw new ConfigException("grpc.allowed-uids", "must be comma-separated numeric uids, got '"
                            + v.string("grpc.allowed-uids") + "'");
                }
            }
        }
        return new SessionPolicy(quarantine, maxRegistered, Set.copyOf(uids));
    }

    private static SsdTier ssdTier(ConfigValues v, Path dataDir) {
        long extent = v.size("ssd.extent", 4096, 1L << 30);
        if (extent % 4096 != 0) {
            throw new ConfigException("ssd.extent", "must be a multiple of 4KiB, got " + v.string("ssd.extent"));
        }
        long capacity = v.size("ssd.capacity", 0, 1L << 50);
        if (capacity < extent + 4096) {
            throw new ConfigException("ssd.capacity", "must hold at least one extent of " + (extent + 4096) + " bytes, got " + capacity);
        }
        SsdWritePolicy policy = switch (v.string("ssd.write-policy").strip().toLowerCase(Locale.ROOT)) {
            case "all" -> SsdWritePolicy.ALL;
            case "reuse-aware" -> SsdWritePolicy.REUSE_AWARE;
            default -> throw new ConfigException("ssd.write-policy", "must be all or reuse-aware, got '" + v.string("ssd.write-policy") + "'");
        };
        int depth = (int) v.integer("ssd.queue-depth", 1, 4096);
        boolean sync = v.bool("ssd.sync-writes");
        boolean preallocate = v.bool("ssd.preallocate");
        boolean fromPool = v.bool("ssd.write-from-pool");
        int offers = (int) v.integer("ssd.offer-handoff-capacity", 1, 1 << 24);
        int residency = (int) v.integer("ssd.residency-handoff-capacity", 1, 1 << 24);
        if (!v.bool("ssd.enabled")) {
            return new SsdTier(null, false, capacity, extent, policy, depth, sync, preallocate, fromPool, offers,
                    residency);
        }
        String dir = v.string("ssd.dir").strip();
        return new SsdTier(dir.isEmpty() ? dataDir.resolve("ssd") : Path.of(dir), dir.isEmpty(), capacity, extent,
                policy, depth, sync, preallocate, fromPool, offers, residency);
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

    private static TenantShares tenantShares(ConfigValues v, String key) {
        try {
            return TenantShares.parse(v.string(key));
        } catch (IllegalArgumentException e) {
            throw new ConfigException(key, e.getMessage());
        }
    }
}
