package io.orbitkv.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.orbitkv.clusterkit.ClusterCertificates;
import io.orbitkv.clusterkit.LocalEtcd;
import io.orbitkv.clusterkit.LocalCluster;
import com.google.protobuf.ByteString;
import io.orbitkv.it.RunningManager;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.protocol.engine.AllocatePublishReply;
import io.orbitkv.protocol.engine.GroupKind;
import io.orbitkv.protocol.engine.GroupSpec;
import io.orbitkv.protocol.engine.InstanceIdentity;
import io.orbitkv.protocol.engine.InstanceRole;
import io.orbitkv.protocol.engine.PageKey;
import io.orbitkv.protocol.engine.PublishSlot;
import io.orbitkv.protocol.engine.Representation;
import io.orbitkv.protocol.engine.SlotStatus;
import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.eventbus.EventBusOptions;
import io.vertx.core.net.PemKeyCertOptions;
import io.vertx.core.net.PemTrustOptions;
import io.vertx.spi.cluster.hazelcast.HazelcastClusterManager;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Cluster faults with real processes on 127.0.0.1: one etcd and two Managers (each its own JVM, started and stopped by
 * pid), sharing one cluster per class to keep the suite short. Evidence is observed through each Manager's metrics:
 * {@code orbitkv_cluster_peer_evidence_keys{member=...}}, members, resyncs, gaps, fenced evidence.
 *
 * <p>manager-1 drops its 2nd non-empty inventory batch (the test hook {@code fault-injection.inventory.drop-batch}); the
 * SSD tier is off so that only publishes make batches and the count is exact.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ClusterFaultIT {
    static final long PAGE = 64 << 10;
    static final Duration SOON = Duration.ofSeconds(15);

    @TempDir
    static Path dir;
    static LocalCluster cluster;
    static LocalCluster.Node m1;
    static LocalCluster.Node m2;

    @BeforeAll
    static void startCluster() throws Exception {
        assumeTrue(LocalEtcd.installed(), "etcd is not installed (/usr/bin/etcd): install Debian's etcd-server "
                + "(./scripts/test does when run as root) to run the cluster tests");
        cluster = LocalCluster.start(new LocalCluster.Options(2, dir, ManagerProcessMain.command(), Map.of(
                "cluster.lease-ttl-s", "2", "cluster.prefix", "/orbitkv-fault-test", "ssd.enabled", "false",
                "session.ttl-ms", "60000")));
        m1 = cluster.node(1);
        m2 = cluster.node(2);
        // manager-1 again, with the test hook (restarting it here is also the first restart: a new incarnation).
        cluster.stop(m1);
        cluster.launch(m1, Map.of("fault-injection.inventory.drop-batch", "2"));
        try {
            await().atMost(Duration.ofSeconds(30)).until(() -> members(m1) == 2 && members(m2) == 2);
        } catch (org.awaitility.core.ConditionTimeoutException e) {
            dumpLogs();
            throw e;
        }
    }

    /** The Managers' logs, for a failure's report (their directory is removed with the test's). */
    static void dumpLogs() {
        for (LocalCluster.Node node : cluster.nodes()) {
            try {
                System.err.println("==== " + node + "\n" + java.nio.file.Files.readString(node.log()));
            } catch (java.io.IOException e) {
                System.err.println("==== " + node + ": no log (" + e.getMessage() + ")");
            }
        }
    }

    @AfterAll
    static void stopCluster() throws Exception {
        if (cluster != null) {
            ClusterProcesses.closeAndAssertNoneLeft(cluster);
        }
    }

    static double metric(LocalCluster.Node node, String name, String labels) {
        return cluster.metric(node, name, labels).orElse(-1);
    }

    static int members(LocalCluster.Node node) {
        return (int) metric(node, "orbitkv_cluster_members", "");
    }

    static double evidence(LocalCluster.Node on, LocalCluster.Node of) {
        return cluster.metric(on, "orbitkv_cluster_peer_evidence_keys", "member=\"" + of.memberId() + "\"").orElse(0);
    }

    /** Whether {@code on} holds {@code of}'s inventory from a snapshot (its evidence gauge exists, even at 0 keys). */
    static boolean synced(LocalCluster.Node on, LocalCluster.Node of) {
        return cluster.metrics(on).contains("orbitkv_cluster_peer_evidence_keys{member=\"" + of.memberId() + "\"");
    }

    @Test
    @Order(1)
    void inventoryReachesThePeerAndADroppedBatchIsAGapThenAResync() throws Exception {
        // manager-2 follows manager-1's stream once it resynced from its snapshot (the gauge appears then); from here on
        // manager-1's batches are deltas applied in order.
        await().atMost(SOON).until(() -> synced(m2, m1));
        double resyncsBefore = metric(m2, "orbitkv_cluster_inventory_resyncs_total", "");
        try (Engine engine = Engine.connect(m1)) {
            engine.publish("first", 8); // batch 1: delivered
            await().atMost(SOON).until(() -> evidence(m2, m1) == 8);
            assertThat(metric(m2, "orbitkv_cluster_inventory_lag_seconds_count", "")).isPositive();
            engine.publish("second", 4); // batch 2: dropped by the test hook
            await().atMost(SOON).until(() -> metric(m1, "orbitkv_cluster_inventory_batches_total",
                    "direction=\"dropped-by-test-hook\"") == 1);
            engine.publish("third", 4); // batch 3: does not follow what manager-2 applied → gap → snapshot
            await().atMost(SOON).until(() -> evidence(m2, m1) == 16);
        }
        assertThat(metric(m2, "orbitkv_cluster_inventory_gaps_total", "")).isGreaterThanOrEqualTo(1);
        assertThat(metric(m2, "orbitkv_cluster_inventory_resyncs_total", "")).isGreaterThan(resyncsBefore);
        assertThat(cluster.metrics(m2)).doesNotContain("orbitkv_cluster_peer_evidence_keys{member=\"manager-2\"");
        assertThat(metric(m2, "orbitkv_cluster_eventbus_nodes", "")).isEqualTo(2);
    }

    @Test
    @Order(2)
    void etcdKilledAndRestarted() throws Exception {
        double keys = evidence(m2, m1);
        assertThat(keys).isPositive();
        cluster.etcd().kill();
        // Engines keep being served; after one lease ttl (2 s) peers are no longer current and their evidence ages out.
        try (Engine engine = Engine.connect(m1)) {
            engine.publish("during-outage", 2);
        }
        await().atMost(SOON).until(() -> members(m1) == 1 && members(m2) == 1);
        assertThat(metric(m2, "orbitkv_cluster_etcd_reachable", "")).isZero();
        await().atMost(SOON).until(() -> evidence(m2, m1) == 0);
        assertThat(metric(m2, "orbitkv_cluster_evidence_fenced_total", "")).isGreaterThanOrEqualTo(keys);
        cluster.etcd().restart();
        await().atMost(Duration.ofSeconds(20)).until(() -> members(m1) == 2 && members(m2) == 2);
        // Rejoined: the peer's inventory comes back from a snapshot, the outage's publish included.
        await().atMost(SOON).until(() -> evidence(m2, m1) == keys + 2);
        assertThat(metric(m2, "orbitkv_cluster_etcd_reachable", "")).isOne();
    }

    @Test
    @Order(3)
    void aKilledManagerLeavesWithinItsLeaseAndARestartIsANewIncarnationWhoseOldEvidenceIsFenced() throws Exception {
        double keys = evidence(m2, m1);
        assertThat(keys).isPositive();
        long oldIncarnation = m1.incarnation();
        double fencedBefore = metric(m2, "orbitkv_cluster_evidence_fenced_total", "");
        long killed = System.nanoTime();
        cluster.kill(m1); // SIGKILL: no goodbye, its lease expires after 2 s
        await().atMost(SOON).until(() -> members(m2) == 1);
        assertThat(Duration.ofNanos(System.nanoTime() - killed)).isLessThan(Duration.ofSeconds(8));
        assertThat(evidence(m2, m1)).isZero();
        assertThat(metric(m2, "orbitkv_cluster_evidence_fenced_total", "")).isGreaterThanOrEqualTo(fencedBefore + keys);
        try (Engine engine = Engine.connect(m2)) {
            engine.publish("survivor", 2); // the others keep serving
        }
        cluster.launch(m1, Map.of());
        assertThat(m1.incarnation()).isGreaterThan(oldIncarnation);
        await().atMost(SOON).until(() -> members(m1) == 2 && members(m2) == 2);
        // The new incarnation's pool is empty: nothing of the old one is evidence any more, on either side.
        try (Engine engine = Engine.connect(m1)) {
            engine.publish("reborn", 3);
        }
        await().atMost(SOON).until(() -> evidence(m2, m1) == 3);
        await().atMost(SOON).until(() -> evidence(m1, m2) == 2);
    }

    @Test
    @Order(4)
    void aNodeWithoutACertificateGetsNoMessage() throws Exception {
        AtomicInteger rogueReceived = new AtomicInteger();
        AtomicInteger forgedSeenLocally = new AtomicInteger();
        ClusterSettings rogueSettings = new ClusterSettings("rogue", List.of(URI.create(cluster.etcd().endpoint())),
                "/orbitkv-fault-test", 2, "127.0.0.1", 0, LocalEtcd.freePort(), List.of("127.0.0.1:" + hazelcastPort(m2)),
                null, null, null, 50, 1024, 1024, 0);
        VertxOptions options = new VertxOptions().setEventBusOptions(new EventBusOptions().setHost("127.0.0.1").setPort(0)
                .setClusterPublicHost("127.0.0.1"));
        Vertx rogue = Vertx.builder().with(options)
                .withClusterManager(new HazelcastClusterManager(ClusterVertx.hazelcastConfig(rogueSettings, List.of())))
                .buildClustered().await(60, TimeUnit.SECONDS);
        // The same with a certificate from another CA.
        Path foreign = dir.resolve("foreign-certs");
        ClusterCertificates.create(foreign, 1, List.of("127.0.0.1"), Duration.ofDays(1));
        ClusterSettings foreignSettings = new ClusterSettings("foreign", rogueSettings.etcdEndpoints(), "/orbitkv-fault-test",
                2, "127.0.0.1", 0, LocalEtcd.freePort(), rogueSettings.staticSeeds(), foreign.resolve("ca.pem"),
                foreign.resolve("manager-1.pem"), foreign.resolve("manager-1.key"), 50, 1024, 1024, 0);
        Vertx foreigner = Vertx.builder().with(new VertxOptions().setEventBusOptions(
                        ClusterVertx.eventBusOptions(foreignSettings, ClusterVertx.eventBusPort(foreignSettings))))
                .withClusterManager(new HazelcastClusterManager(ClusterVertx.hazelcastConfig(foreignSettings, List.of())))
                .buildClustered().await(60, TimeUnit.SECONDS);
        try {
            // Counts what the Managers send (their own forged publications reach their own consumers locally).
            io.vertx.core.Handler<io.vertx.core.eventbus.Message<Buffer>> count = m -> {
                if (String.valueOf(m.headers().get(InventoryRole.MEMBER_HEADER)).startsWith("manager-")) {
                    rogueReceived.incrementAndGet();
                } else {
                    forgedSeenLocally.incrementAndGet();
                }
            };
            rogue.eventBus().<Buffer>consumer(InventoryRole.BATCHES, count).completion().await(10, TimeUnit.SECONDS);
            foreigner.eventBus().<Buffer>consumer(InventoryRole.BATCHES, count).completion().await(10, TimeUnit.SECONDS);
            // Both joined Hazelcast (its membership protocol is not authenticated) but are no etcd members.
            await().atMost(SOON).until(() -> metric(m2, "orbitkv_cluster_eventbus_nodes", "") == 4);
            assertThat(members(m2)).isEqualTo(2);
            double receivedBefore = metric(m2, "orbitkv_cluster_inventory_batches_total", "direction=\"received\"");
            double keys = evidence(m2, m1);
            try (Engine engine = Engine.connect(m1)) {
                engine.publish("secret", 5);
            }
            // The member with a certificate gets the batch; the nodes without one (or with a foreign one) get nothing.
            await().atMost(SOON).until(() -> evidence(m2, m1) == keys + 5);
            assertThat(metric(m2, "orbitkv_cluster_inventory_batches_total", "direction=\"received\"")).isGreaterThan(receivedBefore);
            // A forged batch from the rogue side does not reach the Managers either.
            rogue.eventBus().publish(InventoryRole.BATCHES, Buffer.buffer(new byte[] {1, 2, 3}));
            foreigner.eventBus().publish(InventoryRole.BATCHES, Buffer.buffer(new byte[] {1, 2, 3}));
            // A positive fence instead of a pause: the forged batches went out (each node delivered its own locally),
            // and a later batch of m1's has since reached m2; neither forged batch reached a Manager, and neither of
            // m1's batches reached a node without the cluster's certificate.
            await().atMost(SOON).until(() -> forgedSeenLocally.get() >= 2);
            try (Engine engine = Engine.connect(m1)) {
                engine.publish("after-forgery", 2);
            }
            await().atMost(SOON).until(() -> evidence(m2, m1) == keys + 7);
            assertThat(rogueReceived.get()).isZero();
            assertThat(metric(m1, "orbitkv_cluster_messages_rejected_total", "reason=\"malformed\"")).isZero();
            assertThat(metric(m2, "orbitkv_cluster_messages_rejected_total", "reason=\"malformed\"")).isZero();
        } finally {
            rogue.close().await(30, TimeUnit.SECONDS);
            foreigner.close().await(30, TimeUnit.SECONDS);
        }
    }

    private static int hazelcastPort(LocalCluster.Node node) {
        return Integer.parseInt(cluster.settingsOf(node, Map.of()).get("cluster.hazelcast-port"));
    }

    /** An engine session on a node over TCP, publishing pages of group 0. */
    record Engine(OrbitKvClient client, EngineSession session) implements AutoCloseable {
        static Engine connect(LocalCluster.Node node) throws Exception {
            OrbitKvClient client = OrbitKvClient.connectTcp("127.0.0.1", node.grpcPort(),
                    OrbitKvClient.readToken(node.tokenFile()));
            InstanceIdentity identity = InstanceIdentity.newBuilder().setModelFingerprint("cluster-test")
                    .setRepresentation(Representation.RAW).setLayout("test:NHD").setGeometry("layers=2")
                    .setPageSizeTokens(16).setTpRank(0).setTpSize(1).setPpRank(0).setPpSize(1)
                    .addGroups(GroupSpec.newBuilder().setGroupId(0).setKind(GroupKind.FULL_ATTENTION).setBytesPerPage(PAGE))
                    .build();
            return new Engine(client, client.register(identity, InstanceRole.PREFILL_AND_DECODE).await(10, TimeUnit.SECONDS));
        }

        List<ByteString> publish(String seed, int n) throws Exception {
            List<ByteString> hashes = RunningManager.chain(seed, n);
            AllocatePublishReply allocated = session.allocate(hashes.stream()
                    .map(h -> PageKey.newBuilder().setGroupId(0).setBlockHash(h).build()).toList()).await(10, TimeUnit.SECONDS);
            for (PublishSlot slot : allocated.getSlotsList()) {
                if (slot.getStatus() == SlotStatus.ALLOCATED) {
                    MemorySegment target = session.slot(slot.getSlot());
                    target.fill((byte) seed.hashCode());
                    target.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, seed.hashCode());
                }
            }
            session.seal(allocated.getPublishId(), List.of()).await(10, TimeUnit.SECONDS);
            return hashes;
        }

        @Override
        public void close() throws Exception {
            session.close();
            client.close();
        }
    }
}
