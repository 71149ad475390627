package io.orbitkv.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.it.RunningManager;
import io.orbitkv.manager.Manager;
import io.orbitkv.planning.PlanningCommands;
import io.orbitkv.planning.PlanningProxy;
import io.orbitkv.planning.ReplicaEvidence;
import io.orbitkv.protocol.engine.AllocatePublishReply;
import io.orbitkv.protocol.engine.GroupKind;
import io.orbitkv.protocol.engine.GroupSpec;
import io.orbitkv.protocol.engine.InstanceIdentity;
import io.orbitkv.protocol.engine.PageKey;
import io.orbitkv.protocol.engine.PublishSlot;
import io.orbitkv.protocol.engine.Representation;
import io.orbitkv.protocol.engine.SlotStatus;
import io.orbitkv.storage.ImageStore;
import io.orbitkv.storage.StateKey;
import io.orbitkv.storage.StorageCommands;
import io.orbitkv.storage.StorageProxy;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * What the peer ITs share (one etcd and source Manager processes from {@link LocalCluster}, a requester Manager in the
 * test's JVM): the engine identity, the requester's settings and start-up, the bytes a page is published with, and the
 * checks that nothing is left held on the requester. Each IT keeps its own cluster and requester (static fields of the
 * IT), and passes them in.
 */
final class PeerITFixture {
    static final int PAGE = 256 << 10;
    static final int PAGE_TOKENS = 16;
    static final Duration SOON = Duration.ofSeconds(20);

    private PeerITFixture() {}

    /** A RAW single-group engine identity of 256 KiB pages; {@code fingerprint} makes the namespace the IT's own. */
    static InstanceIdentity identity(String fingerprint) {
        return InstanceIdentity.newBuilder().setModelFingerprint(fingerprint)
                .setRepresentation(Representation.RAW).setLayout("test:NHD").setGeometry("layers=2")
                .setPageSizeTokens(PAGE_TOKENS).setTpRank(0).setTpSize(1).setPpRank(0).setPpSize(1)
                .addGroups(GroupSpec.newBuilder().setGroupId(0).setKind(GroupKind.FULL_ATTENTION).setBytesPerPage(PAGE))
                .build();
    }

    /** The first 8 bytes of page {@code i} of {@code seed} (how a test finds the page's extent on a Manager's SSD). */
    static long marker(String seed, int i) {
        return seed.hashCode() * 31L + i;
    }

    /** The bytes page {@code i} of {@code seed} is published with: a fill byte, the marker first, {@code i} last. */
    static void fill(MemorySegment target, String seed, int i) {
        target.fill((byte) (seed.hashCode() + i));
        target.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, marker(seed, i));
        target.set(ValueLayout.JAVA_LONG_UNALIGNED, target.byteSize() - 8, i);
    }

    /**
     * Publishes the chained pages {@code hashes} (positions {@code first}...) through {@code session}, each filled by
     * {@link #fill}; every slot must be newly allocated.
     */
    static void publish(EngineSession session, String seed, List<ByteString> hashes, int first) throws Exception {
        AllocatePublishReply allocated = session.allocate(hashes.stream()
                .map(h -> PageKey.newBuilder().setGroupId(0).setBlockHash(h).build()).toList()).await(10, TimeUnit.SECONDS);
        int i = first;
        for (PublishSlot slot : allocated.getSlotsList()) {
            assertThat(slot.getStatus()).isEqualTo(SlotStatus.ALLOCATED);
            fill(session.slot(slot.getSlot()), seed, i++);
        }
        session.seal(allocated.getPublishId(), List.of()).await(10, TimeUnit.SECONDS);
    }

    /**
     * The settings of requester {@code member} joining {@code cluster} under {@code prefix} with its certificate from
     * {@code dir/certs}: ephemeral gRPC and metrics ports, free Hazelcast and peer ports, a 16 MiB pool, SSD off. The
     * caller overrides what its tests need before {@link #startRequester}.
     */
    static Map<String, String> requesterSettings(Path dir, LocalCluster cluster, String member, String prefix,
                                                 String leaseTtlSeconds) throws Exception {
        Map<String, String> s = new LinkedHashMap<>();
        s.put("data-dir", dir.resolve(member).toString());
        s.put("grpc.tcp-port", "0");
        s.put("metrics.port", "0");
        s.put("pool.size", "16MiB");
        s.put("ssd.enabled", "false");
        s.put("cluster.enabled", "true");
        s.put("cluster.member-id", member);
        s.put("cluster.etcd-endpoints", cluster.etcd().endpoint());
        s.put("cluster.prefix", prefix);
        s.put("cluster.lease-ttl-s", leaseTtlSeconds);
        s.put("cluster.hazelcast-port", String.valueOf(LocalEtcd.freePort()));
        s.put("cluster.tls.ca", dir.resolve("certs/ca.pem").toString());
        s.put("cluster.tls.cert", dir.resolve("certs/" + member + ".pem").toString());
        s.put("cluster.tls.key", dir.resolve("certs/" + member + ".key").toString());
        s.put("peer.port", String.valueOf(LocalEtcd.freePort()));
        s.put("peer.transfer-port", String.valueOf(LocalEtcd.freePort()));
        Files.createDirectories(dir.resolve(member));
        return s;
    }

    /** Starts a requester Manager in this JVM and waits until its membership shows {@code source}. */
    static Manager startRequester(Map<String, String> settings, LocalCluster.Node source) throws Exception {
        Manager requester = Manager.start(RunningManager.config(settings)).await(120, TimeUnit.SECONDS);
        await().atMost(Duration.ofSeconds(30)).until(() -> requester.membershipRole().orElseThrow().members()
                .containsKey(source.memberId()));
        return requester;
    }

    /** The peer records of {@code key} in {@code requester}'s inventory. */
    static List<ReplicaEvidence> peers(Manager requester, StateKey key) throws Exception {
        return requester.inventoryRole().orElseThrow().replicas(key).await(5, TimeUnit.SECONDS).peers();
    }

    /** How many of {@code keys} (positions 0.. of group 0) are sealed in {@code requester}'s pool. */
    static int residentHere(Manager requester, List<StateKey> keys) throws Exception {
        List<ImageStore.PositionedKey> probed = new ArrayList<>();
        for (int i = 0; i < keys.size(); i++) {
            probed.add(new ImageStore.PositionedKey(i, keys.get(i)));
        }
        return new StorageProxy(requester.vertx()).probe(List.of(new ImageStore.GroupProbe(0, probed)))
                .await(5, TimeUnit.SECONDS).groups().getFirst().sealed().cardinality();
    }

    /** A sample of {@code requester}'s own metrics (-1 when absent). */
    static double metric(Manager requester, String name) {
        return LocalCluster.sample(requester.registry().scrape(), name, null).orElse(-1);
    }

    /**
     * The requester holds nothing: no lease of {@code engine} (when given), no plan executing or segment lease held,
     * no pinned image, no unsealed image, no open publish.
     */
    static void assertRequesterHoldsNothing(Manager requester, EngineSession engine) throws Exception {
        if (engine != null) {
            RunningManager.assertNoLeases(engine);
        }
        await().atMost(SOON).untilAsserted(() -> {
            PlanningCommands.PlanningStats planning = new PlanningProxy(requester.vertx()).stats().await(5, TimeUnit.SECONDS);
            assertThat(planning.executing()).as("executing plans").isZero();
            assertThat(planning.heldLeases()).as("segment leases").isZero();
            StorageCommands.StorageStats stats = new StorageProxy(requester.vertx()).stats().await(5, TimeUnit.SECONDS);
            assertThat(stats.pinnedImages()).as("pinned images here").isZero();
            assertThat(stats.unsealedImages()).as("unsealed images here").isZero();
            assertThat(stats.openPublishes()).as("open publishes here").isZero();
        });
    }
}
