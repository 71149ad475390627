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
import io.orbitkv.it.RunningManager;
import io.orbitkv.manager.Manager;
import io.orbitkv.model.plan.ReplicaEvidence;
import io.orbitkv.protocol.engine.BlockSpan;
import io.orbitkv.protocol.engine.Demand;
import io.orbitkv.protocol.engine.GroupChain;
import io.orbitkv.protocol.engine.GroupDemand;
import io.orbitkv.protocol.engine.InstanceIdentity;
import io.orbitkv.protocol.engine.InstanceRole;
import io.orbitkv.protocol.engine.LeasedPage;
import io.orbitkv.protocol.engine.QueryReply;
import io.orbitkv.protocol.engine.QueryStatus;
import io.orbitkv.model.StateKey;
import io.orbitkv.storage.StorageProxy;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Peer routes end to end through the engine API, with real processes: etcd and the source Manager (manager-1) run as
 * processes; the requester (manager-2) is a Manager in this JVM whose engine door a real gRPC client uses. An engine on
 * the requester demands pages published only on the source: discovery finds them in the inventory (CANDIDATE), the
 * planner picks the peer DRAM route, the peer role reserves, transfers and seals them with the source's CRC32C, and
 * the engine gets READY with every byte equal to what the source published. The last test SIGKILLs the source while
 * a demand's transfer is in flight (the source's test hook stalls leases of 16+ pages half way); while it is held
 * there, the demand answers PENDING with detail RESERVED (the source lease is held, nothing is sealed here yet); after
 * the kill the transfer is fenced and the demand replanned onto this Manager's SSD copy of the same pages. The test
 * before it SIGSTOPs the source at the same point: the peer attempt's bound (what the demand has left, less the
 * fallback reserve) passes, the transfer is fenced, and the demand is replanned onto local SSD within its budget.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@Timeout(value = 150, unit = TimeUnit.SECONDS)
class PeerDemandIT {
    static final int PAGE = PeerITFixture.PAGE;
    static final long WAIT_BUDGET_MS = 8000;
    /** The SIGSTOP test's own demand budget (max_wait): the peer attempt gets it less the 1 s fallback reserve. */
    static final long STOP_BUDGET_MS = 3000;
    /** The member-key ttl: longer than the SIGSTOP window, so the stopped source stays a member meanwhile. */
    static final String TTL_S = "5";
    static final Duration SOON = Duration.ofSeconds(20);

    @TempDir
    static Path dir;
    static LocalCluster cluster;
    static LocalCluster.Node source;
    static Manager requester;
    static OrbitKvClient engineClient;
    static EngineSession engine;

    @BeforeAll
    static void start() throws Exception {
        assumeTrue(LocalEtcd.installed(), "etcd is not installed (/usr/bin/etcd): install Debian's etcd-server");
        ClusterCertificates.create(dir.resolve("certs"), 2, List.of("127.0.0.1", "localhost"), Duration.ofDays(1));
        cluster = LocalCluster.start(new LocalCluster.Options(1, dir, ManagerProcessMain.command(), Map.of(
                "cluster.lease-ttl-s", TTL_S, "cluster.prefix", "/orbitkv-peer-demand", "ssd.enabled", "false",
                "session.ttl-ms", "60000", "peer.port", String.valueOf(LocalEtcd.freePort()),
                "peer.transfer-port", String.valueOf(LocalEtcd.freePort()), "fault-injection.peer.stall-lease-pages", "16")));
        source = cluster.node(1);
        Map<String, String> s = PeerITFixture.requesterSettings(dir, cluster, "manager-2", "/orbitkv-peer-demand", TTL_S);
        s.put("ssd.enabled", "true");
        s.put("ssd.capacity", "128MiB");
        s.put("ssd.extent", "256KiB"); // one page per extent: the ring holds every page this class publishes
        s.put("cost.observations", "true");
        s.put("query.wait-budget-ms", String.valueOf(WAIT_BUDGET_MS));
        requester = PeerITFixture.startRequester(s, source);
        engineClient = OrbitKvClient.connectTcp("127.0.0.1", requester.grpcTcpPort(), requester.token());
        engine = engineClient.register(identity(), InstanceRole.PREFILL_AND_DECODE).await(10, TimeUnit.SECONDS);
    }

