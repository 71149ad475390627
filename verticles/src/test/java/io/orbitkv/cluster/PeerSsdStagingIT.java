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
import io.orbitkv.model.cost.CostEstimateKey;
import io.orbitkv.model.cost.CostEstimateResult;
import io.orbitkv.model.cost.CostPath;
import io.orbitkv.engine.Namespaces;
import io.orbitkv.it.RunningManager;
import io.orbitkv.manager.Manager;
import io.orbitkv.nativeio.shm.SharedMemoryFile;
import io.orbitkv.peer.PeerException;
import io.orbitkv.peer.PeerCommands;
import io.orbitkv.peer.PeerProxy;
import io.orbitkv.peer.PeerVerticle;
import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.peer.PeerExecutionOwner;
import io.orbitkv.recovery.BlockRange;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.model.plan.PlannedPage;
import io.orbitkv.model.plan.PlannedSegment;
import io.orbitkv.model.plan.PlanningException;
import io.orbitkv.model.plan.PlanningFailure;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.model.plan.ReplicaEvidence;
import io.orbitkv.protocol.engine.AllocatePublishReply;
import io.orbitkv.protocol.engine.GroupChain;
import io.orbitkv.protocol.engine.InstanceIdentity;
import io.orbitkv.protocol.engine.InstanceRole;
import io.orbitkv.protocol.engine.LeasedPage;
import io.orbitkv.protocol.engine.PageKey;
import io.orbitkv.protocol.engine.QueryReply;
import io.orbitkv.protocol.engine.QueryStatus;
import io.orbitkv.protocol.peer.PeerKey;
import io.orbitkv.protocol.peer.PeerPage;
import io.orbitkv.protocol.peer.PeerRejection;
import io.orbitkv.protocol.peer.PeerReleaseRequest;
import io.orbitkv.protocol.peer.PeerReserveReply;
import io.orbitkv.protocol.peer.PeerReserveRequest;
import io.orbitkv.protocol.peer.PeerTransferGrpcClient;
import io.orbitkv.model.StateKey;
import io.orbitkv.storage.StorageProxy;
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
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Stream;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.MemberRecord;

