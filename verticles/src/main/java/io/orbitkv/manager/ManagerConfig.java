package io.orbitkv.manager;

import io.orbitkv.admission.QuerySettings;
import io.orbitkv.cluster.ClusterSettings;
import io.orbitkv.common.ConfigException;
import io.orbitkv.common.ConfigValues;
import io.orbitkv.cost.CostSettings;
import io.orbitkv.engine.EngineConfig;
import io.orbitkv.events.EventsSettings;
import io.orbitkv.peer.PeerAttemptPolicy;
import io.orbitkv.peer.PeerSettings;
import io.orbitkv.planning.PlanningSettings;
import io.orbitkv.planning.TransferScheduler;
import io.orbitkv.ssd.SsdTier;
import io.orbitkv.storage.PoolSettings;
import io.vertx.core.json.JsonObject;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

/**
 * The Manager's validated configuration: its own keys (data directory, metrics door, event loops) and each role's
 * section, parsed by that role's settings. Built from a flat map of dotted keys (defaults from {@code
 * conf/orbitkv.yaml}, then environment variables, then command-line flags) by {@link #from(Map)}, which refuses an
 * unknown key and the first invalid value with a {@link ConfigException} naming the key.
 */
public record ManagerConfig(
        Path dataDir,
        String metricsHost,
        int metricsPort,
        int eventLoopThreads,
        PoolSettings pool,
        EngineConfig engine,
        QuerySettings query,
        SsdTier ssd,
        PlanningSettings planning,
        CostSettings cost,
        Optional<ClusterSettings> cluster,
        PeerSettings peer,
        PeerAttemptPolicy peerAttempts,
        EventsSettings events) {

    /** The Manager's own keys and their defaults. */
    private static final Map<String, String> OWN_DEFAULTS = Map.of(
            "data-dir", "./data",
            "metrics.host", "127.0.0.1",
            "metrics.port", "9091",
            "manager.event-loop-threads", "1");

    /** Every key with its default, as documented in docs/configuration.md and conf/orbitkv.yaml. */
    public static final Map<String, String> DEFAULTS = union(List.of(OWN_DEFAULTS, PoolSettings.DEFAULTS,
            EngineConfig.DEFAULTS, QuerySettings.DEFAULTS, SsdTier.DEFAULTS, PlanningSettings.DEFAULTS,
            CostSettings.DEFAULTS, ClusterSettings.DEFAULTS, PeerSettings.DEFAULTS, EventsSettings.DEFAULTS));

    /** The sections' keys together; a key two sections claim is a programming error. */
    private static Map<String, String> union(List<Map<String, String>> sections) {
        Map<String, String> all = new TreeMap<>();
        for (Map<String, String> section : sections) {
            section.forEach((key, value) -> {
                if (all.putIfAbsent(key, value) != null) {
                    throw new IllegalStateException("configuration key " + key + " is defined by two sections");
                }
            });
        }
        return Map.copyOf(all);
    }

    public static ManagerConfig from(Map<String, String> raw) {
        for (String key : raw.keySet()) {
            if (!DEFAULTS.containsKey(key)) {
                throw new ConfigException(key, "unknown key (known keys: "
                        + String.join(", ", new TreeMap<>(DEFAULTS).keySet()) + ")");
            }
        }
        Map<String, String> merged = new TreeMap<>(DEFAULTS);
        merged.putAll(raw);
        ConfigValues v = new ConfigValues(merged);
        Path dataDir = v.path("data-dir", false);
        return new ManagerConfig(
                dataDir,
                v.host("metrics.host"),
                v.port("metrics.port"),
                (int) v.integer("manager.event-loop-threads", 1, 256),
                PoolSettings.fromConfig(v),
                EngineConfig.fromConfig(v, dataDir),
                QuerySettings.fromConfig(v),
                SsdTier.fromConfig(v, dataDir),
                PlanningSettings.fromConfig(v),
                CostSettings.fromConfig(v),
                ClusterSettings.fromConfig(v),
                PeerSettings.fromConfig(v),
                PeerAttemptPolicy.fromConfig(v),
                EventsSettings.fromConfig(v));
    }

    // Shorthands for the launcher, tools and tests.

    public long poolSizeBytes() {
        return pool.sizeBytes();
    }

    public PoolSettings.HugePages poolHugePages() {
        return pool.hugePages();
    }

    public Path grpcUnixSocket() {
        return engine.unixSocket();
    }

    public String grpcTcpHost() {
        return engine.tcpHost();
    }

    public int grpcTcpPort() {
        return engine.tcpPort();
    }

    public EngineConfig.BridgeDoor bridge() {
        return engine.bridge();
    }

    public TransferScheduler.Settings planningTransfers() {
        return planning.transfers();
    }

    public JsonObject toJson() {
        return new JsonObject()
                .put("data-dir", dataDir.toString()).put("pool.size", pool.sizeBytes())
                .put("pool.chunk", pool.chunkBytes())
                .put("pool.shm-dir", pool.shmDir().toString())
                .put("pool.huge-pages", pool.hugePages().name().toLowerCase(Locale.ROOT))
                .put("grpc.unix-socket", engine.unixSocket().toString())
                .put("grpc.tcp-host", engine.tcpHost()).put("grpc.tcp-port", engine.tcpPort())
                .put("metrics.host", metricsHost).put("metrics.port", metricsPort);
    }
}
