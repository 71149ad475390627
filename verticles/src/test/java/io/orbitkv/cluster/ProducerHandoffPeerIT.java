package io.orbitkv.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.clusterkit.ClusterCertificates;
import io.orbitkv.clusterkit.LocalCluster;
import io.orbitkv.clusterkit.LocalEtcd;
import io.orbitkv.it.RunningManager;
import io.orbitkv.manager.Manager;
import io.orbitkv.protocol.engine.AllocatePublishReply;
import io.orbitkv.protocol.engine.AllocatePublishRequest;
import io.orbitkv.protocol.engine.BlockSpan;
import io.orbitkv.protocol.engine.Demand;
import io.orbitkv.protocol.engine.GroupDemand;
import io.orbitkv.protocol.engine.InstanceRole;
import io.orbitkv.protocol.engine.LeasedPage;
import io.orbitkv.protocol.engine.PageKey;
import io.orbitkv.protocol.engine.Producer;
import io.orbitkv.protocol.engine.PublishSlot;
import io.orbitkv.protocol.engine.QueryReply;
import io.orbitkv.protocol.engine.QueryStatus;
import io.orbitkv.protocol.engine.SlotStatus;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Producer-to-consumer readiness across two Managers, with real processes: etcd and the producer's Manager
 * (manager-1) run as processes; the consumer's Manager (manager-2) runs in this JVM. A decode engine on manager-2
 * demands pages naming a prefill session on manager-1 and its request: it waits (WAITING_FOR_PRODUCER, nothing held
 * on either side) while manager-1 answers that the session has not sealed them, then, once the prefill engine sealed
 * them there under that request, the pages are fetched over the peer route, CRC32C-verified and READY with the
 * producer's bytes. Pages of the same keys sealed on manager-1 by another session do not satisfy a demand, and a
 * producer session that ends on manager-1 turns it into a MISS within its budget.
 */
@Timeout(value = 150, unit = TimeUnit.SECONDS)
class ProducerHandoffPeerIT {
    static final int PAGE = PeerITFixture.PAGE;
    static final long BUDGET_MS = 20_000;
    static final String TTL_S = "5";
    static final AtomicLong OPERATIONS = new AtomicLong();

    @TempDir
    static Path dir;
    static LocalCluster cluster;
    static LocalCluster.Node source;
    static Manager consumerManager;
    static OrbitKvClient consumerClient;
    static EngineSession decode;
    static OrbitKvClient producerClient;

    @BeforeAll
    static void start() throws Exception {
        assumeTrue(LocalEtcd.installed(), "etcd is not installed (/usr/bin/etcd): install Debian's etcd-server");
        ClusterCertificates.create(dir.resolve("certs"), 2, List.of("127.0.0.1", "localhost"), Duration.ofDays(1));
        cluster = LocalCluster.start(new LocalCluster.Options(1, dir, ManagerProcessMain.command(), Map.of(
                "cluster.lease-ttl-s", TTL_S, "cluster.prefix", "/orbitkv-pd", "ssd.enabled", "false",
                "session.ttl-ms", "60000", "peer.port", String.valueOf(LocalEtcd.freePort()),
                "peer.transfer-port", String.valueOf(LocalEtcd.freePort()))));
        source = cluster.node(1);
        Map<String, String> s = PeerITFixture.requesterSettings(dir, cluster, "manager-2", "/orbitkv-pd", TTL_S);
        s.put("query.wait-budget-ms", String.valueOf(BUDGET_MS));
        consumerManager = PeerITFixture.startRequester(s, source);
        consumerClient = OrbitKvClient.connectTcp("127.0.0.1", consumerManager.grpcTcpPort(), consumerManager.token());
        decode = consumerClient.register(PeerITFixture.identity("pd-peer"), InstanceRole.DECODE).await(10, TimeUnit.SECONDS);
        producerClient = OrbitKvClient.connectTcp("127.0.0.1", source.grpcPort(), OrbitKvClient.readToken(source.tokenFile()));
    }

