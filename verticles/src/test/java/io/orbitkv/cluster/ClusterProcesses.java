package io.orbitkv.cluster;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.clusterkit.LocalCluster;
import java.util.List;

/** What every cluster test asserts at its end: closing the cluster left no Manager process and no etcd running. */
final class ClusterProcesses {
    private ClusterProcesses() {}

    static void closeAndAssertNoneLeft(LocalCluster cluster) throws InterruptedException {
        List<Long> pids = cluster.nodes().stream().filter(LocalCluster.Node::alive).map(LocalCluster.Node::pid).toList();
        long etcdPid = cluster.etcd().pid();
        cluster.close();
        for (long pid : pids) {
            assertThat(alive(pid)).as("Manager pid %d left running", pid).isFalse();
        }
        assertThat(alive(etcdPid)).as("etcd pid %d left running", etcdPid).isFalse();
    }

    private static boolean alive(long pid) {
        return ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false);
    }
}