/**
 * Peer SSD staging with real processes: etcd and the source Manager (manager-1, SSD tier on, a 16 MiB pool, at most
 * 1 MiB of peer staging) as processes, the requester (manager-2) a Manager in this JVM. Set-up publishes 7 pages on
 * the source, and a second chain of 4 that an engine on the requester demands, waits until they are committed to its
 * SSD (the requester's inventory shows peer SSD evidence), then fills the source's pool so that those 11 are evicted
 * from its DRAM and live only on its SSD, and frees the filler's last allocation again so that staging needs no
 * eviction: the source's pool bytes at that point are the baseline every test returns to. The first test is the
 * requester's planner choosing HOST_FROM_PEER_SSD for an engine demand; the last restarts the source process (a new
 * incarnation that recovers its SSD): the old incarnation's evidence is rejected before any payload, and what the new
 * one recovered from its SSD is served over the same route.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@Timeout(value = 150, unit = TimeUnit.SECONDS)
class PeerSsdStagingIT {
    static final int PAGE = PeerITFixture.PAGE;
    static final int POOL_PAGES = 64;
    static final int SSD_PAGES = 7;
    /** A second chain, SSD-only on the source like the first, that an engine on the requester demands. */
    static final int DEMANDED_PAGES = 4;
    static final String DEMANDED_SEED = "demanded";
    /** The filler pages that stay in the source's DRAM. */
    static final int FILLER_PAGES = POOL_PAGES - SSD_PAGES - DEMANDED_PAGES;
    /** Demands here settle within this (asserted), well inside the configured budget below. */
    static final long WAIT_BUDGET_MS = 8000;
    /**
     * The requester's query.wait-budget-ms: a demand held at the reserve gate across a real restart of the source
     * spends its budget on the restart, which is a new JVM joining etcd and the event-bus cluster: 2-5 s on an idle
     * machine, 27-39 s measured on a loaded 2-core one. It must outlast that and leave room for the replan, or the
     * attempt times out while still held and the demand ends MISS (what the restart test then reports, with the time
     * the hold took).
     */
    static final long QUERY_BUDGET_MS = 75_000;
    /**
     * The requester's peer.max-lease-ms, which caps a peer attempt (reserve to READY): above the budget, so that the
     * reserve held across a real restart is bounded by the budget less the fallback reserve, not by the 10 s default.
     */
    static final long REQUESTER_MAX_LEASE_MS = 90_000;
    static final Duration SOON = Duration.ofSeconds(20);
    static final String SEED = "staged";

    @TempDir
    static Path dir;
    static LocalCluster cluster;
    static LocalCluster.Node source;
    static Manager requester;
    static SharedMemoryFile requesterPool;
    static byte[] namespace;
    static List<StateKey> onSsd;
    static List<Long> ssdGenerations;
    static List<ByteString> demandedHashes;
    static List<StateKey> demanded;
    static double baselineRequestedBytes;
    static double baselineImages;

    @BeforeAll
    static void start() throws Exception {
        assumeTrue(LocalEtcd.installed(), "etcd is not installed (/usr/bin/etcd): install Debian's etcd-server");
        ClusterCertificates.create(dir.resolve("certs"), 3, List.of("127.0.0.1", "localhost"), Duration.ofDays(1));
        cluster = LocalCluster.start(new LocalCluster.Options(1, dir, ManagerProcessMain.command(), Map.ofEntries(
                Map.entry("cluster.lease-ttl-s", "2"), Map.entry("cluster.prefix", "/orbitkv-peer-ssd-test"),
                Map.entry("pool.size", (POOL_PAGES * PAGE / (1 << 20)) + "MiB"), Map.entry("ssd.enabled", "true"),
                Map.entry("ssd.extent", "256KiB"), Map.entry("ssd.capacity", "64MiB"),
                Map.entry("session.ttl-ms", "60000"), Map.entry("peer.port", String.valueOf(LocalEtcd.freePort())),
                Map.entry("peer.transfer-port", String.valueOf(LocalEtcd.freePort())),
                Map.entry("peer.staging-bytes", "1MiB"))));
        source = cluster.node(1);
        Map<String, String> s = PeerITFixture.requesterSettings(dir, cluster, "manager-2", "/orbitkv-peer-ssd-test", "2");
        s.put("pool.size", "64MiB");
        s.put("cost.observations", "true");
        s.put("query.wait-budget-ms", String.valueOf(QUERY_BUDGET_MS));
        s.put("peer.max-lease-ms", String.valueOf(REQUESTER_MAX_LEASE_MS));
        requester = PeerITFixture.startRequester(s, source);
        requesterPool = SharedMemoryFile.map(requester.poolPath(), 64L << 20);
        namespace = Namespaces.derive(identity());

        try (OrbitKvClient client = OrbitKvClient.connectTcp("127.0.0.1", source.grpcPort(),
                OrbitKvClient.readToken(source.tokenFile()))) {
            EngineSession session = client.register(identity(), InstanceRole.PREFILL_AND_DECODE).await(10, TimeUnit.SECONDS);
            onSsd = publish(session, SEED, RunningManager.chain(SEED, SSD_PAGES), 0);
            demandedHashes = RunningManager.chain(DEMANDED_SEED, DEMANDED_PAGES);
            demanded = publish(session, DEMANDED_SEED, demandedHashes, 0);
            ssdGenerations = ssdGenerations(onSsd); // committed on the source's SSD
            ssdGenerations(demanded);
            List<ByteString> filler = RunningManager.chain("filler", FILLER_PAGES);
            for (int from = 0; from < filler.size(); from += 16) {
                publish(session, "filler", filler.subList(from, Math.min(filler.size(), from + 16)), from);
            }
            // The pool is full: this allocation evicts the eldest images (the 11 on SSD); aborting it frees their room.
            AllocatePublishReply last = session.allocate(RunningManager.chain("evictor", SSD_PAGES + DEMANDED_PAGES).stream()
                    .map(h -> PageKey.newBuilder().setGroupId(0).setBlockHash(h).build()).toList()).await(10, TimeUnit.SECONDS);
            session.abort(last.getPublishId()).await(10, TimeUnit.SECONDS);
            session.close();
        }
        await().atMost(SOON).until(() -> onlyOnPeerSsd(onSsd) && onlyOnPeerSsd(demanded));
        baselineRequestedBytes = sourceMetric("orbitkv_pool_requested_bytes");
        baselineImages = sourceMetric("orbitkv_images");
        assertThat(baselineImages).isEqualTo(FILLER_PAGES);
    }

    @AfterAll
    static void stop() throws Exception {
        if (requesterPool != null) {
            requesterPool.close();
        }
        if (requester != null) {
            requester.close();
        }
        if (cluster != null) {
            ClusterProcesses.closeAndAssertNoneLeft(cluster);
        }
    }

    static InstanceIdentity identity() {
        return PeerITFixture.identity("peer-ssd-test");
    }

    /** The first 8 bytes of page {@code i} of {@code seed} (how the corruption test finds its extent on disk). */
    static long marker(String seed, int i) {
        return PeerITFixture.marker(seed, i);
    }

    static void fill(MemorySegment target, String seed, int i) {
        PeerITFixture.fill(target, seed, i);
    }

    static List<StateKey> publish(EngineSession session, String seed, List<ByteString> hashes, int first) throws Exception {
        PeerITFixture.publish(session, seed, hashes, first);
        return hashes.stream().map(h -> StateKey.of(namespace, 0, h.toByteArray())).toList();
    }

    /** Awaits the requester seeing each key only as the source's SSD extent at its current incarnation. */
    static void awaitOnlyPeerSsdOfTheCurrentIncarnation(List<StateKey> keys) {
        await().atMost(SOON).until(() -> {
            for (StateKey key : keys) {
                List<ReplicaEvidence> p = peers(key);
                if (p.size() != 1 || !(p.getFirst() instanceof ReplicaEvidence.PeerSsd ssd)
                        || ssd.owner().incarnation() != source.incarnation()) {
                    return false;
                }
            }
            return true;
        });
    }

    static List<ReplicaEvidence> peers(StateKey key) throws Exception {
        return PeerITFixture.peers(requester, key);
    }

    /** The source's committed SSD extent generations of {@code keys}, once the requester's inventory shows them. */
    static List<Long> ssdGenerations(List<StateKey> keys) {
        List<Long> found = new ArrayList<>();
        await().atMost(SOON).until(() -> {
            found.clear();
            for (StateKey key : keys) {
                ReplicaEvidence.PeerSsd ssd = peers(key).stream().filter(e -> e instanceof ReplicaEvidence.PeerSsd)
                        .map(e -> (ReplicaEvidence.PeerSsd) e).findFirst().orElse(null);
                if (ssd == null) {
                    return false;
                }
                found.add(ssd.ownerGeneration());
            }
            return true;
        });
        return List.copyOf(found);
    }

    static boolean onlyOnPeerSsd(List<StateKey> keys) throws Exception {
        for (StateKey k : keys) {
            List<ReplicaEvidence> p = peers(k);
            if (p.size() != 1 || !(p.getFirst() instanceof ReplicaEvidence.PeerSsd)) {
                return false;
            }
        }
        return true;
    }

    static PeerOwner owner() {
        return new PeerOwner(source.memberId(), source.incarnation());
    }

    static PeerProxy peer() {
        return requester.peer().orElseThrow();
    }

    static PeerVerticle peerRole() {
        return requester.peerRole().orElseThrow();
    }

    static double sourceMetric(String name) {
        return cluster.metric(source, name, null).orElse(-1);
    }

    /** The source holds nothing for peers: no lease, no staging, no pin, its pool back at the baseline. */
    static void awaitSourceAtBaseline() {
        await().atMost(SOON).untilAsserted(() -> {
            assertThat(sourceMetric("orbitkv_peer_source_leases")).isZero();
            assertThat(sourceMetric("orbitkv_peer_staging_bytes")).isZero();
            assertThat(sourceMetric("orbitkv_images_pinned")).isZero();
            assertThat(sourceMetric("orbitkv_pool_requested_bytes")).isEqualTo(baselineRequestedBytes);
            assertThat(sourceMetric("orbitkv_images")).isEqualTo(baselineImages);
        });
    }

    static List<Boolean> allFromSsd(int n) {
        return Collections.nCopies(n, true);
    }

    static PeerException failure(Future<?> fetch) {
        ExecutionException e = assertThrows(ExecutionException.class,
                () -> fetch.toCompletionStage().toCompletableFuture().get(60, TimeUnit.SECONDS));
        assertThat(e.getCause()).isInstanceOf(PeerException.class);
        return (PeerException) e.getCause();
    }

    static int residentHere(List<StateKey> keys) throws Exception {
        return PeerITFixture.residentHere(requester, keys);
    }

    static PeerTransferGrpcClient rawClient(Vertx vertx) {
        GrpcClient grpc = GrpcClient.client(vertx, new HttpClientOptions().setSsl(true).setUseAlpn(true)
                .setProtocolVersion(HttpVersion.HTTP_2).setVerifyHost(true)
                .setKeyCertOptions(new PemKeyCertOptions().setCertPath(dir.resolve("certs/manager-2.pem").toString())
                        .setKeyPath(dir.resolve("certs/manager-2.key").toString()))
                .setTrustOptions(new PemTrustOptions().addCertPath(dir.resolve("certs/ca.pem").toString())));
        String endpoint = requester.membershipRole().orElseThrow().members().get(source.memberId()).endpoints().get("peer");
        return PeerTransferGrpcClient.create(grpc, SocketAddress.inetSocketAddress(
                Integer.parseInt(endpoint.substring(endpoint.lastIndexOf(':') + 1)), "127.0.0.1"));
    }

    /** A reserve of SSD evidence over the source's real mutual-TLS port, as manager-2; never released. */
    static PeerReserveReply reserveFromSsd(PeerTransferGrpcClient client, List<StateKey> keys, List<Long> generations,
                                           long leaseMs) throws Exception {
        PeerReserveRequest.Builder r = PeerReserveRequest.newBuilder().setNamespace(ByteString.copyFrom(namespace))
                .setSourceIncarnation(source.incarnation())
                .setRequesterIncarnation(requester.membershipRole().orElseThrow().incarnation()).setLeaseMs(leaseMs);
        for (int i = 0; i < keys.size(); i++) {
            r.addKeys(PeerKey.newBuilder().setGroupId(0).setBlockHash(ByteString.copyFrom(keys.get(i).blockHash()))
                    .setGeneration(generations.get(i)).setFromSsd(true));
        }
        return client.reserve(r.build()).await(20, TimeUnit.SECONDS);
    }

    static double requesterMetric(String name) {
        return PeerITFixture.metric(requester, name);
    }

    static long samples(CostEstimateKey key) throws Exception {
        return switch (requester.cost().estimate(key).await(10, TimeUnit.SECONDS)) {
            case CostEstimateResult.Usable u -> Long.MAX_VALUE;
            case CostEstimateResult.Unavailable u -> u.sampleCount();
        };
    }

    static void assertRequesterHoldsNothing(EngineSession engine) throws Exception {
        PeerITFixture.assertRequesterHoldsNothing(requester, engine);
    }

    /** Submits a demand for {@code hashes} on {@code engine} and polls until it is no longer PENDING. */
    static QueryReply demand(EngineSession engine, List<ByteString> hashes, List<QueryReply> seen) throws Exception {
        seen.add(engine.submit(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes).build()), 0)
                .await(10, TimeUnit.SECONDS));
        await().atMost(Duration.ofMillis(WAIT_BUDGET_MS + 10_000)).pollInterval(Duration.ofMillis(5)).until(() -> {
            if (seen.getLast().getStatus() != QueryStatus.PENDING) {
                return true;
            }
            seen.add(engine.poll(seen.getFirst().getTicket()).await(10, TimeUnit.SECONDS));
            return seen.getLast().getStatus() != QueryStatus.PENDING;
        });
        return seen.getLast();
    }

    /** Every leased byte is what {@code seed} was published with, and each page's CRC32C matches its bytes. */
    static void assertServedBytes(EngineSession engine, QueryReply ready, String seed) {
        MemorySegment expected = Arena.ofAuto().allocate(PAGE);
        for (LeasedPage page : ready.getLease().getPagesList()) {
            MemorySegment slot = engine.slot(page.getSlot());
            fill(expected, seed, page.getPosition());
            assertThat(slot.mismatch(expected)).as("page " + page.getPosition()).isEqualTo(-1);
            CRC32C crc = new CRC32C();
            crc.update(slot.asByteBuffer());
            assertThat(page.hasCrc32C()).isTrue();
            assertThat(Integer.toUnsignedLong(page.getCrc32C())).isEqualTo(crc.getValue());
        }
    }

    @Test
    @Order(0)
    void anEngineDemandForPagesTheSourceHoldsOnlyOnItsSsdIsPlannedOverPeerSsdAndGoesCandidateThenReady() throws Exception {
        assertThat(residentHere(demanded)).as("nothing of it is here before the demand").isZero();
        double stagedBefore = sourceMetric("orbitkv_peer_staged_pages_total");
        double fetchedBefore = requesterMetric("orbitkv_peer_fetched_pages_total");
        CostEstimateKey route = PeerCommands.costKey(CostPath.PEER_SSD_HOST_READY_ROUTE, owner(),
                (long) DEMANDED_PAGES * PAGE, DEMANDED_PAGES);
        assertThat(samples(route)).isZero();
        try (OrbitKvClient client = OrbitKvClient.connectTcp("127.0.0.1", requester.grpcTcpPort(), requester.token())) {
            EngineSession engine = client.register(identity(), InstanceRole.PREFILL_AND_DECODE).await(10, TimeUnit.SECONDS);
            List<QueryReply> seen = new ArrayList<>();
            long started = System.nanoTime();
            QueryReply ready = demand(engine, demandedHashes, seen);
            assertThat(Duration.ofNanos(System.nanoTime() - started)).isLessThan(Duration.ofMillis(WAIT_BUDGET_MS));
            // Directory evidence (peer SSD) answers CANDIDATE first; READY only once the staged bytes are sealed here.
            assertThat(seen.getFirst().getStatus()).isEqualTo(QueryStatus.PENDING);
            assertThat(seen.getFirst().getDetail()).isEqualTo(QueryStatus.CANDIDATE);
            assertThat(ready.getStatus()).as("settled: " + seen).isEqualTo(QueryStatus.READY);
            assertThat(ready.getDetail()).isEqualTo(QueryStatus.READY);
            assertThat(ready.getReadyBlocks()).isEqualTo(DEMANDED_PAGES);
            assertThat(ready.getLease().getPagesCount()).isEqualTo(DEMANDED_PAGES);
            assertServedBytes(engine, ready, DEMANDED_SEED);
            // The source staged them from its SSD for this demand (the peer SSD route, not peer DRAM).
            assertThat(sourceMetric("orbitkv_peer_staged_pages_total") - stagedBefore).isEqualTo(DEMANDED_PAGES);
            assertThat(requesterMetric("orbitkv_peer_fetched_pages_total") - fetchedBefore).isEqualTo(DEMANDED_PAGES);
            engine.release(ready.getLease().getLeaseId()).await(10, TimeUnit.SECONDS);
            assertRequesterHoldsNothing(engine);
            awaitSourceAtBaseline(); // its staging is freed, no lease or pin left
            // The complete-route sample, keyed by the source Manager at its incarnation (not by any other incarnation).
            await().atMost(SOON).until(() -> samples(route) >= 1);
            assertThat(samples(PeerCommands.costKey(CostPath.PEER_SSD_HOST_READY_ROUTE,
                    new PeerOwner(source.memberId(), source.incarnation() + 1), (long) DEMANDED_PAGES * PAGE,
                    DEMANDED_PAGES))).isZero();
            engine.close();
        }
    }

    @Test
    @Order(1)
    void pagesTheSourceHoldsOnlyOnItsSsdAreStagedVerifiedServedAndTheStagingEndsWithTheLease() throws Exception {
        List<StateKey> keys = onSsd.subList(0, 4);
        double stagedBefore = sourceMetric("orbitkv_peer_staged_pages_total");
        PeerCommands.Acquired acquired = peer().acquire(new PeerCommands.Pages(owner(), namespace, keys,
                ssdGenerations.subList(0, 4), allFromSsd(4), Duration.ofSeconds(20))).await(30, TimeUnit.SECONDS);
        assertThat(acquired.stagedPages()).as("the grant says the source staged them").isEqualTo(4);
        // While the lease holds them, the staged pages are in the source's pool (bounded: 4 pages = the 1 MiB bound).
        assertThat(sourceMetric("orbitkv_peer_staging_bytes")).isEqualTo(4.0 * PAGE);
        assertThat(sourceMetric("orbitkv_pool_requested_bytes")).isEqualTo(baselineRequestedBytes + 4.0 * PAGE);
        PeerCommands.Fetched fetched = peer().submit(acquired).await(30, TimeUnit.SECONDS);
        assertThat(fetched.stages()).containsExactly(PeerCommands.Stage.CANDIDATE, PeerCommands.Stage.RESERVED,
                PeerCommands.Stage.RESIDENT, PeerCommands.Stage.READY);
        MemorySegment expected = Arena.ofAuto().allocate(PAGE);
        for (int i = 0; i < 4; i++) {
            ImageRef ref = fetched.local().get(i);
            assertThat(ref.key()).isEqualTo(keys.get(i));
            fill(expected, SEED, i);
            assertThat(requesterPool.segment().asSlice(ref.offset(), PAGE).mismatch(expected)).as("page " + i).isEqualTo(-1);
        }
        assertThat(sourceMetric("orbitkv_peer_staged_pages_total")).isEqualTo(stagedBefore + 4);
        // Released by the requester: the staging leaves the source's pool, the extents stay advertised on its SSD.
        awaitSourceAtBaseline();
        await().atMost(SOON).until(() -> onlyOnPeerSsd(onSsd));
        assertThat(ssdGenerations(keys)).isEqualTo(ssdGenerations.subList(0, 4));
    }

    @Test
    @Order(2)
    void aChangedExtentGenerationIsRejectedBeforeAnyStaging() throws Exception {
        Vertx vertx = Vertx.vertx();
        try {
            PeerReserveReply reply = reserveFromSsd(rawClient(vertx), onSsd.subList(4, 6),
                    List.of(ssdGenerations.get(4), ssdGenerations.get(5) + 1), 5_000);
            assertThat(reply.hasReject()).isTrue();
            assertThat(reply.getReject().getReason()).isEqualTo(PeerRejection.CHANGED_GENERATION);
            assertThat(reply.getReject().getKeyIndex()).isEqualTo(1);
            awaitSourceAtBaseline();
        } finally {
            vertx.close().await(10, TimeUnit.SECONDS);
        }
    }

    @Test
    @Order(3)
    void stagingIsBoundedAndALeaseNeverReleasedFreesItsStagingAtExpiry() throws Exception {
        double expiredBefore = sourceMetric("orbitkv_peer_leases_expired_total");
        double rejectedBefore = sourceMetric("orbitkv_peer_rejections_total");
        Vertx vertx = Vertx.vertx();
        try {
            PeerTransferGrpcClient client = rawClient(vertx);
            PeerReserveReply held = reserveFromSsd(client, onSsd.subList(0, 4), ssdGenerations.subList(0, 4), 1_500);
            assertThat(held.hasGrant()).isTrue();
            assertThat(held.getGrant().getPagesList()).hasSize(4).allMatch(PeerPage::getStaged);
            assertThat(sourceMetric("orbitkv_peer_staging_bytes")).isEqualTo(4.0 * PAGE);
            // The bound (1 MiB) is spent: one more staged page is NO_CREDIT before any slot is allocated.
            PeerReserveReply beyond = reserveFromSsd(client, onSsd.subList(4, 5), ssdGenerations.subList(4, 5), 5_000);
            assertThat(beyond.hasReject()).isTrue();
            assertThat(beyond.getReject().getReason()).isEqualTo(PeerRejection.NO_CREDIT);
            assertThat(sourceMetric("orbitkv_peer_rejections_total")).isEqualTo(rejectedBefore + 1);
            assertThat(sourceMetric("orbitkv_pool_requested_bytes")).isEqualTo(baselineRequestedBytes + 4.0 * PAGE);
            assertThat(sourceMetric("orbitkv_images_pinned")).isEqualTo(4.0);
            // Never released: at the lease's expiry the source frees the staging on its own.
            await().atMost(SOON).until(() -> sourceMetric("orbitkv_peer_leases_expired_total") == expiredBefore + 1);
            awaitSourceAtBaseline();
            // With the staging free again, the page that did not fit is staged.
            PeerReserveReply fits = reserveFromSsd(client, onSsd.subList(4, 5), ssdGenerations.subList(4, 5), 300);
            assertThat(fits.hasGrant()).isTrue();
            await().atMost(SOON).until(() -> sourceMetric("orbitkv_peer_leases_expired_total") == expiredBefore + 2);
            awaitSourceAtBaseline();
        } finally {
            vertx.close().await(10, TimeUnit.SECONDS);
        }
    }

    @Test
    @Order(4)
    void oneLeaseMixesADramPageAndAStagedPageInRequestOrder() throws Exception {
        int last = FILLER_PAGES - 1; // the newest filler page: still in the source's DRAM
        StateKey inDram = StateKey.of(namespace, 0, RunningManager.chain("filler", last + 1).get(last).toByteArray());
        long dramGeneration = ((ReplicaEvidence.PeerDram) peers(inDram).stream()
                .filter(e -> e instanceof ReplicaEvidence.PeerDram).findFirst().orElseThrow()).ownerGeneration();
        List<StateKey> keys = List.of(onSsd.get(5), inDram);
        PeerCommands.Acquired acquired = peer().acquire(new PeerCommands.Pages(owner(), namespace, keys,
                List.of(ssdGenerations.get(5), dramGeneration), List.of(true, false), Duration.ofSeconds(20))).await(30, TimeUnit.SECONDS);
        assertThat(acquired.stagedPages()).isEqualTo(1);
        PeerCommands.Fetched fetched = peer().submit(acquired).await(30, TimeUnit.SECONDS);
        MemorySegment expected = Arena.ofAuto().allocate(PAGE);
        fill(expected, SEED, 5);
        assertThat(fetched.local().get(0).key()).isEqualTo(onSsd.get(5));
        assertThat(requesterPool.segment().asSlice(fetched.local().get(0).offset(), PAGE).mismatch(expected)).isEqualTo(-1);
        fill(expected, "filler", last);
        assertThat(fetched.local().get(1).key()).isEqualTo(inDram);
        assertThat(requesterPool.segment().asSlice(fetched.local().get(1).offset(), PAGE).mismatch(expected)).isEqualTo(-1);
        awaitSourceAtBaseline(); // the staged page left the pool, the DRAM page stays (unpinned)
    }

    @Test
    @Order(5)
    void aCorruptedExtentOnTheSourcesSsdIsNeverServed() throws Exception {
        int victim = 6;
        corruptOnSourceSsd(marker(SEED, victim));
        double failuresBefore = sourceMetric("orbitkv_peer_staging_failures_total");
        List<StateKey> keys = onSsd.subList(victim, victim + 1);
        PeerException e = failure(peer().fetch(new PeerCommands.Pages(owner(), namespace, keys,
                ssdGenerations.subList(victim, victim + 1), allFromSsd(1), Duration.ofSeconds(20))));
        assertThat(e.kind()).isEqualTo(PeerException.Kind.REJECTED);
        assertThat(e.rejection()).isEqualTo(PeerRejection.SSD_READ_FAILED);
        assertThat(e.beforePayload()).isTrue(); // nothing moved: the requester may replan
        assertThat(sourceMetric("orbitkv_peer_staging_failures_total")).isEqualTo(failuresBefore + 1);
        assertThat(residentHere(keys)).isZero();
        var stats = new StorageProxy(requester.vertx()).stats().await(5, TimeUnit.SECONDS);
        assertThat(stats.unsealedImages()).isZero();
        assertThat(stats.openPublishes()).isZero();
        awaitSourceAtBaseline();
    }

    @Test
    @Order(8)
    void anEngineDemandPlannedOnTheOldIncarnationsEvidenceIsRefusedByTheRestartedSourceAndReplannedOntoWhatItRecovered()
            throws Exception {
        // Four fresh pages on the source: in its DRAM and committed to its SSD; the requester holds none of them.
        List<ByteString> hashes = RunningManager.chain("restarted", DEMANDED_PAGES);
        List<StateKey> keys;
        try (OrbitKvClient client = OrbitKvClient.connectTcp("127.0.0.1", source.grpcPort(),
                OrbitKvClient.readToken(source.tokenFile()))) {
            EngineSession session = client.register(identity(), InstanceRole.PREFILL_AND_DECODE).await(10, TimeUnit.SECONDS);
            keys = publish(session, "restarted", hashes, 0);
            session.close();
        }
        ssdGenerations(keys);
        PeerOwner old = owner();
        await().atMost(SOON).until(() -> {
            for (StateKey key : keys) {
                if (peers(key).stream().noneMatch(e -> e instanceof ReplicaEvidence.PeerDram d && d.owner().equals(old))) {
                    return false;
                }
            }
            return true;
        });
        assertThat(residentHere(keys)).isZero();
        double replansBefore = requesterMetric("orbitkv_queries_replans_total");
        double avoidedBefore = requesterMetric("orbitkv_planning_peers_avoided_total");
        double fetchedBefore = requesterMetric("orbitkv_peer_fetched_pages_total");
        double refusedBefore = requesterFailures("rejected");
        double unreachableBefore = requesterFailures("unreachable");

        // The requester's first reserve is held at its gate: planned (peer DRAM, the old incarnation's evidence), its
        // own membership check passed, not yet sent.
        AtomicReference<PeerOwner> heldFor = new AtomicReference<>();
        Promise<Void> open = Promise.promise();
        peerRole().reserveGate(owner -> heldFor.compareAndSet(null, owner) ? open.future() : Future.succeededFuture());
        long submitted = System.nanoTime();
        long heldMs = -1;
        try (OrbitKvClient client = OrbitKvClient.connectTcp("127.0.0.1", requester.grpcTcpPort(), requester.token())) {
            EngineSession engine = client.register(identity(), InstanceRole.PREFILL_AND_DECODE).await(10, TimeUnit.SECONDS);
            QueryReply first = engine.submit(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes)
                    .build()), 0).await(10, TimeUnit.SECONDS);
            List<QueryReply> seen = new ArrayList<>(List.of(first));
            try {
                await().atMost(SOON).until(() -> heldFor.get() != null);
                assertThat(heldFor.get()).isEqualTo(old);
                QueryReply held = engine.poll(first.getTicket()).await(10, TimeUnit.SECONDS);
                assertThat(held.getStatus()).isEqualTo(QueryStatus.PENDING);
                assertThat(held.getDetail()).as("no source lease yet").isEqualTo(QueryStatus.CANDIDATE);

                // Meanwhile the source Manager process restarts for real: a new incarnation that recovers its SSD.
                cluster.stop(source);
                cluster.launch(source, Map.of());
                assertThat(source.incarnation()).isNotEqualTo(old.incarnation());
                await().atMost(SOON).until(() -> {
                    MemberRecord m = requester.membershipRole().orElseThrow().members().get(source.memberId());
                    return m != null && m.incarnation() == source.incarnation()
                            && sourceMetric("orbitkv_cluster_members") == 2.0; // it knows the requester again
                });
                // What the new incarnation recovered is advertised (its SSD only); the old records are fenced.
                awaitOnlyPeerSsdOfTheCurrentIncarnation(keys);
                assertThat(sourceMetric("orbitkv_peer_rejections_total")).isZero();
            } finally {
                heldMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - submitted);
                open.tryComplete(); // the held reserve goes out now, naming the old incarnation
            }
            QueryReply ready = settle(engine, seen);
            String held = "held at the gate for " + heldMs + " ms of a " + QUERY_BUDGET_MS + " ms budget; settled: " + seen;
            // The restarted source refused the old incarnation's reserve before any payload (STALE_INCARNATION: stale
            // evidence, not the owner's fault, so it is not avoided); the demand was replanned from fresh evidence
            // onto what the new incarnation recovered (peer SSD, staged there) and is READY, every byte verified.
            assertThat(ready.getStatus()).as(held).isEqualTo(QueryStatus.READY);
            assertThat(ready.getReadyBlocks()).isEqualTo(DEMANDED_PAGES);
            assertServedBytes(engine, ready, "restarted");
            assertThat(sourceMetric("orbitkv_peer_rejections_total")).as("the old-incarnation reserve").isEqualTo(1.0);
            assertThat(sourceMetric("orbitkv_peer_staged_pages_total")).isEqualTo(DEMANDED_PAGES);
            assertThat(requesterMetric("orbitkv_queries_replans_total")).isEqualTo(replansBefore + 1);
            assertThat(requesterMetric("orbitkv_planning_peers_avoided_total")).isEqualTo(avoidedBefore);
            assertThat(requesterMetric("orbitkv_peer_fetched_pages_total")).isEqualTo(fetchedBefore + DEMANDED_PAGES);
            // The requester saw a refusal (an answer), not an unreachable source.
            assertThat(requesterFailures("rejected")).isEqualTo(refusedBefore + 1);
            assertThat(requesterFailures("unreachable")).isEqualTo(unreachableBefore);
            engine.release(ready.getLease().getLeaseId()).await(10, TimeUnit.SECONDS);
            assertRequesterHoldsNothing(engine);
            engine.close();
        } finally {
            peerRole().reserveGate(PeerVerticle.ReserveGate.OPEN);
        }
        await().atMost(SOON).untilAsserted(() -> {
            assertThat(sourceMetric("orbitkv_peer_source_leases")).isZero();
            assertThat(sourceMetric("orbitkv_peer_staging_bytes")).isZero();
            assertThat(sourceMetric("orbitkv_images_pinned")).isZero();
        });
    }

    /** The requester's orbitkv_peer_fetch_failures_total of {@code kind}. */
    static double requesterFailures(String kind) {
        return LocalCluster.sample(requester.registry().scrape(), "orbitkv_peer_fetch_failures_total",
                "kind=\"" + kind + "\"").orElse(-1);
    }

    /** Polls the ticket of {@code seen}'s first answer until it is no longer PENDING. */
    static QueryReply settle(EngineSession engine, List<QueryReply> seen) {
        await().atMost(Duration.ofMillis(QUERY_BUDGET_MS + 10_000)).pollInterval(Duration.ofMillis(5)).until(() -> {
            if (seen.getLast().getStatus() != QueryStatus.PENDING) {
                return true;
            }
            seen.add(engine.poll(seen.getFirst().getTicket()).await(10, TimeUnit.SECONDS));
            return seen.getLast().getStatus() != QueryStatus.PENDING;
        });
        return seen.getLast();
    }

    @Test
    @Order(9)
    void aRestartedSourceRejectsTheOldIncarnationsEvidenceBeforeAnyPayloadAndServesWhatItRecoveredFromItsSsd()
            throws Exception {
        // Four filler pages: in the source's DRAM and committed on its SSD; the requester holds none of them.
        List<ByteString> hashes = RunningManager.chain("filler", FILLER_PAGES).subList(0, DEMANDED_PAGES);
        List<StateKey> keys = hashes.stream().map(h -> StateKey.of(namespace, 0, h.toByteArray())).toList();
        assertThat(residentHere(keys)).isZero();
        ssdGenerations(keys);
        PeerOwner old = owner();
        List<PlannedPage> oldEvidence = new ArrayList<>();
        for (int i = 0; i < keys.size(); i++) {
            oldEvidence.add(new PlannedPage(i, keys.get(i), peers(keys.get(i)).stream()
                    .filter(e -> e instanceof ReplicaEvidence.PeerSsd).findFirst().orElseThrow()));
        }
        List<Long> oldGenerations = oldEvidence.stream()
                .map(p -> ((ReplicaEvidence.PeerSsd) p.evidence()).ownerGeneration()).toList();

        // A real restart of the source Manager process: a new incarnation that recovers its SSD index.
        cluster.stop(source);
        cluster.launch(source, Map.of());
        assertThat(source.incarnation()).isNotEqualTo(old.incarnation());
        await().atMost(SOON).until(() -> {
            MemberRecord m = requester.membershipRole().orElseThrow().members().get(source.memberId());
            return m != null && m.incarnation() == source.incarnation();
        });

        // The old incarnation's evidence is rejected before any payload, by the requester's check and by the planner's
        // port (STALE_EVIDENCE: the planner drops the record and replans), nothing held on either side.
        PeerException local = failure(peer().fetch(new PeerCommands.Pages(old, namespace, keys, oldGenerations,
                allFromSsd(keys.size()), Duration.ofSeconds(5))));
        assertThat(local.rejection()).isEqualTo(PeerRejection.STALE_INCARNATION);
        assertThat(local.beforePayload()).isTrue();
        PeerExecutionOwner port = new PeerExecutionOwner(requester.vertx(), peerRole().settings());
        PlannedSegment stale = new PlannedSegment(0, new BlockRange(0, keys.size()), RouteTemplate.HOST_FROM_PEER_SSD,
                oldEvidence, (long) keys.size() * PAGE, CompletionTarget.hostReady());
        ExecutionException e = assertThrows(ExecutionException.class, () -> port.acquire(stale)
                .toCompletionStage().toCompletableFuture().get(30, TimeUnit.SECONDS));
        assertThat(PlanningException.failureOf(e.getCause())).isEqualTo(PlanningFailure.STALE_EVIDENCE);
        assertThat(PlanningFailure.STALE_EVIDENCE.beforePayload()).isTrue();
        assertThat(port.held()).isZero();
        // The restarted source itself refuses a reserve naming its old incarnation, over its real mutual-TLS port.
        Vertx vertx = Vertx.vertx();
        try {
            PeerReserveRequest.Builder r = PeerReserveRequest.newBuilder().setNamespace(ByteString.copyFrom(namespace))
                    .setSourceIncarnation(old.incarnation())
                    .setRequesterIncarnation(requester.membershipRole().orElseThrow().incarnation()).setLeaseMs(5_000);
            for (int i = 0; i < keys.size(); i++) {
                r.addKeys(PeerKey.newBuilder().setGroupId(0).setBlockHash(ByteString.copyFrom(keys.get(i).blockHash()))
                        .setGeneration(oldGenerations.get(i)).setFromSsd(true));
            }
            PeerReserveReply reply = rawClient(vertx).reserve(r.build()).await(20, TimeUnit.SECONDS);
            assertThat(reply.hasReject()).isTrue();
            assertThat(reply.getReject().getReason()).isEqualTo(PeerRejection.STALE_INCARNATION);
            assertThat(sourceMetric("orbitkv_peer_rejections_total")).isGreaterThanOrEqualTo(1.0);
        } finally {
            vertx.close().await(10, TimeUnit.SECONDS);
        }
        // awaited: the requester warms its paths to the new incarnation meanwhile, and a probe lease lives until the
        // requester releases it
        await().atMost(SOON).untilAsserted(() -> {
            assertThat(sourceMetric("orbitkv_peer_source_leases")).isZero();
            assertThat(sourceMetric("orbitkv_peer_staging_bytes")).isZero();
        });

        // The new incarnation advertises what it recovered from its SSD (peer SSD evidence only, the old records
        // fenced): an engine demand is planned over peer SSD again and goes CANDIDATE → READY, every byte verified.
        awaitOnlyPeerSsdOfTheCurrentIncarnation(keys);
        double requested = sourceMetric("orbitkv_pool_requested_bytes");
        try (OrbitKvClient client = OrbitKvClient.connectTcp("127.0.0.1", requester.grpcTcpPort(), requester.token())) {
            EngineSession engine = client.register(identity(), InstanceRole.PREFILL_AND_DECODE).await(10, TimeUnit.SECONDS);
            List<QueryReply> seen = new ArrayList<>();
            long started = System.nanoTime();
            QueryReply ready = demand(engine, hashes, seen);
            assertThat(Duration.ofNanos(System.nanoTime() - started)).isLessThan(Duration.ofMillis(WAIT_BUDGET_MS));
            assertThat(seen.getFirst().getDetail()).isEqualTo(QueryStatus.CANDIDATE);
            assertThat(ready.getStatus()).as("settled: " + seen).isEqualTo(QueryStatus.READY);
            assertThat(ready.getReadyBlocks()).isEqualTo(keys.size());
            assertServedBytes(engine, ready, "filler");
            assertThat(sourceMetric("orbitkv_peer_staged_pages_total")).isEqualTo(keys.size());
            engine.release(ready.getLease().getLeaseId()).await(10, TimeUnit.SECONDS);
            assertRequesterHoldsNothing(engine);
            engine.close();
        }
        await().atMost(SOON).untilAsserted(() -> {
            assertThat(sourceMetric("orbitkv_peer_source_leases")).isZero();
            assertThat(sourceMetric("orbitkv_peer_staging_bytes")).isZero();
            assertThat(sourceMetric("orbitkv_images_pinned")).isZero();
            assertThat(sourceMetric("orbitkv_pool_requested_bytes")).isEqualTo(requested);
        });
    }

    @Test
    @Order(10)
    void aSourceThatRefusesThePeerSsdSegmentBeforeAnyPayloadIsReplannedAroundWithinTheBudget() throws Exception {
        // The restarted source (previous test) holds the whole filler chain only on its SSD; the requester holds its
        // first 4 pages in DRAM (fetched by the previous test). A demand for 8 pages plans local DRAM for 0..3 and
        // peer SSD for 4..7; another lease holds the source's whole staging bound, so the source refuses NO_CREDIT.
        List<ByteString> hashes = RunningManager.chain("filler", FILLER_PAGES).subList(0, 2 * DEMANDED_PAGES);
        List<StateKey> keys = hashes.stream().map(h -> StateKey.of(namespace, 0, h.toByteArray())).toList();
        assertThat(residentHere(keys)).isEqualTo(DEMANDED_PAGES);
        List<StateKey> staged = onSsd.subList(0, 4);
        List<Long> stagedGenerations = ssdGenerations(staged);
        await().atMost(SOON).until(() -> {
            for (StateKey key : keys.subList(DEMANDED_PAGES, keys.size())) {
                if (peers(key).stream().noneMatch(e -> e instanceof ReplicaEvidence.PeerSsd ssd
                        && ssd.owner().incarnation() == source.incarnation())) {
                    return false;
                }
            }
            return true;
        });
        double replansBefore = requesterMetric("orbitkv_queries_replans_total");
        double avoidedBefore = requesterMetric("orbitkv_planning_peers_avoided_total");
        double sourceRejectedBefore = sourceMetric("orbitkv_peer_rejections_total");
        Vertx vertx = Vertx.vertx();
        try {
            PeerTransferGrpcClient raw = rawClient(vertx);
            PeerReserveReply held = reserveFromSsd(raw, staged, stagedGenerations, 30_000);
            assertThat(held.hasGrant()).isTrue();
            assertThat(sourceMetric("orbitkv_peer_staging_bytes")).isEqualTo(4.0 * PAGE);
            try (OrbitKvClient client = OrbitKvClient.connectTcp("127.0.0.1", requester.grpcTcpPort(), requester.token())) {
                EngineSession engine = client.register(identity(), InstanceRole.PREFILL_AND_DECODE)
                        .await(10, TimeUnit.SECONDS);
                List<QueryReply> seen = new ArrayList<>();
                long started = System.nanoTime();
                QueryReply ready = demand(engine, hashes, seen);
                assertThat(Duration.ofNanos(System.nanoTime() - started)).isLessThan(Duration.ofMillis(WAIT_BUDGET_MS));
                // Refused before any payload: the owner is avoided, the replan takes what is here (local DRAM 0..3).
                assertThat(ready.getStatus()).as("settled: " + seen).isEqualTo(QueryStatus.READY);
                assertThat(ready.getReadyBlocks()).isEqualTo(DEMANDED_PAGES);
                assertServedBytes(engine, ready, "filler");
                assertThat(sourceMetric("orbitkv_peer_rejections_total")).isEqualTo(sourceRejectedBefore + 1);
                assertThat(requesterMetric("orbitkv_planning_peers_avoided_total")).isEqualTo(avoidedBefore + 1);
                assertThat(requesterMetric("orbitkv_queries_replans_total")).isEqualTo(replansBefore + 1);
                assertThat(residentHere(keys)).as("nothing of the refused segment landed here").isEqualTo(DEMANDED_PAGES);
                engine.release(ready.getLease().getLeaseId()).await(10, TimeUnit.SECONDS);
                assertRequesterHoldsNothing(engine);
                engine.close();
            }
            raw.release(PeerReleaseRequest.newBuilder().setLeaseId(held.getGrant().getLeaseId()).build())
                    .await(10, TimeUnit.SECONDS);
        } finally {
            vertx.close().await(10, TimeUnit.SECONDS);
        }
        await().atMost(SOON).untilAsserted(() -> {
            assertThat(sourceMetric("orbitkv_peer_source_leases")).isZero();
            assertThat(sourceMetric("orbitkv_peer_staging_bytes")).isZero();
            assertThat(sourceMetric("orbitkv_images_pinned")).isZero();
        });
    }

    /** Flips one payload byte of the source's SSD extent whose payload starts with {@code marker}, behind its back. */
    static void corruptOnSourceSsd(long marker) throws Exception {
        long stride = PAGE + 4096L; // one extent slot: its 4 KiB header, then the payload (ssd.extent = 256 KiB)
        List<Path> shards;
        try (Stream<Path> files = Files.list(source.dataDir().resolve("ssd"))) {
            shards = files.filter(p -> p.getFileName().toString().startsWith("shard-")).toList();
        }
        ByteBuffer head = ByteBuffer.allocate(8).order(ByteOrder.nativeOrder());
        for (Path shard : shards) {
            try (FileChannel channel = FileChannel.open(shard, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
                for (long slot = 0; slot + 4096 + 8 <= channel.size(); slot += stride) {
                    head.clear();
                    channel.read(head, slot + 4096);
                    if (head.getLong(0) == marker) {
                        ByteBuffer one = ByteBuffer.allocate(1);
                        channel.read(one, slot + 4096 + 1000);
                        channel.write(ByteBuffer.wrap(new byte[] {(byte) (one.get(0) ^ 0x5a)}), slot + 4096 + 1000);
                        channel.force(true);
                        return;
                    }
                }
            }
        }
        throw new AssertionError("no extent starts with the marker in " + shards);
    }
}