    @AfterAll
    static void stop() throws Exception {
        if (engine != null) {
            engine.close();
        }
        if (engineClient != null) {
            engineClient.close();
        }
        if (requester != null) {
            requester.close();
        }
        if (cluster != null) {
            ClusterProcesses.closeAndAssertNoneLeft(cluster);
        }
    }

    static InstanceIdentity identity() {
        return PeerITFixture.identity("peer-demand-test");
    }

    /** The bytes page {@code i} of {@code seed} was published with. */
    static void fill(MemorySegment target, String seed, int i) {
        PeerITFixture.fill(target, seed, i);
    }

    /** Publishes {@code n} chained pages on the source (only there) over its engine door; answers their hashes. */
    static List<ByteString> publishOnSource(String seed, int n) throws Exception {
        try (OrbitKvClient client = OrbitKvClient.connectTcp("127.0.0.1", source.grpcPort(),
                OrbitKvClient.readToken(source.tokenFile()))) {
            EngineSession session = client.register(identity(), InstanceRole.PREFILL_AND_DECODE).await(10, TimeUnit.SECONDS);
            List<ByteString> hashes = publish(session, seed, n);
            session.close();
            return hashes;
        }
    }

    /** Publishes {@code n} chained pages of {@code seed} through {@code session}; answers their hashes. */
    static List<ByteString> publish(EngineSession session, String seed, int n) throws Exception {
        List<ByteString> hashes = RunningManager.chain(seed, n);
        PeerITFixture.publish(session, seed, hashes, 0);
        return hashes;
    }

    /** The sum of every sample of {@code name} carrying all of {@code labels} (Prometheus text of the requester). */
    static double requesterSum(String name, String... labels) {
        double sum = 0;
        for (String line : requester.registry().scrape().split("\n")) {
            if (line.startsWith(name + "{") && java.util.Arrays.stream(labels).allMatch(line::contains)) {
                sum += Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
            }
        }
        return sum;
    }

    static List<StateKey> keys(List<ByteString> hashes) {
        byte[] namespace = Namespaces.derive(identity());
        return hashes.stream().map(h -> StateKey.of(namespace, 0, h.toByteArray())).toList();
    }

    /** Waits until the requester's inventory holds a peer DRAM record of every key. */
    static void awaitPeerEvidence(List<StateKey> keys) {
        await().atMost(SOON).until(() -> {
            for (StateKey key : keys) {
                if (PeerITFixture.peers(requester, key).stream().noneMatch(p -> p instanceof ReplicaEvidence.PeerDram)) {
                    return false;
                }
            }
            return true;
        });
    }

