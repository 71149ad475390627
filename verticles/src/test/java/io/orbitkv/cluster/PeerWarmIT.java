package io.orbitkv.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.orbitkv.model.ImageRef;
import io.orbitkv.model.StateKey;
import io.orbitkv.peer.PeerCommands;
import io.orbitkv.peer.PeerSettings;
import io.orbitkv.peer.TcpPeerTransport;
import io.orbitkv.storage.StorageCommands;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
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
 * Warming with a real two-Manager cluster (etcd and the source manager-1 as processes, the requester manager-2 in this
 * JVM, mutual TLS): the requester opens and verifies the source's control channel and transfer connections in the
 * background, so its first fetch from the source opens no transfer connection; when the source restarts (a new
 * incarnation joins) it is warmed again before the requester fetches from it.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class PeerWarmIT {
    static final int PAGE = PeerITFixture.PAGE;
    static final Duration SOON = Duration.ofSeconds(30);

    @TempDir
    static Path dir;
    static PeerITFixture.SourceAndRequester rig;

    @BeforeAll
    static void start() throws Exception {
        rig = PeerITFixture.SourceAndRequester.launch(dir, 2, "/orbitkv-peer-warm-test", Map.of(), "tls",
                // no periodic rounds: after a member counts warm nothing runs, so what is held then was left behind
                r -> r.set("peer.warm-connections", "auto").set("peer.warm-interval-ms", "0"),
                PeerTransferIT.identity());
    }

    @AfterAll
    static void stop() throws Exception {
        if (rig != null) {
            rig.close();
        }
    }

    static double metric(String name) {
        return PeerITFixture.metric(rig.requester, name);
    }

    /** Waits until the requester counts the source warm with {@code atLeast} warmed connections in all. */
    static void awaitWarm(long atLeast) {
        TcpPeerTransport transport = rig.peerRole().transport();
        await().atMost(SOON).untilAsserted(() -> {
            assertThat(metric("orbitkv_peer_warm_members")).as("members warm").isEqualTo(1.0);
            assertThat(transport.connectionsWarmed()).as("connections warmed").isGreaterThanOrEqualTo(atLeast);
        });
    }

    /** Fetches {@code n} new pages of {@code seed} from the source and compares every byte where it landed. */
    static void fetchAndCompare(String seed, int n) throws Exception {
        List<StateKey> keys = rig.publish(seed, n);
        PeerCommands.Fetched fetched = rig.peer().fetch(rig.owner(), rig.namespace, keys, rig.generations(keys),
                Duration.ofSeconds(20)).await(30, TimeUnit.SECONDS);
        assertThat(fetched.bytes()).isEqualTo((long) n * PAGE);
        MemorySegment expected = Arena.ofAuto().allocate(PAGE);
        for (int i = 0; i < n; i++) {
            ImageRef ref = fetched.local().get(i);
            PeerITFixture.fill(expected, seed, i);
            assertThat(rig.requesterPool.segment().asSlice(ref.offset(), PAGE).mismatch(expected))
                    .as(seed + " page " + i).isEqualTo(-1);
        }
    }

    /**
     * Neither side holds anything of the probes once the member counts warm: no lease, no slot or open publish, no
     * pool byte (no page was published or fetched yet, so both pools are empty).
     */
    static void assertTheProbesLeftNothingHeld() {
        await().atMost(SOON).untilAsserted(() -> {
            assertThat(rig.sourceMetric("orbitkv_peer_source_leases")).as("source leases").isZero();
            assertThat(rig.sourceMetric("orbitkv_pool_requested_bytes")).as("source pool bytes").isZero();
            StorageCommands.StorageStats here = rig.requesterStorage();
            assertThat(here.openPublishes()).as("open publishes here").isZero();
            assertThat(here.unsealedImages()).as("unsealed images here").isZero();
            assertThat(here.requestedBytes()).as("pool bytes here").isZero();
            assertThat(here.residentImages()).as("images here").isZero();
        });
    }

    @Test
    @Order(1)
    void theFirstFetchFromAMemberFindsItsConnectionsWarmAndOpensNone() throws Exception {
        PeerSettings settings = rig.peerRole().settings();
        assertThat(settings.warmConnections()).as("warming is on (peer.warm-connections=auto)").isPositive();
        TcpPeerTransport transport = rig.peerRole().transport();
        awaitWarm(settings.warmConnections());
        // the probe lease ran on the source (a round may have failed first: the source not yet seeing this member),
        // and its page went the way a fetched page goes: into a slot here, checked against the source's CRC32C
        assertThat(rig.sourceMetric("orbitkv_peer_source_probe_leases_total")).isGreaterThanOrEqualTo(1.0);
        assertThat(metric("orbitkv_peer_warm_probe_pages_total")).isGreaterThanOrEqualTo(1.0);
        assertThat(transport.connectionsOpened()).as("no fetch has run yet").isZero();
        assertTheProbesLeftNothingHeld();

        fetchAndCompare("warm-first", 3);
        assertThat(transport.connectionsOpened()).as("transfer connections the first fetch had to open").isZero();
        assertThat(metric("orbitkv_peer_transfer_connections_opened_total")).isZero();
        assertThat(metric("orbitkv_peer_warmed_connections_total")).isEqualTo((double) transport.connectionsWarmed());
        PeerITFixture.assertRequesterHoldsNothing(rig.requester, null);
    }

    @Test
    @Order(2)
    void aMemberThatJoinsAgainIsWarmedBeforeTheNextFetch() throws Exception {
        TcpPeerTransport transport = rig.peerRole().transport();
        long warmedBefore = transport.connectionsWarmed();
        long oldIncarnation = rig.source.incarnation();
        rig.cluster.stop(rig.source);
        rig.cluster.launch(rig.source, Map.of());
        assertThat(rig.source.incarnation()).isNotEqualTo(oldIncarnation);
        await().atMost(SOON).until(() -> {
            var member = rig.requester.membershipRole().orElseThrow().members().get(rig.source.memberId());
            return member != null && member.incarnation() == rig.source.incarnation();
        });
        // the old incarnation's connections closed with it; the new one's are opened on its join
        awaitWarm(warmedBefore + rig.peerRole().settings().warmConnections());
        long openedBefore = transport.connectionsOpened();

        fetchAndCompare("warm-after-restart", 2);
        assertThat(transport.connectionsOpened() - openedBefore).as("connections the fetch had to open").isZero();
        PeerITFixture.assertRequesterHoldsNothing(rig.requester, null);
    }
}
