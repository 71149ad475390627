package io.orbitkv.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.orbitkv.clusterkit.ClusterCertificates;
import io.orbitkv.clusterkit.LocalEtcd;
import io.orbitkv.clusterkit.LocalCluster;
import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.engine.Namespaces;
import io.orbitkv.manager.ManagerConfig;
import io.orbitkv.nativeio.shm.SharedMemoryFile;
import io.orbitkv.peer.PeerTransport;
import io.orbitkv.peer.PeerProxy;
import io.orbitkv.peer.PeerVerticle;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.protocol.engine.InstanceRole;
import io.orbitkv.protocol.peer.PeerGrant;
import io.orbitkv.protocol.peer.PeerKey;
import io.orbitkv.protocol.peer.PeerReserveReply;
import io.orbitkv.protocol.peer.PeerReserveRequest;
import io.orbitkv.protocol.peer.PeerTransferGrpcClient;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.HttpVersion;
import io.vertx.core.net.PemKeyCertOptions;
import io.vertx.core.net.PemTrustOptions;
import io.vertx.core.net.SocketAddress;
import io.vertx.grpc.client.GrpcClient;
import java.lang.foreign.Arena;
import java.util.function.Supplier;
import java.util.function.UnaryOperator;
import io.orbitkv.it.RunningManager;
import io.orbitkv.manager.Manager;
import io.orbitkv.planning.PlanningCommands;
import io.orbitkv.planning.PlanningProxy;
import io.orbitkv.model.plan.ReplicaEvidence;
import io.orbitkv.protocol.engine.AllocatePublishReply;
import io.orbitkv.protocol.engine.GroupKind;
import io.orbitkv.protocol.engine.GroupSpec;
import io.orbitkv.protocol.engine.InstanceIdentity;
import io.orbitkv.protocol.engine.PageKey;
import io.orbitkv.protocol.engine.PublishSlot;
import io.orbitkv.protocol.engine.Representation;
import io.orbitkv.protocol.engine.SlotStatus;
import io.orbitkv.model.StateKey;
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
import io.orbitkv.model.PositionedKey;
import io.orbitkv.model.GroupProbe;