    static GroupChain chain(List<ByteString> hashes) {
        return GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes).build();
    }

    /** Polls (as an engine scheduler would) until the ticket is no longer PENDING; every answer seen lands in {@code seen}. */
    static QueryReply settle(QueryReply first, List<QueryReply> seen) {
        seen.add(first);
        if (first.getStatus() != QueryStatus.PENDING) {
            return first;
        }
        await().atMost(Duration.ofMillis(WAIT_BUDGET_MS + 10_000)).pollInterval(Duration.ofMillis(5)).until(() -> {
            QueryReply next = engine.poll(first.getTicket()).await(10, TimeUnit.SECONDS);
            seen.add(next);
            return next.getStatus() != QueryStatus.PENDING;
        });
        return seen.getLast();
    }

    static int residentHere(List<StateKey> keys) throws Exception {
        return PeerITFixture.residentHere(requester, keys);
    }

    static double requesterMetric(String name) {
        return PeerITFixture.metric(requester, name);
    }

    static double sourceMetric(String name) {
        return cluster.metric(source, name, null).orElse(-1);
    }

    /** Nothing held on either side: no engine lease, no plan lease, no pin, no open or unsealed publish, no source lease. */
    static void assertNothingHeld() throws Exception {
        PeerITFixture.assertRequesterHoldsNothing(requester, engine);
        if (source.alive()) {
            await().atMost(SOON).untilAsserted(() -> {
                assertThat(sourceMetric("orbitkv_peer_source_leases")).as("source leases").isZero();
                assertThat(sourceMetric("orbitkv_images_pinned")).as("images pinned on the source").isZero();
            });
        }
    }

    /** Publishes the pages of {@code seed} here too, waits until they are on this Manager's SSD, evicts them from its pool. */
    static void onLocalSsdOnly(String seed, List<ByteString> hashes, String filler) throws Exception {
        assertThat(publish(engine, seed, hashes.size())).isEqualTo(hashes);
        await().atMost(SOON).until(() -> new StorageProxy(requester.vertx()).discover(keys(hashes))
                .await(5, TimeUnit.SECONDS).stream().allMatch(e -> e.ssdGeneration() >= 0));
        for (int i = 0; i < 4; i++) {
            publish(engine, filler + i, 20); // 20 MiB through a 16 MiB pool
        }
        assertThat(residentHere(keys(hashes))).as("evicted from this Manager's pool").isZero();
    }

    static void signalSource(String name) throws Exception {
        Process kill = new ProcessBuilder("kill", "-" + name, String.valueOf(source.pid())).inheritIO().start();
        assertThat(kill.waitFor(10, TimeUnit.SECONDS)).isTrue();
        assertThat(kill.exitValue()).isZero();
    }

    @Test
    @Order(1)
    void anEngineDemandForPagesPublishedOnlyOnAPeerGoesCandidateThenReadyWithEveryByteVerified() throws Exception {
        List<ByteString> hashes = publishOnSource("alpha", 6);
        List<StateKey> keys = keys(hashes);
        awaitPeerEvidence(keys);
        assertThat(residentHere(keys)).as("nothing of it is here before the demand").isZero();
        double fetchedBefore = requesterMetric("orbitkv_peer_fetched_pages_total");

        List<QueryReply> seen = new ArrayList<>();
        long started = System.nanoTime();
        QueryReply ready = settle(engine.submit(List.of(chain(hashes)), 0).await(10, TimeUnit.SECONDS), seen);
        assertThat(Duration.ofNanos(System.nanoTime() - started)).isLessThan(Duration.ofMillis(WAIT_BUDGET_MS));

        // Directory evidence first answers CANDIDATE (PENDING), never READY; READY only once the bytes are sealed here.
        assertThat(seen.getFirst().getStatus()).isEqualTo(QueryStatus.PENDING);
        assertThat(seen.getFirst().getDetail()).isEqualTo(QueryStatus.CANDIDATE);
        assertThat(ready.getStatus()).as("settled: " + seen).isEqualTo(QueryStatus.READY);
        assertThat(ready.getDetail()).isEqualTo(QueryStatus.READY);
        assertThat(ready.getReadyBlocks()).isEqualTo(6);
        assertThat(ready.getLease().getPagesCount()).isEqualTo(6);
        assertThat(requesterMetric("orbitkv_peer_fetched_pages_total") - fetchedBefore).isEqualTo(6.0);

        // Every leased byte is what the source published, and each page's CRC32C is the one the seal verified.
        MemorySegment expected = Arena.ofAuto().allocate(PAGE);
        for (LeasedPage page : ready.getLease().getPagesList()) {
            MemorySegment slot = engine.slot(page.getSlot());
            assertThat(slot.byteSize()).isEqualTo(PAGE);
            fill(expected, "alpha", page.getPosition());
            assertThat(slot.mismatch(expected)).as("page " + page.getPosition()).isEqualTo(-1);
            CRC32C crc = new CRC32C();
            crc.update(slot.asByteBuffer());
            assertThat(page.hasCrc32C()).isTrue();
            assertThat(Integer.toUnsignedLong(page.getCrc32C())).isEqualTo(crc.getValue());
        }
        engine.release(ready.getLease().getLeaseId()).await(10, TimeUnit.SECONDS);
        assertNothingHeld();

        // The fetched pages are local DRAM now: the next demand is READY from the pool without another transfer.
        QueryReply again = settle(engine.submit(List.of(chain(hashes)), 0).await(10, TimeUnit.SECONDS), new ArrayList<>());
        assertThat(again.getStatus()).isEqualTo(QueryStatus.READY);
        assertThat(requesterMetric("orbitkv_peer_fetched_pages_total") - fetchedBefore).isEqualTo(6.0);
        engine.release(again.getLease().getLeaseId()).await(10, TimeUnit.SECONDS);
        assertNothingHeld();
    }

    @Test
    @Order(2)
    void withLocalSsdOfEqualCoverageTheDefaultPeerRouteStandsAndShadowComparesTheTwo() throws Exception {
        // The same pages on the source (DRAM) and here on SSD only: published here, committed to SSD, evicted.
        List<ByteString> hashes = publishOnSource("beta", 4);
        assertThat(publish(engine, "beta", 4)).isEqualTo(hashes);
        List<StateKey> keys = keys(hashes);
        await().atMost(SOON).until(() -> new StorageProxy(requester.vertx()).discover(keys).await(5, TimeUnit.SECONDS)
                .stream().allMatch(e -> e.ssdGeneration() >= 0));
        for (int i = 0; i < 4; i++) {
            publish(engine, "filler-" + i, 20); // 20 MiB through a 16 MiB pool
        }
        assertThat(residentHere(keys)).as("evicted from this Manager's pool").isZero();
        assertThat(new StorageProxy(requester.vertx()).discover(keys).await(5, TimeUnit.SECONDS))
                .as("still on this Manager's SSD").allMatch(e -> e.ssdGeneration() >= 0);
        awaitPeerEvidence(keys);
        double fetchedBefore = requesterMetric("orbitkv_peer_fetched_pages_total");
        double comparedBefore = requesterSum("orbitkv_cost_shadow_decisions_total", "path=\"peer_host_ready_route\"");
        double choicesBefore = requesterSum("orbitkv_planning_route_choices_total", "outcome=\"default_selection_off\"");

        QueryReply ready = settle(engine.submit(List.of(chain(hashes)), 0).await(10, TimeUnit.SECONDS), new ArrayList<>());
        assertThat(ready.getStatus()).isEqualTo(QueryStatus.READY);
        MemorySegment expected = Arena.ofAuto().allocate(PAGE);
        for (LeasedPage page : ready.getLease().getPagesList()) {
            fill(expected, "beta", page.getPosition());
            assertThat(engine.slot(page.getSlot()).mismatch(expected)).as("page " + page.getPosition()).isEqualTo(-1);
        }
        // Peer DRAM comes before local SSD in the default order; selection is off, so it stands (fetched from the
        // peer) and the equal-coverage comparison with local SSD goes to the cost role's shadow.
        assertThat(requesterMetric("orbitkv_peer_fetched_pages_total") - fetchedBefore).isEqualTo(4.0);
        assertThat(requesterSum("orbitkv_planning_route_choices_total", "outcome=\"default_selection_off\"")
                - choicesBefore).isGreaterThanOrEqualTo(1.0);
        await().atMost(SOON).until(() -> requesterSum("orbitkv_cost_shadow_decisions_total",
                "path=\"peer_host_ready_route\"") > comparedBefore);
        engine.release(ready.getLease().getLeaseId()).await(10, TimeUnit.SECONDS);
        assertNothingHeld();
    }

    @Test
    @Order(5)
    void theSourceStoppedWithSigstopTimesOutItsPeerAttemptIsFencedAndTheDemandIsReplannedOntoLocalSsdWithinItsBudget()
            throws Exception {
        List<ByteString> hashes = publishOnSource("delta", 16); // a 16-page lease: the source sends 8, then stalls
        onLocalSsdOnly("delta", hashes, "stop-evict-");
        List<StateKey> keys = keys(hashes);
        awaitPeerEvidence(keys);
        double fetchedBefore = requesterMetric("orbitkv_peer_fetched_pages_total");
        double replansBefore = requesterMetric("orbitkv_queries_replans_total");
        double avoidedBefore = requesterMetric("orbitkv_planning_peers_avoided_total");
        double timeoutsBefore = requesterSum("orbitkv_peer_fetch_failures_total", "kind=\"timeout\"");
        long before = requester.peerRole().orElseThrow().transport().receivedBytes();
        // The engine's own budget for this demand (max_wait), shorter than the configured one: the peer attempt
        // gets what it has left less the fallback reserve (peer.fallback-reserve-ms, default 1 s).
        Demand demand = Demand.newBuilder().setRequestId("sigstop").setRevision(0).setOperationId(5)
                .setPageSizeTokens(PeerITFixture.PAGE_TOKENS).setValidPrefixTokens(0)
                .setSelectedEndTokens(16L * PeerITFixture.PAGE_TOKENS).setSelectedGroupId(0)
                .addGroups(GroupDemand.newBuilder().setGroupId(0).addAllBlockHashes(hashes)
                        .addRanges(BlockSpan.newBuilder().setStart(0).setEnd(16)))
                .setMaxWaitMicros(TimeUnit.MILLISECONDS.toMicros(STOP_BUDGET_MS)).build();
        List<QueryReply> seen = new ArrayList<>();
        long started = System.nanoTime();
        QueryReply first = engine.submitDemand(demand).await(10, TimeUnit.SECONDS);
        seen.add(first);
        assertThat(first.getStatus()).isEqualTo(QueryStatus.PENDING);
        QueryReply settled;
        try {
            await().atMost(SOON).until(() -> requester.peerRole().orElseThrow().transport().receivedBytes() - before >= 8L * PAGE);
            await().atMost(SOON).pollInterval(Duration.ofMillis(5)).until(() -> {
                QueryReply now = engine.poll(first.getTicket()).await(10, TimeUnit.SECONDS);
                seen.add(now);
                return now.getDetail() == QueryStatus.RESERVED;
            });
            signalSource("STOP"); // mid-transfer: half the pages landed, the source lease is held
            settled = settle(seen.getLast(), seen);
            // Settled while the source is still stopped: the attempt's bound passed, the transfer was fenced (its
            // slots aborted, nothing of it sealed) and the segment was replanned onto this Manager's SSD copy.
            assertThat(settled.getStatus()).as("settled: " + seen).isEqualTo(QueryStatus.READY);
            assertThat(Duration.ofNanos(System.nanoTime() - started)).isLessThan(Duration.ofMillis(STOP_BUDGET_MS));
            assertThat(requester.peerRole().orElseThrow().transport().receivedBytes() - before).as("the stopped source sent no more")
                    .isLessThan(16L * PAGE);
        } finally {
            signalSource("CONT");
        }
        assertThat(settled.getReadyBlocks()).isEqualTo(16);
        MemorySegment expected = Arena.ofAuto().allocate(PAGE);
        for (LeasedPage page : settled.getLease().getPagesList()) {
            fill(expected, "delta", page.getPosition());
            assertThat(engine.slot(page.getSlot()).mismatch(expected)).as("page " + page.getPosition()).isEqualTo(-1);
        }
        assertThat(requesterSum("orbitkv_peer_fetch_failures_total", "kind=\"timeout\"") - timeoutsBefore)
                .as("one peer attempt timed out").isEqualTo(1.0);
        assertThat(requesterMetric("orbitkv_peer_fetched_pages_total")).as("no page of the failed transfer sealed")
                .isEqualTo(fetchedBefore);
        assertThat(requesterMetric("orbitkv_queries_replans_total")).isEqualTo(replansBefore + 1);
        assertThat(requesterMetric("orbitkv_planning_peers_avoided_total")).isEqualTo(avoidedBefore + 1);
        engine.release(settled.getLease().getLeaseId()).await(10, TimeUnit.SECONDS);
        // Resumed, the source ends the lease (expired meanwhile, or the requester's queued Release) and, once its
        // stalled send sees the fenced connection closed, drops the pins; the requester holds nothing either.
        assertNothingHeld();
        assertThat(source.alive()).isTrue();
        assertThat(requester.membershipRole().orElseThrow().members()).containsKey(source.memberId());

        // Once its avoidance lapses, the resumed source serves a fresh demand again (and the next test starts clean).
        List<ByteString> after = publishOnSource("delta-after", 2);
        awaitPeerEvidence(keys(after));
        await().atMost(SOON).pollInterval(Duration.ofMillis(200)).until(() -> {
            QueryReply reply = settle(engine.submit(List.of(chain(after)), 0).await(10, TimeUnit.SECONDS),
                    new ArrayList<>());
            if (reply.getStatus() == QueryStatus.READY) {
                engine.release(reply.getLease().getLeaseId()).await(10, TimeUnit.SECONDS);
                return true;
            }
            return false;
        });
        assertThat(requesterMetric("orbitkv_peer_fetched_pages_total")).isEqualTo(fetchedBefore + 2);
        assertNothingHeld();
    }

    @Test
    @Order(9)
    void theSourceKilledDuringTheDemandIsFencedThenReplannedOntoLocalSsdWithinTheBudget() throws Exception {
        List<ByteString> hashes = publishOnSource("gamma", 16); // a 16-page lease: the source sends 8, then stalls
        // The same pages here on SSD only (published, committed, evicted): an alternative of equal coverage, after
        // peer DRAM in the default order.
        assertThat(publish(engine, "gamma", 16)).isEqualTo(hashes);
        await().atMost(SOON).until(() -> new StorageProxy(requester.vertx()).discover(keys(hashes))
                .await(5, TimeUnit.SECONDS).stream().allMatch(e -> e.ssdGeneration() >= 0));
        for (int i = 0; i < 4; i++) {
            publish(engine, "evict-" + i, 20); // 20 MiB through a 16 MiB pool
        }
        double fetchedBefore = requesterMetric("orbitkv_peer_fetched_pages_total");
        double replansBefore = requesterMetric("orbitkv_queries_replans_total");
        double avoidedBefore = requesterMetric("orbitkv_planning_peers_avoided_total");
        List<StateKey> keys = keys(hashes);
        assertThat(residentHere(keys)).as("evicted from this Manager's pool").isZero();
        awaitPeerEvidence(keys);
        long before = requester.peerRole().orElseThrow().transport().receivedBytes();
        List<QueryReply> seen = new ArrayList<>();
        long started = System.nanoTime();
        QueryReply first = engine.submit(List.of(chain(hashes)), 0).await(10, TimeUnit.SECONDS);
        assertThat(first.getStatus()).isEqualTo(QueryStatus.PENDING);
        assertThat(first.getDetail()).isEqualTo(QueryStatus.CANDIDATE);
        seen.add(first);
        await().atMost(SOON).until(() -> requester.peerRole().orElseThrow().transport().receivedBytes() - before >= 8L * PAGE);
        // The source granted the lease and stalls half way (its test hook): the demand is RESERVED (source lease
        // held, bytes not yet sealed here), never RESIDENT or READY, for as long as the transfer is held.
        await().atMost(SOON).pollInterval(Duration.ofMillis(5)).until(() -> {
            QueryReply now = engine.poll(first.getTicket()).await(10, TimeUnit.SECONDS);
            seen.add(now);
            return now.getDetail() == QueryStatus.RESERVED;
        });
        assertThat(seen.getLast().getStatus()).isEqualTo(QueryStatus.PENDING);
        assertThat(seen).extracting(QueryReply::getDetail).containsOnly(QueryStatus.CANDIDATE, QueryStatus.RESERVED);
        assertThat(requester.peerRole().orElseThrow().transport().receivedBytes() - before).as("still held half way").isLessThan(16L * PAGE);
        cluster.kill(source); // SIGKILL while the transfer is in flight

        QueryReply settled = settle(seen.getLast(), seen);
        // The failed transfer is fenced (nothing more lands in its slots, which are freed) before the segment is
        // planned again; the dead source is left out of the replan, which reads the same pages from local SSD: READY
        // within the waiting budget, every byte the published one, none of it from the failed transfer.
        assertThat(settled.getStatus()).as("settled: " + seen).isEqualTo(QueryStatus.READY);
        assertThat(Duration.ofNanos(System.nanoTime() - started)).isLessThan(Duration.ofMillis(WAIT_BUDGET_MS));
        assertThat(settled.getReadyBlocks()).isEqualTo(16);
        MemorySegment expected = Arena.ofAuto().allocate(PAGE);
        for (LeasedPage page : settled.getLease().getPagesList()) {
            fill(expected, "gamma", page.getPosition());
            assertThat(engine.slot(page.getSlot()).mismatch(expected)).as("page " + page.getPosition()).isEqualTo(-1);
        }
        assertThat(requesterMetric("orbitkv_peer_fetched_pages_total")).as("no page of the failed transfer sealed")
                .isEqualTo(fetchedBefore);
        assertThat(requesterMetric("orbitkv_queries_replans_total")).isEqualTo(replansBefore + 1);
        assertThat(requesterMetric("orbitkv_planning_peers_avoided_total")).isEqualTo(avoidedBefore + 1);
        assertThat(source.alive()).isFalse();
        engine.release(settled.getLease().getLeaseId()).await(10, TimeUnit.SECONDS);
        assertNothingHeld();
    }
}