    @AfterAll
    static void stop() throws Exception {
        if (decode != null) {
            decode.close();
        }
        if (consumerClient != null) {
            consumerClient.close();
        }
        if (producerClient != null) {
            producerClient.close();
        }
        if (consumerManager != null) {
            consumerManager.close();
        }
        if (cluster != null) {
            ClusterProcesses.closeAndAssertNoneLeft(cluster);
        }
    }

    static EngineSession prefillSession() throws Exception {
        return producerClient.register(PeerITFixture.identity("pd-peer"), InstanceRole.PREFILL).await(10, TimeUnit.SECONDS);
    }

    static Demand demand(String requestId, List<ByteString> hashes, EngineSession producer, String producedFor) {
        return Demand.newBuilder().setRequestId(requestId).setOperationId(OPERATIONS.incrementAndGet())
                .setPageSizeTokens(PeerITFixture.PAGE_TOKENS).setSelectedEndTokens((long) hashes.size() * PeerITFixture.PAGE_TOKENS)
                .addGroups(GroupDemand.newBuilder().setGroupId(0).addAllBlockHashes(hashes)
                        .addRanges(BlockSpan.newBuilder().setStart(0).setEnd(hashes.size())))
                .setMaxWaitMicros(BUDGET_MS * 1000)
                .setProducer(Producer.newBuilder().setMember(source.memberId()).setInstanceId(producer.instanceId())
                        .setSessionEpoch(producer.session().getSessionEpoch()).setRequestId(producedFor))
                .build();
    }

    /** Publishes the chain on manager-1 under {@code requestId}, each page filled by {@link PeerITFixture#fill}. */
    static void publish(EngineSession session, String seed, List<ByteString> hashes, String requestId) throws Exception {
        AllocatePublishReply allocated = session.allocate(AllocatePublishRequest.newBuilder().setRequestId(requestId)
                .addAllPages(hashes.stream().map(h -> PageKey.newBuilder().setGroupId(0).setBlockHash(h).build()).toList()))
                .await(10, TimeUnit.SECONDS);
        int i = 0;
        boolean written = false;
        for (PublishSlot slot : allocated.getSlotsList()) {
            if (slot.getStatus() == SlotStatus.ALLOCATED) {
                PeerITFixture.fill(session.slot(slot.getSlot()), seed, i);
                written = true;
            }
            i++;
        }
        if (written) { // every page ALREADY_PRESENT: nothing to seal, and the publish counts for the request at once
            session.seal(allocated.getPublishId(), List.of()).await(10, TimeUnit.SECONDS);
        }
    }

    static QueryReply settle(QueryReply first) {
        AtomicReference<QueryReply> last = new AtomicReference<>(first);
        await().atMost(Duration.ofMillis(BUDGET_MS + 10_000)).pollInterval(Duration.ofMillis(10))
                .until(() -> last.updateAndGet(r -> r.getStatus() != QueryStatus.PENDING ? r
                        : decode.poll(r.getTicket()).await()).getStatus() != QueryStatus.PENDING);
        return last.get();
    }

