package io.orbitkv.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.orbitkv.clusterkit.LocalEtcd;
import io.orbitkv.clusterkit.LocalCluster;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.awaitility.core.ConditionTimeoutException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Managers started at the same instant (real processes, one etcd) form ONE event-bus cluster: each found no member in
 * etcd, so without the founder key ({@link ClusterVertx#seedsFromEtcd}) each would form a cluster of its own and
 * {@code orbitkv_cluster_eventbus_nodes} would stay 1 while {@code orbitkv_cluster_members} reaches 3. Inventory then
 * flows between all of them.
 */
@Timeout(value = 150, unit = TimeUnit.SECONDS)
class ClusterStartIT {
    @TempDir
    Path dir;

    @Test
    void managersStartedTogetherFormOneEventBusCluster() throws Exception {
        assumeTrue(LocalEtcd.installed(), "etcd is not installed (/usr/bin/etcd): install Debian's etcd-server "
                + "(./scripts/test does when run as root) to run the cluster tests");
        LocalCluster cluster = LocalCluster.start(new LocalCluster.Options(3, dir, ManagerProcessMain.command(), Map.of(
                "cluster.lease-ttl-s", "2", "cluster.prefix", "/orbitkv-start-test", "ssd.enabled", "false",
                "session.ttl-ms", "60000")), true);
        List<Long> pids = cluster.nodes().stream().map(LocalCluster.Node::pid).toList();
        long etcdPid = cluster.etcd().pid();
        try {
            try {
                await().atMost(Duration.ofSeconds(60)).until(() -> cluster.nodes().stream().allMatch(node ->
                        metric(cluster, node, "orbitkv_cluster_members") == 3
                                && metric(cluster, node, "orbitkv_cluster_eventbus_nodes") == 3));
            } catch (ConditionTimeoutException e) {
                for (LocalCluster.Node node : cluster.nodes()) {
                    System.err.println("==== " + node + ": members " + metric(cluster, node, "orbitkv_cluster_members")
                            + ", event-bus nodes " + metric(cluster, node, "orbitkv_cluster_eventbus_nodes") + "\n"
                            + Files.readString(node.log()));
                }
                throw e;
            }
            LocalCluster.Node m1 = cluster.node(1);
            try (ClusterFaultIT.Engine engine = ClusterFaultIT.Engine.connect(m1)) {
                engine.publish("together", 4);
            }
            String ofM1 = "member=\"" + m1.memberId() + "\"";
            await().atMost(Duration.ofSeconds(20)).until(() ->
                    cluster.metric(cluster.node(2), "orbitkv_cluster_peer_evidence_keys", ofM1).orElse(0) == 4
                            && cluster.metric(cluster.node(3), "orbitkv_cluster_peer_evidence_keys", ofM1).orElse(0) == 4);
        } finally {
            cluster.close();
        }
        for (long pid : pids) {
            assertThat(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false)).as("Manager pid %d left running", pid)
                    .isFalse();
        }
        assertThat(ProcessHandle.of(etcdPid).map(ProcessHandle::isAlive).orElse(false)).as("etcd left running").isFalse();
    }

    private static double metric(LocalCluster cluster, LocalCluster.Node node, String name) {
        return cluster.metric(node, name, "").orElse(-1);
    }
}