/**
 * What the peer ITs share (one etcd and source Manager processes from {@link LocalCluster}, a requester Manager in the
 * test's JVM): the engine identity, the requester's settings and start-up, the bytes a page is published with, and the
 * checks that nothing is left held on the requester. Each IT keeps its own cluster and requester (static fields of the
 * IT), and passes them in; the ITs that drive the peer role and the raw protocol themselves hold theirs in a
 * {@link SourceAndRequester}.
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
        List<PositionedKey> probed = new ArrayList<>();
        for (int i = 0; i < keys.size(); i++) {
            probed.add(new PositionedKey(i, keys.get(i)));
        }
        return new StorageProxy(requester.vertx()).probe(List.of(new GroupProbe(0, probed)))
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

    /** The source's DRAM generations of {@code keys}, once {@code requester}'s inventory holds them all. */
    static List<Long> generations(Manager requester, List<StateKey> keys) {
        List<Long> found = new ArrayList<>();
        await().atMost(SOON).until(() -> {
            found.clear();
            for (StateKey key : keys) {
                List<ReplicaEvidence> peers = peers(requester, key);
                if (peers.isEmpty() || !(peers.getFirst() instanceof ReplicaEvidence.PeerDram dram)) {
                    return false;
                }
                found.add(dram.ownerGeneration());
            }
            return true;
        });
        return List.copyOf(found);
    }

    /** {@code n} zeroed off-heap destinations of {@code bytes} each (owned by an automatic arena). */
    static List<PeerTransport.Destination> destinations(int n, long bytes) {
        List<PeerTransport.Destination> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            out.add(new PeerTransport.Destination(Arena.ofAuto().allocate(bytes, 4096)));
        }
        return out;
    }

    static boolean allZero(MemorySegment segment) {
        return segment.mismatch(Arena.ofAuto().allocate(segment.byteSize())) == -1;
    }

    /** Runs {@code action} on {@code context} (a transport pools connections per context); its result. */
    static <T> Future<T> onContext(Context context, Supplier<Future<T>> action) {
        Promise<T> promise = Promise.promise();
        context.runOnContext(v -> action.get().onComplete(promise));
        return promise.future();
    }

    /**
     * One IT's source process (node 1 of {@code cluster}) and in-JVM requester, with the steps the ITs that drive the
     * peer role and the raw peer protocol themselves share: publish on the source, wait for the evidence, reserve over
     * mutual-TLS gRPC, signal the source, read the requester's pool. {@link #close} stops the requester and the
     * processes and checks none is left.
     */
    static final class SourceAndRequester implements AutoCloseable {
        final Path dir;
        final LocalCluster cluster;
        final LocalCluster.Node source;
        final Manager requester;
        /** The requester's pool, mapped here so tests read the fetched bytes where they landed. */
        final SharedMemoryFile requesterPool;
        final InstanceIdentity identity;
        final byte[] namespace;

        private SourceAndRequester(Path dir, LocalCluster cluster, Manager requester, SharedMemoryFile requesterPool,
                                   InstanceIdentity identity) {
            this.dir = dir;
            this.cluster = cluster;
            this.source = cluster.node(1);
            this.requester = requester;
            this.requesterPool = requesterPool;
            this.identity = identity;
            this.namespace = Namespaces.derive(identity);
        }

        /**
         * The two-Manager start the peer ITs share: certificates for {@code members} members in {@code dir/certs},
         * etcd and the source (manager-1) as processes under {@code prefix} (lease TTL 2 s, SSD off, a 60 s session
         * TTL, free peer ports, then {@code sourceSettings}), and the requester (manager-2) in this JVM with
         * {@code transport} ({@code tls} or {@code plaintext}) and what {@code requester} sets, its 64 MiB pool
         * mapped. Skips (assumption) without etcd; on a failure everything it started is stopped again (checked).
         */
        static SourceAndRequester launch(Path dir, int members, String prefix, Map<String, String> sourceSettings,
                                         String transport, UnaryOperator<LocalCluster.MemberConfig> requester,
                                         InstanceIdentity identity) throws Exception {
            assumeTrue(LocalEtcd.installed(), "etcd is not installed (/usr/bin/etcd): install Debian's etcd-server");
            ClusterCertificates.create(dir.resolve("certs"), members, List.of("127.0.0.1", "localhost"),
                    Duration.ofDays(1));
            Map<String, String> source = new LinkedHashMap<>(Map.of("cluster.lease-ttl-s", "2", "cluster.prefix",
                    prefix, "ssd.enabled", "false", "session.ttl-ms", "60000",
                    "peer.port", String.valueOf(LocalEtcd.freePort()),
                    "peer.transfer-port", String.valueOf(LocalEtcd.freePort())));
            source.putAll(sourceSettings);
            LocalCluster cluster = LocalCluster.start(new LocalCluster.Options(1, dir, ManagerProcessMain.command(),
                    source));
            try {
                return start(dir, cluster, requester.apply(cluster.inProcessMember(2).peer(transport)).settings(),
                        64L << 20, identity);
            } catch (Exception | Error e) {
                ClusterProcesses.closeAndAssertNoneLeft(cluster);
                throw e;
            }
        }

        /**
         * Starts the requester from {@code settings} in this JVM, maps its pool ({@code poolBytes}) and waits until its
         * membership shows the source. On failure the requester is closed again (the caller closes the cluster).
         */
        static SourceAndRequester start(Path dir, LocalCluster cluster, Map<String, String> settings, long poolBytes,
                                        InstanceIdentity identity) throws Exception {
            Manager requester = Manager.start(ManagerConfig.from(settings)).await(120, TimeUnit.SECONDS);
            try {
                SharedMemoryFile pool = SharedMemoryFile.map(requester.poolPath(), poolBytes);
                SourceAndRequester rig = new SourceAndRequester(dir, cluster, requester, pool, identity);
                await().atMost(Duration.ofSeconds(30)).until(() -> requester.membershipRole().orElseThrow().members()
                        .containsKey(rig.source.memberId()));
                return rig;
            } catch (Exception | Error e) {
                requester.close();
                throw e;
            }
        }

        /** Publishes {@code n} chained pages of {@code seed} on the source over its engine door; answers their keys. */
        List<StateKey> publish(String seed, int n) throws Exception {
            try (OrbitKvClient client = OrbitKvClient.connectTcp("127.0.0.1", source.grpcPort(),
                    OrbitKvClient.readToken(source.tokenFile()))) {
                EngineSession session = client.register(identity, InstanceRole.PREFILL_AND_DECODE)
                        .await(10, TimeUnit.SECONDS);
                List<ByteString> hashes = RunningManager.chain(seed, n);
                PeerITFixture.publish(session, seed, hashes, 0);
                session.close();
                return hashes.stream().map(h -> StateKey.of(namespace, 0, h.toByteArray())).toList();
            }
        }

        /** The source's generations of {@code keys}, once the requester's inventory holds them all. */
        List<Long> generations(List<StateKey> keys) {
            return PeerITFixture.generations(requester, keys);
        }

        PeerOwner owner() {
            return new PeerOwner(source.memberId(), source.incarnation());
        }

        PeerProxy peer() {
            return requester.peer().orElseThrow();
        }

        PeerVerticle peerRole() {
            return requester.peerRole().orElseThrow();
        }

        StorageCommands.StorageStats requesterStorage() throws Exception {
            return new StorageProxy(requester.vertx()).stats().await(5, TimeUnit.SECONDS);
        }

        /** A sample of the source's metrics (-1 when absent or the source is not running). */
        double sourceMetric(String name) {
            return cluster.metric(source, name, null).orElse(-1);
        }

        int residentHere(List<StateKey> keys) throws Exception {
            return PeerITFixture.residentHere(requester, keys);
        }

        /** Sends signal {@code name} (STOP, CONT) to the source process by pid. */
        void signal(String name) throws Exception {
            Process kill = new ProcessBuilder("kill", "-" + name, String.valueOf(source.pid())).inheritIO().start();
            assertThat(kill.waitFor(10, TimeUnit.SECONDS)).isTrue();
            assertThat(kill.exitValue()).isZero();
        }

        /** A peer-protocol client of the source's gRPC port with manager-2's certificate (the requester's). */
        PeerTransferGrpcClient rawClient(Vertx vertx) {
            return rawClient(vertx, "manager-2");
        }

        /** A peer-protocol client of the source's gRPC port with {@code member}'s certificate. */
        PeerTransferGrpcClient rawClient(Vertx vertx, String member) {
            GrpcClient grpc = GrpcClient.client(vertx, new HttpClientOptions().setSsl(true).setUseAlpn(true)
                    .setProtocolVersion(HttpVersion.HTTP_2).setVerifyHost(true)
                    .setKeyCertOptions(new PemKeyCertOptions().setCertPath(dir.resolve("certs/" + member + ".pem").toString())
                            .setKeyPath(dir.resolve("certs/" + member + ".key").toString()))
                    .setTrustOptions(new PemTrustOptions().addCertPath(dir.resolve("certs/ca.pem").toString())));
            String endpoint = requester.membershipRole().orElseThrow().members().get(source.memberId()).endpoints()
                    .get("peer");
            return PeerTransferGrpcClient.create(grpc, SocketAddress.inetSocketAddress(
                    Integer.parseInt(endpoint.substring(endpoint.lastIndexOf(':') + 1)), "127.0.0.1"));
        }

        /** Reserves {@code keys} on the source over {@code grpc} (whose certificate names the requester); the grant. */
        PeerGrant grant(PeerTransferGrpcClient grpc, long requesterIncarnation, List<StateKey> keys,
                        List<Long> generations) throws Exception {
            PeerReserveRequest.Builder r = PeerReserveRequest.newBuilder()
                    .setNamespace(ByteString.copyFrom(namespace))
                    .setSourceIncarnation(source.incarnation())
                    .setRequesterIncarnation(requesterIncarnation).setLeaseMs(30_000);
            for (int i = 0; i < keys.size(); i++) {
                r.addKeys(PeerKey.newBuilder().setGroupId(0).setBlockHash(ByteString.copyFrom(keys.get(i).blockHash()))
                        .setGeneration(generations.get(i)));
            }
            PeerReserveReply reply = grpc.reserve(r.build()).await(10, TimeUnit.SECONDS);
            assertThat(reply.hasGrant()).as("granted: " + reply).isTrue();
            return reply.getGrant();
        }

        /** As the in-JVM requester (manager-2). */
        PeerGrant grant(PeerTransferGrpcClient grpc, List<StateKey> keys, List<Long> generations) throws Exception {
            return grant(grpc, requester.membershipRole().orElseThrow().incarnation(), keys, generations);
        }

        /** Unmaps the pool, stops the requester, then the processes (checking none is left). */
        @Override
        public void close() throws Exception {
            try {
                requesterPool.close();
            } finally {
                try {
                    requester.close();
                } finally {
                    ClusterProcesses.closeAndAssertNoneLeft(cluster);
                }
            }
        }
    }
}
