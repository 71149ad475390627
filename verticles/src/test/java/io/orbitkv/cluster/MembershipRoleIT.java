package io.orbitkv.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.orbitkv.clusterkit.LocalEtcd;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.model.plan.PeerOwner;
import io.vertx.core.Vertx;
import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import io.orbitkv.model.MemberChange;

/**
 * The membership role against a real etcd process (one per class): joins and leaves, restarts with a new incarnation,
 * and etcd killed and restarted (peers age out after the lease ttl and come back, the member rejoins).
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class MembershipRoleIT {
    @TempDir
    static Path dir;
    static LocalEtcd etcd;
    static int prefixes;

    private final List<Vertx> vertxes = new ArrayList<>();
    private String prefix;

    @BeforeAll
    static void startEtcd() throws Exception {
        assumeTrue(LocalEtcd.installed(), "etcd is not installed (/usr/bin/etcd): install Debian's etcd-server (./scripts/test does when run as root) to run the cluster tests");
        etcd = LocalEtcd.start(dir);
    }

    @AfterAll
    static void stopEtcd() throws Exception {
        if (etcd != null) {
            etcd.close();
        }
    }

    @AfterEach
    void closeAll() throws Exception {
        for (Vertx v : vertxes) {
            v.close().await(20, TimeUnit.SECONDS);
        }
    }

    /** The lease ttl of these tests' members unless a test needs a long one. */
    static final int TTL_S = 2;

    private ClusterSettings settings(String id, int ttlSeconds) {
        return new ClusterSettings(id, List.of(URI.create(etcd.endpoint())), prefix, ttlSeconds, "127.0.0.1", 0, 5701,
                List.of(), null, null, null, 50, 1024, 1024, 0);
    }

    record Started(Vertx vertx, MembershipRole role, List<String> heard) {}

    private Started start(String id, long incarnation) throws Exception {
        return start(id, incarnation, TTL_S);
    }

    private Started start(String id, long incarnation, int ttlSeconds) throws Exception {
        if (prefix == null) {
            prefix = "/orbitkv-test-" + (++prefixes);
        }
        Vertx vertx = Vertx.vertx();
        vertxes.add(vertx);
        MembershipRole role = new MembershipRole(settings(id, ttlSeconds), incarnation, Map.of("hazelcast", "127.0.0.1:1"),
                List.of("dram"), new SimpleMeterRegistry());
        List<String> heard = new CopyOnWriteArrayList<>();
        role.addListener(new MembershipRole.Listener() {
            @Override
            public void onMembership(MemberChange change) {
                heard.add(change.getClass().getSimpleName() + ":" + switch (change) {
                    case MemberChange.Joined j -> j.member().id();
                    case MemberChange.Left l -> l.member().id();
                    case MemberChange.Restarted r -> r.member().id();
                    case MemberChange.Updated u -> u.member().id();
                });
            }

            @Override
            public void onPeersUnknown() {
                heard.add("unknown");
            }

            @Override
            public void onPeersKnown() {
                heard.add("known");
            }
        });
        vertx.deployVerticle(role).await(10, TimeUnit.SECONDS);
        role.joined().await(10, TimeUnit.SECONDS);
        return new Started(vertx, role, heard);
    }

    @Test
    void membersSeeEachOtherJoinAndLeave() throws Exception {
        // A lease ttl far beyond every wait below: a leave heard within them came from the revoke, not from expiry.
        int longTtlS = 120;
        Started a = start("a", 10, longTtlS);
        Started b = start("b", 20, longTtlS);
        await().atMost(Duration.ofSeconds(5)).until(() -> a.role().members().keySet().equals(java.util.Set.of("a", "b")));
        assertThat(a.role().isCurrent(new PeerOwner("b", 20))).isTrue();
        assertThat(a.role().isCurrent(new PeerOwner("b", 19))).as("another incarnation is not current").isFalse();
        assertThat(a.role().isCurrent(new PeerOwner("a", 10))).as("itself is never a peer").isFalse();
        assertThat(b.role().members().get("a").endpoints()).containsEntry("hazelcast", "127.0.0.1:1");
        assertThat(b.role().epoch()).isEqualTo(1);
        // A clean stop revokes the lease: the peer hears the leave at once, not after the ttl.
        b.vertx().close().await(10, TimeUnit.SECONDS);
        vertxes.remove(b.vertx());
        await().atMost(Duration.ofSeconds(30)).until(() -> !a.role().members().containsKey("b"));
        assertThat(a.heard()).contains("Joined:b", "Left:b");
    }

    @Test
    void aRestartedMemberIsANewIncarnationAndTheOldOneIsNotCurrent() throws Exception {
        Started a = start("a", 10);
        Started b = start("b", 20);
        await().atMost(Duration.ofSeconds(5)).until(() -> a.role().isCurrent(new PeerOwner("b", 20)));
        // A crash: the old process's key stays until its lease expires; the new one replaces it at once.
        b.vertx().close();
        vertxes.remove(b.vertx());
        start("b", 30);
        await().atMost(Duration.ofSeconds(6)).until(() -> a.role().isCurrent(new PeerOwner("b", 30)));
        assertThat(a.role().isCurrent(new PeerOwner("b", 20))).isFalse();
    }

    @Test
    void etcdKilledAndRestarted() throws Exception {
        Started a = start("a", 10);
        Started b = start("b", 20);
        await().atMost(Duration.ofSeconds(5)).until(() -> a.role().members().size() == 2 && b.role().members().size() == 2);
        etcd.kill();
        // Peers age out after one lease ttl (2 s) without etcd; each Manager keeps only itself.
        await().atMost(Duration.ofSeconds(8)).until(() -> a.role().members().keySet().equals(java.util.Set.of("a")));
        // The membership view and the listener's "unknown" are separate events: await the second, never race it.
        await().atMost(Duration.ofSeconds(5)).until(() -> a.heard().contains("unknown"));
        assertThat(a.role().etcdReachable()).isFalse();
        assertThat(a.role().isCurrent(new PeerOwner("b", 20))).isFalse();
        etcd.restart();
        await().atMost(Duration.ofSeconds(15)).until(() -> a.role().members().size() == 2 && b.role().members().size() == 2);
        await().atMost(Duration.ofSeconds(5)).until(() -> a.heard().getLast().equals("known"));
        assertThat(a.role().etcdReachable()).isTrue();
        assertThat(a.role().isCurrent(new PeerOwner("b", 20))).isTrue();
        // The watch works again: a new member is seen without another outage.
        start("c", 40);
        await().atMost(Duration.ofSeconds(5)).until(() -> a.role().members().containsKey("c"));
    }
}