    /** Still waiting on every poll for a second, with nothing held on either Manager. */
    static void assertStillWaiting(QueryReply reply) throws Exception {
        await().during(Duration.ofSeconds(1)).atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(100))
                .untilAsserted(() -> {
                    QueryReply polled = decode.poll(reply.getTicket()).await();
                    assertThat(polled.getStatus()).isEqualTo(QueryStatus.PENDING);
                    assertThat(polled.getDetail()).isEqualTo(QueryStatus.WAITING_FOR_PRODUCER);
                });
        assertThat(decode.stats().await(10, TimeUnit.SECONDS).getActiveLeases()).as("leases while waiting").isZero();
        assertThat(decode.stats().await(10, TimeUnit.SECONDS).getSessionOutstandingQueries()).isEqualTo(1);
        assertHeldNowhere(null);
    }

    static void assertNothingHeld() throws Exception {
        assertHeldNowhere(decode);
    }

    /** No plan, segment lease, pin or publish on the consumer's Manager (nor lease of {@code engine}); none on the source. */
    static void assertHeldNowhere(EngineSession engine) throws Exception {
        PeerITFixture.assertRequesterHoldsNothing(consumerManager, engine);
        await().atMost(PeerITFixture.SOON).untilAsserted(() -> {
            assertThat(cluster.metric(source, "orbitkv_peer_source_leases", null).orElse(-1)).as("source leases").isZero();
            assertThat(cluster.metric(source, "orbitkv_images_pinned", null).orElse(-1)).as("pins on the source").isZero();
        });
    }

    @Test
    void aConsumerOnAnotherManagerWaitsForTheProducersSealThenGetsItsVerifiedBytes() throws Exception {
        try (EngineSession prefill = prefillSession(); EngineSession other = prefillSession()) {
            List<ByteString> hashes = RunningManager.chain("pd-peer-ready", 4);
            QueryReply first = decode.submitDemand(demand("pd-1", hashes, prefill, "prefill-1"))
                    .await(10, TimeUnit.SECONDS);
            assertThat(first.getStatus()).isEqualTo(QueryStatus.PENDING);
            assertThat(first.getDetail()).isEqualTo(QueryStatus.WAITING_FOR_PRODUCER);
            // Another session on manager-1 seals the same keys (under the same request id): not the named producer.
            publish(other, "pd-peer-ready", hashes, "prefill-1");
            assertStillWaiting(first);

            double fetchedBefore = PeerITFixture.metric(consumerManager, "orbitkv_peer_fetched_pages_total");
            publish(prefill, "pd-peer-ready", hashes, "prefill-1");
            QueryReply ready = settle(first);
            assertThat(ready.getStatus()).isEqualTo(QueryStatus.READY);
            assertThat(ready.getReadyBlocks()).isEqualTo(4);
            assertThat(PeerITFixture.metric(consumerManager, "orbitkv_peer_fetched_pages_total") - fetchedBefore)
                    .as("fetched from the producer's Manager").isEqualTo(4.0);
            try (Arena arena = Arena.ofConfined()) {
                for (LeasedPage page : ready.getLease().getPagesList()) {
                    MemorySegment expected = arena.allocate(PAGE);
                    PeerITFixture.fill(expected, "pd-peer-ready", page.getPosition());
                    assertThat(decode.slot(page.getSlot()).mismatch(expected)).as("page %d", page.getPosition()).isEqualTo(-1);
                }
            }
            assertThat(decode.release(ready.getLease().getLeaseId()).await(10, TimeUnit.SECONDS).getLeaseValid()).isTrue();
            assertThat(LocalCluster.sample(consumerManager.registry().scrape(), "orbitkv_producer_waits_total",
                    "outcome=\"satisfied\"").orElse(-1)).isEqualTo(1.0);
            assertNothingHeld();
        }
    }

    @Test
    void aProducerThatEndsOnItsManagerIsAMissWithinTheBudget() throws Exception {
        EngineSession prefill = prefillSession();
        List<ByteString> hashes = RunningManager.chain("pd-peer-ended", 3);
        QueryReply first = decode.submitDemand(demand("pd-2", hashes, prefill, "prefill-2")).await(10, TimeUnit.SECONDS);
        assertStillWaiting(first);
        long ending = System.nanoTime();
        prefill.close();
        QueryReply miss = settle(first);
        assertThat(miss.getStatus()).isEqualTo(QueryStatus.MISS);
        assertThat(Duration.ofNanos(System.nanoTime() - ending)).isLessThan(Duration.ofMillis(BUDGET_MS));
        assertThat(LocalCluster.sample(consumerManager.registry().scrape(), "orbitkv_producer_waits_total",
                "outcome=\"producer_ended\"").orElse(-1)).isEqualTo(1.0);
        assertNothingHeld();
    }
}
