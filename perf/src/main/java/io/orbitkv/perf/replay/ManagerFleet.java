package io.orbitkv.perf.replay;

import io.orbitkv.clusterkit.ClusterCertificates;
import io.orbitkv.clusterkit.LocalEtcd;
import io.orbitkv.perf.engine.InProcessManager;
import io.orbitkv.storage.StorageProxy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The in-process Managers one replay runs against: one, or N independent ones (no peering), or N clustered ones (a real
 * etcd, the clustered event bus for inventory streams, the peer role over mutual TLS).
 *
 * <p>Design note (ownership): the fleet owns the etcd process, the Managers and its temporary directory; {@link #close}
 * stops the Managers (last first), then etcd, then deletes the directory, whether the run succeeded or not, and reports
 * the first failure to stop.
 */
final class ManagerFleet implements AutoCloseable {
    private final List<InProcessManager> managers;
    private final LocalEtcd etcd;
    private final Path dir;
    private final long poolBlocks;

    private ManagerFleet(List<InProcessManager> managers, LocalEtcd etcd, Path dir, long poolBlocks) {
        this.managers = managers;
        this.etcd = etcd;
        this.dir = dir;
        this.poolBlocks = poolBlocks;
    }

    List<InProcessManager> managers() {
        return managers;
    }

    /** Pool pages of each Manager. */
    long poolBlocks() {
        return poolBlocks;
    }

    /**
     * Starts {@code n} Managers, each with {@code poolBlocks} pages of {@code pageBytes} and the {@code settings} given;
     * {@code clustered} joins them (needs etcd) so they fetch from each other.
     */
    static ManagerFleet start(int n, long pageBytes, long poolBlocks, Map<String, String> settings, boolean clustered)
            throws Exception {
        if (clustered && !LocalEtcd.installed()) {
            throw new IllegalArgumentException("clustered Managers need etcd (/usr/bin/etcd): apt-get install etcd-server");
        }
        long slotBytes = StorageProxy.slotBytesOf(pageBytes);
        // Chunk = one slot when a slot is at least the Manager's minimum chunk, so capacity is exactly poolBlocks
        // pages; smaller pages share 64 KiB chunks and the capacity rounds up to fill them.
        long chunk = slotBytes >= (64 << 10) ? slotBytes : 64 << 10;
        long pagesPerChunk = chunk / slotBytes;
        long chunks = (poolBlocks + pagesPerChunk - 1) / pagesPerChunk;
        Path dir = Files.createTempDirectory("orbitkv-replay-fleet-");
        List<InProcessManager> started = new ArrayList<>();
        LocalEtcd etcd = null;
        ManagerFleet fleet = null;
        try {
            if (clustered) {
                ClusterCertificates.create(dir.resolve("certs"), n, List.of("127.0.0.1", "localhost"), Duration.ofDays(1));
                etcd = LocalEtcd.start(dir);
            }
            for (int m = 1; m <= n; m++) {
                Map<String, String> s = new HashMap<>(settings);
                if (clustered) {
                    s.put("cluster.enabled", "true");
                    s.put("cluster.member-id", "manager-" + m);
                    s.put("cluster.etcd-endpoints", etcd.endpoint());
                    s.put("cluster.prefix", "/orbitkv-replay");
                    s.put("cluster.hazelcast-port", String.valueOf(LocalEtcd.freePort()));
                    s.put("cluster.tls.ca", dir.resolve("certs/ca.pem").toString());
                    s.put("cluster.tls.cert", dir.resolve("certs/manager-" + m + ".pem").toString());
                    s.put("cluster.tls.key", dir.resolve("certs/manager-" + m + ".key").toString());
                    s.put("peer.port", String.valueOf(LocalEtcd.freePort()));
                    s.put("peer.transfer-port", String.valueOf(LocalEtcd.freePort()));
                }
                started.add(InProcessManager.start("orbitkv-replay-m" + m + "-", chunks * chunk, chunk, s));
            }
            fleet = new ManagerFleet(started, etcd, dir, chunks * pagesPerChunk);
            if (clustered) {
                fleet.awaitFollowing();
            }
            return fleet;
        } finally {
            if (fleet == null) {
                new ManagerFleet(started, etcd, dir, 0).close();
            }
        }
    }

    /**
     * Members, then inventory: each Manager follows every other's stream (from its first snapshot on) before the first
     * request, so a peer's pages are visible with the stream's lag only, not the cluster's start-up.
     */
    private void awaitFollowing() throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(90).toNanos();
        while (!managers.stream().allMatch(p -> p.manager().membershipRole().orElseThrow().members().size() == managers.size()
                && following(p))) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("the " + managers.size() + " Managers did not follow each other's "
                        + "inventory within 90 s");
            }
            Thread.sleep(50);
        }
    }

    /** Whether {@code on} follows the inventory of every other Manager (its evidence gauge for it exists). */
    private boolean following(InProcessManager on) {
        for (InProcessManager of : managers) {
            String member = of.config().cluster().orElseThrow().memberId();
            if (of != on && on.manager().registry().find("orbitkv.cluster.peer.evidence.keys").tag("member", member)
                    .gauge() == null) {
                return false;
            }
        }
        return true;
    }

    @Override
    public void close() throws Exception {
        Exception first = null;
        for (InProcessManager manager : managers.reversed()) {
            try {
                manager.close();
            } catch (Exception e) {
                first = first == null ? e : first;
            }
        }
        if (etcd != null) {
            etcd.close();
        }
        try (var paths = Files.walk(dir)) {
            paths.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (java.io.IOException ignored) {
            // Best effort: a temporary directory.
        }
        if (first != null) {
            throw first;
        }
    }
}
