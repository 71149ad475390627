package io.orbitkv.manager;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.orbitkv.common.ConfigException;
import io.orbitkv.common.ConfigValues;
import io.orbitkv.engine.EngineConfig;
import io.orbitkv.peer.PeerAttemptPolicy;
import io.orbitkv.peer.PeerSettings;
import io.orbitkv.model.plan.Medium;
import io.orbitkv.planning.PlanningVerticle;
import io.orbitkv.planning.TransferScheduler;
import io.orbitkv.storage.PoolSettings;
import io.vertx.core.Vertx;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class ManagerConfigTest {
    @Test
    void defaultsAreTheDocumentedOnes() {
        ManagerConfig c = ManagerConfig.from(Map.of());
        assertThat(c.poolSizeBytes()).isEqualTo(1L << 30);
        assertThat(c.grpcTcpPort()).isEqualTo(50055);
        assertThat(c.metricsPort()).isEqualTo(9091);
        assertThat(c.grpcTcpHost()).isEqualTo("127.0.0.1");
        assertThat(c.grpcUnixSocket()).isEqualTo(Path.of("./data/engine.sock"));
    }

    @Test
    void everyInvalidValueNamesItsKey() {
        Map<String, String> bad = Map.of(
                "pool.size", "lots", "grpc.tcp-port", "70000", "query.byte-budget-fraction", "1.5",
                "pool.chunk", "3000", "session.ttl-ms", "x", "metrics.host", "", "no.such.key", "1",
                "ssd.write-policy", "sometimes", "ssd.capacity", "4KiB", "cost.observations", "maybe");
        for (var e : bad.entrySet()) {
            assertThatThrownBy(() -> ManagerConfig.from(Map.of(e.getKey(), e.getValue())))
                    .isInstanceOfSatisfying(ConfigException.class, ex -> assertThat(ex.key()).isEqualTo(e.getKey()))
                    .hasMessageContaining(e.getKey());
        }
        assertThatThrownBy(() -> ManagerConfig.from(Map.of("pool.size", "5MiB")))
                .hasMessageContaining("multiple of pool.chunk");
        assertThatThrownBy(() -> ManagerConfig.from(Map.of("pool.size", "1GB"))).hasMessageContaining("binary units");
    }

    @Test
    void poolHugePagesIsPreferOrRequireAndAnythingElseIsATypedError() {
        assertThat(ManagerConfig.from(Map.of()).poolHugePages()).isEqualTo(PoolSettings.HugePages.PREFER);
        assertThat(ManagerConfig.from(Map.of()).toJson().getString("pool.huge-pages")).isEqualTo("prefer");
        ManagerConfig require = ManagerConfig.from(Map.of("pool.huge-pages", " Require "));
        assertThat(require.poolHugePages()).isEqualTo(PoolSettings.HugePages.REQUIRE);
        assertThat(require.toJson().getString("pool.huge-pages")).isEqualTo("require");
        for (String bad : new String[] {"always", "", "yes", "huge"}) {
            assertThatThrownBy(() -> ManagerConfig.from(Map.of("pool.huge-pages", bad)))
                    .isInstanceOfSatisfying(ConfigException.class, ex -> assertThat(ex.key()).isEqualTo("pool.huge-pages"))
                    .hasMessageContaining("prefer or require");
        }
    }

    @Test
    void ssdAndCostSettingsMapOntoTheirRoles() {
        ManagerConfig defaults = ManagerConfig.from(Map.of("data-dir", "/tmp/okv"));
        assertThat(defaults.ssd().enabled()).isTrue();
        assertThat(defaults.ssd().directory()).isEqualTo(Path.of("/tmp/okv/ssd"));
        assertThat(defaults.ssd().defaultDirectory()).isTrue();
        assertThat(defaults.cost().observationsEnabled()).isFalse();
        ManagerConfig custom = ManagerConfig.from(Map.of("ssd.dir", "/var/ssd", "ssd.write-policy", "reuse-aware",
                "ssd.write-from-pool", "true", "cost.observations", "1", "cost.selection", "true"));
        assertThat(custom.ssd().defaultDirectory()).isFalse();
        assertThat(custom.ssd().settings().writePolicy()).isEqualTo(io.orbitkv.model.SsdWritePolicy.REUSE_AWARE);
        assertThat(custom.ssd().settings().writeFromSource()).isTrue();
        assertThat(custom.cost().observationsEnabled()).isTrue();
        assertThat(custom.cost().selectionEnabled()).isTrue();
        assertThat(ManagerConfig.from(Map.of("cost.selection", "true")).cost().selectionEnabled())
                .as("selection needs observation").isFalse();
        assertThat(ManagerConfig.from(Map.of("ssd.enabled", "false")).ssd().enabled()).isFalse();
    }

    @Test
    void planningTransferQueueBoundsAreKeysCheckedWithTheirNames() throws Exception {
        assertThat(ManagerConfig.from(Map.of()).planningTransfers())
                .as("the documented defaults: 256 MiB per medium, a quarter speculative, 1024 queued")
                .isEqualTo(PlanningVerticle.Settings.DEFAULT_TRANSFERS);
        Vertx vertx = Vertx.vertx();
        try {
            Map<String, String> flat = ConfigSources.gather(vertx, Path.of("..", "conf", "orbitkv.yaml"),
                    Map.of("ORBITKV_PLANNING_TRANSFERS_SPECULATIVE_FRACTION", "0.5"),
                    Map.of("planning.transfers.outstanding-per-medium", "64MiB",
                            "planning.transfers.max-queued-per-medium", "16")).await(10, TimeUnit.SECONDS);
            TransferScheduler.Settings queues = ManagerConfig.from(flat).planningTransfers();
            assertThat(queues).isEqualTo(TransferScheduler.Settings.uniform(64L << 20, 0.5, 16).withSlackOrder(false));
            assertThat(ManagerConfig.from(Map.of("planning.transfers.order", "slack")).planningTransfers().slackOrder())
                    .isTrue();
            assertThat(queues.outstandingLimitBytes()).containsOnlyKeys(Medium.values());
        } finally {
            vertx.close().await(10, TimeUnit.SECONDS);
        }
        Map<String, List<String>> bad = Map.of(
                "planning.transfers.outstanding-per-medium", List.of("lots", "0", "1KiB", "256MB", "-1MiB"),
                "planning.transfers.speculative-fraction", List.of("0", "1.5", "-0.25", "a quarter", "NaN"),
                "planning.transfers.max-queued-per-medium", List.of("0", "-1", "many", "2097152"),
                "planning.transfers.order", List.of("fastest", "", "SLACKish"));
        for (var e : bad.entrySet()) {
            for (String value : e.getValue()) {
                assertThatThrownBy(() -> ManagerConfig.from(Map.of(e.getKey(), value))).as("%s=%s", e.getKey(), value)
                        .isInstanceOfSatisfying(ConfigException.class, ex -> assertThat(ex.key()).isEqualTo(e.getKey()))
                        .hasMessageContaining(e.getKey());
            }
        }
    }

    @Test
    void ssdHandOffCapacitiesAreConfigKeysWithTypedErrors() {
        ManagerConfig defaults = ManagerConfig.from(Map.of());
        assertThat(defaults.ssd().settings().offerHandoffCapacity()).isEqualTo(4096);
        assertThat(defaults.ssd().settings().residencyHandoffCapacity()).isEqualTo(16384);
        ManagerConfig custom = ManagerConfig.from(Map.of("ssd.offer-handoff-capacity", "64",
                "ssd.residency-handoff-capacity", "128"));
        assertThat(custom.ssd().settings().offerHandoffCapacity()).isEqualTo(64);
        assertThat(custom.ssd().settings().residencyHandoffCapacity()).isEqualTo(128);
        for (String key : new String[] {"ssd.offer-handoff-capacity", "ssd.residency-handoff-capacity"}) {
            for (String bad : new String[] {"0", "-1", "lots", "16777217"}) {
                assertThatThrownBy(() -> ManagerConfig.from(Map.of(key, bad)))
                        .isInstanceOfSatisfying(ConfigException.class, ex -> assertThat(ex.key()).isEqualTo(key))
                        .hasMessageContaining(key);
            }
        }
    }

    @Test
    void peerAttemptBoundsAreKeysWithTypedErrors() {
        assertThat(ManagerConfig.from(Map.of()).peerAttempts()).as("the documented defaults")
                .isEqualTo(new PeerAttemptPolicy(0, 1000)).isEqualTo(PeerAttemptPolicy.DEFAULT);
        assertThat(ManagerConfig.from(Map.of("peer.attempt-timeout-ms", "1500", "peer.fallback-reserve-ms", "250"))
                .peerAttempts()).isEqualTo(new PeerAttemptPolicy(1500, 250));
        Map<String, List<String>> bad = Map.of(
                "peer.attempt-timeout-ms", List.of("-1", "5", "soon", "1.5", "600001", "10001"),
                "peer.fallback-reserve-ms", List.of("-1", "lots", "600001"));
        for (var e : bad.entrySet()) {
            for (String value : e.getValue()) {
                assertThatThrownBy(() -> ManagerConfig.from(Map.of(e.getKey(), value))).as("%s=%s", e.getKey(), value)
                        .isInstanceOfSatisfying(ConfigException.class, ex -> assertThat(ex.key()).isEqualTo(e.getKey()))
                        .hasMessageContaining(e.getKey());
            }
        }
        assertThatThrownBy(() -> ManagerConfig.from(Map.of("peer.attempt-timeout-ms", "20000")))
                .hasMessageContaining("peer.max-lease-ms");
        assertThat(ManagerConfig.from(Map.of("peer.attempt-timeout-ms", "20000", "peer.max-lease-ms", "30000"))
                .peerAttempts().ceilingMillis()).isEqualTo(20000);
    }

    @Test
    void peerVerifyThreadsIsAKeyInlineByDefaultWithAnAutoFromTheCoresAndTypedErrors() {
        assertThat(ManagerConfig.from(Map.of()).peer().verifyThreads()).as("inline unless asked")
                .isEqualTo(PeerSettings.VERIFY_THREADS_DEFAULT).isZero();
        assertThat(ManagerConfig.from(Map.of("peer.verify-threads", "auto")).peer().verifyThreads())
                .isEqualTo(PeerSettings.autoVerifyThreads(Runtime.getRuntime().availableProcessors()));
        assertThat(PeerSettings.autoVerifyThreads(1)).isZero();
        assertThat(PeerSettings.autoVerifyThreads(2)).as("a verifier on 2 cores only competes with the loops").isZero();
        assertThat(PeerSettings.autoVerifyThreads(4)).isEqualTo(1);
        assertThat(PeerSettings.autoVerifyThreads(8)).isEqualTo(2);
        assertThat(PeerSettings.autoVerifyThreads(16)).isEqualTo(4);
        assertThat(PeerSettings.autoVerifyThreads(128)).isEqualTo(4);
        assertThat(ManagerConfig.from(Map.of("peer.verify-threads", "0")).peer().verifyThreads()).as("inline").isZero();
        assertThat(ManagerConfig.from(Map.of("peer.verify-threads", " 6 ")).peer().verifyThreads()).isEqualTo(6);
        for (String value : List.of("-1", "65", "two", "1.5", "0x2")) {
            assertThatThrownBy(() -> ManagerConfig.from(Map.of("peer.verify-threads", value))).as("peer.verify-threads=%s", value)
                    .isInstanceOfSatisfying(ConfigException.class, ex -> assertThat(ex.key()).isEqualTo("peer.verify-threads"))
                    .hasMessageContaining("peer.verify-threads");
        }
    }

    @Test
    void theEventBusBridgeIsOffUnlessAPortIsSetAndItsLimitsAreChecked() {
        ManagerConfig defaults = ManagerConfig.from(Map.of());
        assertThat(defaults.bridge().enabled()).isFalse();
        assertThat(defaults.bridge()).isEqualTo(new EngineConfig.BridgeDoor("127.0.0.1", -1, 24L << 20, 64, 64));
        assertThat(ManagerRoles.engineSettings(defaults, "0123456789abcdef", Path.of("/pool")).bridgeEnabled()).isFalse();
        ManagerConfig on = ManagerConfig.from(Map.of("bridge.port", "0", "bridge.max-frame", "1MiB",
                "bridge.max-outstanding-per-connection", "8", "bridge.max-connections", "2"));
        assertThat(on.bridge()).isEqualTo(new EngineConfig.BridgeDoor("127.0.0.1", 0, 1L << 20, 8, 2));
        var settings = ManagerRoles.engineSettings(on, "0123456789abcdef", Path.of("/pool"));
        assertThat(settings.bridgeEnabled()).isTrue();
        assertThat(settings.bridgePort()).isZero();
        assertThat(settings.bridgeMaxFrameBytes()).isEqualTo(1L << 20);
        assertThat(settings.bridgeMaxOutstandingPerConnection()).isEqualTo(8);
        assertThat(settings.bridgeMaxConnections()).isEqualTo(2);
        for (var e : Map.of("bridge.port", "65536", "bridge.host", "", "bridge.max-frame", "100",
                "bridge.max-outstanding-per-connection", "0", "bridge.max-connections", "-1").entrySet()) {
            assertThatThrownBy(() -> ManagerConfig.from(Map.of(e.getKey(), e.getValue())))
                    .isInstanceOfSatisfying(ConfigException.class, ex -> assertThat(ex.key()).isEqualTo(e.getKey()));
        }
    }

    @Test
    void yamlThenEnvironmentThenFlags() throws Exception {
        Path yaml = Files.createTempFile("orbitkv", ".yaml");
        Files.writeString(yaml, "pool:\n  size: 64MiB\ngrpc:\n  tcp-port: 1234\nmetrics:\n  port: 1111\n");
        Vertx vertx = Vertx.vertx();
        try {
            Map<String, String> flat = ConfigSources.gather(vertx, yaml,
                    Map.of("ORBITKV_GRPC_TCP_PORT", "2345", "ORBITKV_METRICS_PORT", "2222", "UNRELATED", "x"),
                    Map.of("metrics.port", "3333")).await(10, TimeUnit.SECONDS);
            ManagerConfig c = ManagerConfig.from(flat);
            assertThat(c.poolSizeBytes()).isEqualTo(64L << 20);
            assertThat(c.grpcTcpPort()).isEqualTo(2345);
            assertThat(c.metricsPort()).isEqualTo(3333);
            assertThat(ConfigSources.envName("query.wait-budget-ms")).isEqualTo("ORBITKV_QUERY_WAIT_BUDGET_MS");
            Path broken = Files.createTempFile("orbitkv", ".yaml");
            Files.writeString(broken, "pool: [unclosed\n");
            assertThatThrownBy(() -> ConfigSources.gather(vertx, broken, Map.of(), Map.of()).await(10, TimeUnit.SECONDS))
                    .isInstanceOf(ConfigException.class).hasMessageContaining("cannot parse");
        } finally {
            vertx.close().await(10, TimeUnit.SECONDS);
        }
    }

    @Test
    void transferLoopsAreAutoByDefaultOrACountAndAnythingElseIsATypedError() {
        assertThat(ManagerConfig.from(Map.of()).peer().transferLoops()).isEqualTo(PeerSettings.defaultTransferLoops())
                .isBetween(1, 4);
        assertThat(ManagerConfig.from(Map.of("peer.transfer-loops", "0")).peer().transferLoops()).isZero();
        assertThat(ManagerConfig.from(Map.of("peer.transfer-loops", "8")).peer().transferLoops()).isEqualTo(8);
        for (String bad : List.of("-1", "65", "many", "1.5", "")) {
            assertThatThrownBy(() -> ManagerConfig.from(Map.of("peer.transfer-loops", bad))).as(bad)
                    .isInstanceOfSatisfying(ConfigException.class,
                            e -> assertThat(e.key()).isEqualTo("peer.transfer-loops"));
        }
    }

    @Test
    void eachRoleSectionOwnsItsKeysAndTheManagerOnlyComposesThem() {
        Map<Map<String, String>, List<String>> sections = Map.of(
                PoolSettings.DEFAULTS, List.of("pool.", "publish.", "retention."),
                EngineConfig.DEFAULTS, List.of("grpc.", "session.", "bridge.", "engine.", "auth."),
                io.orbitkv.admission.QuerySettings.DEFAULTS, List.of("query."),
                io.orbitkv.ssd.SsdTier.DEFAULTS, List.of("ssd."),
                io.orbitkv.planning.PlanningSettings.DEFAULTS, List.of("planning."),
                io.orbitkv.cost.CostSettings.DEFAULTS, List.of("cost."),
                io.orbitkv.cluster.ClusterSettings.DEFAULTS, List.of("cluster.", "fault-injection.inventory."),
                PeerSettings.DEFAULTS, List.of("peer.", "fault-injection.peer."),
                io.orbitkv.events.EventsSettings.DEFAULTS, List.of("events."));
        Map<String, String> composed = new java.util.TreeMap<>();
        sections.forEach((defaults, prefixes) -> {
            assertThat(defaults.keySet()).allMatch(key -> prefixes.stream().anyMatch(key::startsWith));
            composed.putAll(defaults);
        });
        assertThat(ManagerConfig.DEFAULTS).containsAllEntriesOf(composed);
        assertThat(ManagerConfig.DEFAULTS.keySet()).filteredOn(key -> !composed.containsKey(key))
                .as("the Manager's own keys").containsExactlyInAnyOrder("data-dir", "metrics.host", "metrics.port",
                        "manager.event-loop-threads");
        ConfigValues defaults = new ConfigValues(ManagerConfig.DEFAULTS);
        ManagerConfig c = ManagerConfig.from(Map.of());
        assertThat(PoolSettings.fromConfig(defaults)).isEqualTo(c.pool());
        assertThat(EngineConfig.fromConfig(defaults, Path.of("./data"))).isEqualTo(c.engine());
        assertThat(io.orbitkv.ssd.SsdTier.fromConfig(defaults, Path.of("./data"))).isEqualTo(c.ssd());
    }

    @Test
    void testHooksLiveOnlyUnderFaultInjection() {
        assertThat(ManagerConfig.DEFAULTS.keySet()).filteredOn(key -> !key.startsWith("fault-injection."))
                .noneMatch(key -> key.contains("test"));
        assertThat(ManagerConfig.DEFAULTS).containsKeys("fault-injection.peer.flip-page",
                "fault-injection.peer.stall-lease-pages", "fault-injection.inventory.drop-batch");
        assertThat(ManagerConfig.from(Map.of("fault-injection.inventory.drop-batch", "2", "cluster.enabled", "false"))
                .cluster()).isEmpty();
        assertThatThrownBy(() -> ManagerConfig.from(Map.of("peer.test-flip-page", "5")))
                .isInstanceOfSatisfying(ConfigException.class, e -> assertThat(e.key()).isEqualTo("peer.test-flip-page"));
    }

    @Test
    void theShippedYamlParsesToTheEmbeddedDefaults() throws Exception {
        Path yaml = Path.of("..", "conf", "orbitkv.yaml");
        Vertx vertx = Vertx.vertx();
        try {
            Map<String, String> flat = ConfigSources.gather(vertx, yaml, Map.of(), Map.of()).await(10, TimeUnit.SECONDS);
            assertThat(ManagerConfig.from(flat)).isEqualTo(ManagerConfig.from(Map.of()));
        } finally {
            vertx.close().await(10, TimeUnit.SECONDS);
        }
    }

    @Test
    void anUncreatableDataDirectoryFailsStartupWithItsKeyAndLeavesNothingRunning() throws Exception {
        Path file = Files.createTempFile("orbitkv", ".notadir");
        ManagerConfig c = ManagerConfig.from(Map.of("data-dir", file.resolve("sub").toString(), "pool.size", "8MiB",
                "grpc.tcp-port", "0", "metrics.port", "0"));
        assertThatThrownBy(() -> Manager.start(c).await(30, TimeUnit.SECONDS))
                .isInstanceOfSatisfying(ConfigException.class, e -> assertThat(e.key()).isEqualTo("data-dir"));
    }

    @Test
    void poolFilesOfDeadManagersAreRemoved() throws Exception {
        Path shm = Files.createTempDirectory("orbitkv-shm");
        Process dead = new ProcessBuilder("true").start();
        dead.waitFor();
        Path stale = Files.createFile(shm.resolve("orbitkv-pool-" + dead.pid() + "-abc"));
        Path live = Files.createFile(shm.resolve("orbitkv-pool-" + ProcessHandle.current().pid() + "-def"));
        Path other = Files.createFile(shm.resolve("unrelated"));
        assertThat(StalePools.removeDead(shm)).containsExactly(stale);
        assertThat(Files.exists(live)).isTrue();
        assertThat(Files.exists(other)).isTrue();
    }
}
