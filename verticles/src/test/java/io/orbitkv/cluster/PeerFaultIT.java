package io.orbitkv.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.orbitkv.clusterkit.ClusterCertificates;
import io.orbitkv.clusterkit.LocalEtcd;
import io.orbitkv.clusterkit.LocalCluster;
import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.engine.Namespaces;
import io.orbitkv.it.RunningManager;
import io.orbitkv.manager.Manager;
import io.orbitkv.peer.PeerException;
import io.orbitkv.peer.PeerCommands;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.model.plan.ReplicaEvidence;
import io.orbitkv.protocol.engine.InstanceIdentity;
import io.orbitkv.protocol.engine.InstanceRole;
import io.orbitkv.model.StateKey;
import io.orbitkv.storage.StorageCommands;
import io.orbitkv.storage.StorageProxy;
import io.vertx.core.Future;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Peer faults with real processes, beside {@link PeerTransferIT}: etcd and the source Manager (manager-1) as
 * processes; a requester Manager in this JVM (manager-3: the test reads its pool and calls its peer role); and, for
 * the requester-killed fault, a second requester Manager as a process (manager-2, {@link PeerHolderProcessMain}) that
 * acquires a source lease and is SIGKILLed while holding it. The source's test hook stalls leases of 16+ pages half
 * way, so a transfer is reliably in the middle of its payload when the fault is injected.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@Timeout(value = 150, unit = TimeUnit.SECONDS)
class PeerFaultIT {
    static final int PAGE = PeerITFixture.PAGE;
    static final Duration SOON = Duration.ofSeconds(20);
    static final String PREFIX = "/orbitkv-peer-fault-test";
    /** The member-key ttl: longer than the SIGSTOP window, so the stopped source stays a member. */
    static final String TTL_S = "5";

    @TempDir
    static Path dir;
    static LocalCluster cluster;
    static LocalCluster.Node source;
    static Manager requester;
    static byte[] namespace;

    @BeforeAll
    static void start() throws Exception {
        assumeTrue(LocalEtcd.installed(), "etcd is not installed (/usr/bin/etcd): install Debian's etcd-server");
        ClusterCertificates.create(dir.resolve("certs"), 3, List.of("127.0.0.1", "localhost"), Duration.ofDays(1));
        cluster = LocalCluster.start(new LocalCluster.Options(1, dir, ManagerProcessMain.command(), Map.of(
                "cluster.lease-ttl-s", TTL_S, "cluster.prefix", PREFIX, "ssd.enabled", "false",
                "session.ttl-ms", "60000", "pool.size", "16MiB", "peer.port", String.valueOf(LocalEtcd.freePort()),
                "peer.transfer-port", String.valueOf(LocalEtcd.freePort()), "fault-injection.peer.stall-lease-pages", "16",
                "peer.max-lease-ms", "30000")));
        source = cluster.node(1);
        requester = PeerITFixture.startRequester(requesterSettings("manager-3"), source);
        namespace = Namespaces.derive(identity());
    }

    /**
     * Warming off: its probe is a real one-page source lease, and these tests count the source's leases and pins
     * exactly.
     */
    static Map<String, String> requesterSettings(String member) throws Exception {
        Map<String, String> settings = PeerITFixture.requesterSettings(dir, cluster, member, PREFIX, TTL_S);
        settings.put("peer.warm-connections", "0");
        return settings;
    }

    @AfterAll
    static void stop() throws Exception {
        if (requester != null) {
            requester.close();
        }
        if (cluster != null) {
            ClusterProcesses.closeAndAssertNoneLeft(cluster);
        }
    }

    static InstanceIdentity identity() {
        return PeerITFixture.identity("peer-fault-test");
    }

    static List<StateKey> publish(String seed, int n) throws Exception {
        try (OrbitKvClient client = OrbitKvClient.connectTcp("127.0.0.1", source.grpcPort(),
                OrbitKvClient.readToken(source.tokenFile()))) {
            EngineSession session = client.register(identity(), InstanceRole.PREFILL_AND_DECODE).await(10, TimeUnit.SECONDS);
            List<ByteString> hashes = RunningManager.chain(seed, n);
            PeerITFixture.publish(session, seed, hashes, 0);
            session.close();
            return hashes.stream().map(h -> StateKey.of(namespace, 0, h.toByteArray())).toList();
        }
    }

    static List<Long> generations(List<StateKey> keys) {
        List<Long> found = new ArrayList<>();
        await().atMost(SOON).until(() -> {
            found.clear();
            for (StateKey key : keys) {
                List<ReplicaEvidence> peers = PeerITFixture.peers(requester, key);
                if (peers.isEmpty() || !(peers.getFirst() instanceof ReplicaEvidence.PeerDram dram)) {
                    return false;
                }
                found.add(dram.ownerGeneration());
            }
            return true;
        });
        return List.copyOf(found);
    }

    static PeerOwner owner() {
        return new PeerOwner(source.memberId(), source.incarnation());
    }

    static double sourceMetric(String name) {
        return cluster.metric(source, name, null).orElse(-1);
    }

    /** The source holds nothing for peers any more: no lease (granted or with a deferred unpin), no pin. */
    static void awaitSourceHoldsNothing() {
        await().atMost(SOON).untilAsserted(() -> {
            assertThat(sourceMetric("orbitkv_peer_source_leases")).isZero();
            assertThat(sourceMetric("orbitkv_images_pinned")).isZero();
        });
    }

    static int residentHere(List<StateKey> keys) throws Exception {
        return PeerITFixture.residentHere(requester, keys);
    }

    static void signal(String name) throws Exception {
        Process kill = new ProcessBuilder("kill", "-" + name, String.valueOf(source.pid())).inheritIO().start();
        assertThat(kill.waitFor(10, TimeUnit.SECONDS)).isTrue();
        assertThat(kill.exitValue()).isZero();
    }

    @Test
    @Order(1)
    void aSourceStoppedWithSigstopMidTransferTimesOutWithinTheBudgetAndReleasesItsPinsOnceResumed() throws Exception {
        List<StateKey> keys = publish("sigstop", 16); // a 16-page lease: the source sends 8 pages, then stalls
        List<Long> generations = generations(keys);
        double pinnedBefore = sourceMetric("orbitkv_images_pinned");
        assertThat(pinnedBefore).isZero();
        long before = requester.peerRole().orElseThrow().transport().receivedBytes();
        Duration budget = Duration.ofSeconds(3);
        long started = System.nanoTime();
        Future<PeerCommands.Fetched> fetch = requester.peer().orElseThrow().fetch(owner(), namespace, keys, generations,
                budget);
        await().atMost(SOON).until(() -> requester.peerRole().orElseThrow().transport().receivedBytes() - before >= 8L * PAGE);
        assertThat(fetch.isComplete()).isFalse();
        assertThat(sourceMetric("orbitkv_images_pinned")).isEqualTo(16.0); // the source's lease pins them
        signal("STOP"); // mid-transfer: the payload has started
        PeerException e;
        try {
            ExecutionException failed = assertThrows(ExecutionException.class,
                    () -> fetch.toCompletionStage().toCompletableFuture().get(30, TimeUnit.SECONDS));
            assertThat(failed.getCause()).isInstanceOf(PeerException.class);
            e = (PeerException) failed.getCause();
            assertThat(Duration.ofNanos(System.nanoTime() - started)).isLessThan(budget.plusSeconds(2));
            // The requester's slots are fenced and freed while the source is still stopped: nothing was served.
            StorageCommands.StorageStats stats = new StorageProxy(requester.vertx()).stats().await(5, TimeUnit.SECONDS);
            assertThat(stats.unsealedImages()).isZero();
            assertThat(stats.openPublishes()).isZero();
            assertThat(residentHere(keys)).isZero();
        } finally {
            signal("CONT");
        }
        assertThat(e.kind()).isEqualTo(PeerException.Kind.TIMEOUT);
        assertThat(e.beforePayload()).isFalse(); // after submission: the same segment is not retried elsewhere unfenced
        // Resumed, the source ends the lease (its expiry has passed; the requester's Release was queued meanwhile) and,
        // once its stalled send sees the requester's connection closed, drops the pins.
        awaitSourceHoldsNothing();
        assertThat(requester.membershipRole().orElseThrow().members()).containsKey(source.memberId());
    }

    @Test
    @Order(2)
    void aRequesterProcessKilledWhileHoldingASourceLeaseLosesItsPinsWhenMembershipSaysItLeft() throws Exception {
        List<StateKey> keys = publish("holder", 2);
        List<Long> generations = generations(keys);
        double departedBefore = sourceMetric("orbitkv_peer_leases_departed_total");
        double expiredBefore = sourceMetric("orbitkv_peer_leases_expired_total");
        Path holdFile = dir.resolve("hold");
        Path log = dir.resolve("manager-2.log");
        List<String> command = new ArrayList<>(PeerHolderProcessMain.command(holdFile));
        requesterSettings("manager-2").forEach((k, v) -> {
            command.add("--set");
            command.add(k + "=" + v);
        });
        Process holder = new ProcessBuilder(command).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile())).start();
        try {
            await().atMost(Duration.ofSeconds(60)).until(() -> requester.membershipRole().orElseThrow().members()
                    .containsKey("manager-2") && sourceMetric("orbitkv_cluster_members") == 3.0);
            StringBuilder file = new StringBuilder(source.memberId() + " " + source.incarnation() + "\n"
                    + HexFormat.of().formatHex(namespace) + "\n");
            for (int i = 0; i < keys.size(); i++) {
                file.append("0 ").append(HexFormat.of().formatHex(keys.get(i).blockHash())).append(' ')
                        .append(generations.get(i)).append('\n');
            }
            Path partial = dir.resolve("hold.tmp");
            Files.writeString(partial, file);
            Files.move(partial, holdFile);
            await().atMost(SOON).until(() -> Files.readString(log).contains("PEER HELD 2"));
            assertThat(sourceMetric("orbitkv_peer_source_leases")).isEqualTo(1.0);
            assertThat(sourceMetric("orbitkv_images_pinned")).isEqualTo(2.0);
            holder.destroyForcibly(); // SIGKILL: no Release, no clean leave
            assertThat(holder.waitFor(20, TimeUnit.SECONDS)).isTrue();
            // Its member key lapses (ttl 5 s, long before the 30 s lease expiry): the source drops the lease and its pins.
            awaitSourceHoldsNothing();
            assertThat(sourceMetric("orbitkv_peer_leases_departed_total")).isEqualTo(departedBefore + 1);
            assertThat(sourceMetric("orbitkv_peer_leases_expired_total")).isEqualTo(expiredBefore);
        } finally {
            holder.destroyForcibly();
            holder.waitFor(20, TimeUnit.SECONDS);
            // A killed Manager cannot remove its pool file: the test does (owner-only, named by its pid).
            try (var pools = Files.list(Path.of("/dev/shm"))) {
                for (Path pool : pools.filter(p -> p.getFileName().toString().startsWith("orbitkv-pool-" + holder.pid() + "-"))
                        .toList()) {
                    Files.deleteIfExists(pool);
                }
            }
        }
        assertThat(holder.isAlive()).isFalse();
    }
}
