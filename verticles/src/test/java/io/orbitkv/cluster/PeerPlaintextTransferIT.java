package io.orbitkv.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.orbitkv.peer.PeerException;
import io.orbitkv.peer.PeerSettings;
import io.orbitkv.peer.PeerTransport;
import io.orbitkv.peer.PeerCommands;
import io.orbitkv.peer.PeerProxy;
import io.orbitkv.peer.TcpPeerTransport;
import io.orbitkv.nativeio.shm.PoolPages;
import io.orbitkv.protocol.peer.PeerGrant;
import io.orbitkv.protocol.peer.PeerReleaseRequest;
import io.orbitkv.protocol.peer.PeerTransferGrpcClient;
import io.orbitkv.model.StateKey;
import io.orbitkv.storage.StorageCommands;
import io.vertx.core.Context;
import io.vertx.core.Vertx;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import io.orbitkv.model.ImageRef;

/**
 * The plaintext peer transport (explicit {@code peer.transport=plaintext} on both Managers) with real processes: one
 * etcd and the source Manager (manager-1) as processes, the requester (manager-2) in this JVM
 * ({@link PeerITFixture.SourceAndRequester}, this class's own). Pages go by sendfile from the source's pool file and land
 * by recv straight in the requester's slots; transfer connections are reused across leases, each transfer proved by
 * its own lease token.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@Timeout(value = 150, unit = TimeUnit.SECONDS)
class PeerPlaintextTransferIT {
    static final int PAGE = PeerITFixture.PAGE;
    static final Duration SOON = Duration.ofSeconds(20);

    @TempDir
    static Path dir;
    static PeerITFixture.SourceAndRequester rig;

    @BeforeAll
    static void start() throws Exception {
        // no warming: this class counts the connections its fetches open (PeerWarmIT covers warming)
        rig = PeerITFixture.SourceAndRequester.launch(dir, 2, "/orbitkv-peer-plain-test",
                Map.of("peer.transport", "plaintext"), "plaintext", r -> r.set("peer.warm-connections", "0"),
                PeerTransferIT.identity());
    }

    @AfterAll
    static void stop() throws Exception {
        if (rig != null) {
            rig.close();
        }
    }

    static void assertNothingLeaked() throws Exception {
        StorageCommands.StorageStats stats = rig.requesterStorage();
        assertThat(stats.unsealedImages()).isZero();
        assertThat(stats.openPublishes()).isZero();
        assertThat(stats.pinnedImages()).isZero();
        await().atMost(SOON).until(() -> rig.sourceMetric("orbitkv_peer_source_leases") == 0.0);
        await().atMost(SOON).until(() -> rig.sourceMetric("orbitkv_images_pinned") == 0.0);
    }

    @Test
    @Order(1)
    void plaintextFetchesLandEveryByteInTheSlotsOverOneReusedConnection() throws Exception {
        PeerProxy peer = rig.peer();
        long opened = rig.peerRole().transferConnectionsOpened();
        long inPlace = rig.peerRole().transport().receivedInPlaceBytes();
        long received = rig.peerRole().transport().receivedBytes();
        int fetchedPages = 0;
        for (String seed : List.of("plain-a", "plain-b", "plain-c")) {
            int n = seed.equals("plain-b") ? 1 : 3;
            List<StateKey> keys = rig.publish(seed, n);
            PeerCommands.Fetched fetched = peer.fetch(rig.owner(), rig.namespace, keys,
                    rig.generations(keys), Duration.ofSeconds(20)).await(30, TimeUnit.SECONDS);
            assertThat(fetched.stages()).containsExactly(PeerCommands.Stage.CANDIDATE, PeerCommands.Stage.RESERVED,
                    PeerCommands.Stage.RESIDENT, PeerCommands.Stage.READY);
            assertThat(fetched.bytes()).isEqualTo((long) n * PAGE);
            MemorySegment expected = Arena.ofAuto().allocate(PAGE);
            for (int i = 0; i < n; i++) {
                ImageRef ref = fetched.local().get(i);
                assertThat(ref.key()).isEqualTo(keys.get(i));
                PeerITFixture.fill(expected, seed, i);
                assertThat(rig.requesterPool.segment().asSlice(ref.offset(), PAGE).mismatch(expected))
                        .as(seed + " page " + i).isEqualTo(-1);
            }
            fetchedPages += n;
        }
        // Over one connection for 3 leases; by recv(2) into the slots themselves on a huge-page pool, through read
        // buffers copied in on a pool of 4 KiB pages (the cheaper there).
        boolean hugePages = PoolPages.of(rig.requesterPool.path().getParent()).hugePages();
        assertThat(rig.peerRole().transport().plaintextInPlace()).isEqualTo(hugePages);
        assertThat(rig.peerRole().transport().receivedBytes() - received).isEqualTo((long) fetchedPages * PAGE);
        assertThat(rig.peerRole().transport().receivedInPlaceBytes() - inPlace)
                .isEqualTo(hugePages ? (long) fetchedPages * PAGE : 0);
        assertThat(rig.peerRole().transferConnectionsOpened() - opened).isEqualTo(1);
        assertThat(rig.requester.registry().get("orbitkv_peer_checksum_mismatches_total").counter().count()).isZero();
        assertNothingLeaked();
    }

    @Test
    @Order(2)
    void aReusedConnectionCannotReadALeaseWhoseTokenItDoesNotHold() throws Exception {
        List<StateKey> mine = rig.publish("plain-mine", 2);
        List<StateKey> theirs = rig.publish("plain-theirs", 2);
        Vertx vertx = Vertx.vertx();
        TcpPeerTransport transport = new TcpPeerTransport(vertx, new PeerSettings(-1, -1, true, 10_000, 256L << 20, 4096,
                0, 0, 64L << 20), dir.resolve("certs/ca.pem"), dir.resolve("certs/manager-2.pem"), dir.resolve("certs/manager-2.key"));
        PeerTransferGrpcClient grpc = rig.rawClient(vertx);
        try {
            PeerGrant a = rig.grant(grpc, mine, rig.generations(mine));
            PeerGrant b = rig.grant(grpc, theirs, rig.generations(theirs));
            Context context = vertx.getOrCreateContext();
            // Lease a, with its token: its pages arrive; the connection goes back to the pool.
            List<PeerTransport.Destination> forA = PeerITFixture.destinations(2, PAGE);
            PeerITFixture.onContext(context, () -> transport.receive(a.getTransferEndpoint(), a.getLeaseId(),
                    a.getTransferToken().toByteArray(), forA, Duration.ofSeconds(10)).completion()).await(20, TimeUnit.SECONDS);
            MemorySegment expected = Arena.ofAuto().allocate(PAGE);
            for (int i = 0; i < 2; i++) {
                PeerITFixture.fill(expected, "plain-mine", i);
                assertThat(forA.get(i).slot().mismatch(expected)).isEqualTo(-1);
            }
            assertThat(transport.connectionsOpened()).isEqualTo(1);
            // Lease b over the reused connection, with lease a's token (b's is not known here): refused, no byte.
            List<PeerTransport.Destination> forB = PeerITFixture.destinations(2, PAGE);
            ExecutionException e = assertThrows(ExecutionException.class, () -> PeerITFixture.onContext(context, () -> transport.receive(
                    b.getTransferEndpoint(), b.getLeaseId(), a.getTransferToken().toByteArray(), forB, Duration.ofSeconds(10))
                    .completion()).toCompletionStage().toCompletableFuture().get(20, TimeUnit.SECONDS));
            assertThat(e.getCause()).isInstanceOf(PeerException.class);
            assertThat(((PeerException) e.getCause()).kind()).isEqualTo(PeerException.Kind.TRANSFER_FAILED);
            for (PeerTransport.Destination d : forB) {
                assertThat(PeerITFixture.allZero(d.slot())).isTrue();
            }
            // the reused connection was refused and closed; its one retry on a fresh connection was refused too
            assertThat(transport.connectionsOpened()).isEqualTo(2);
            // Lease b is untouched by the attempt: its owner still transfers it, with its own token.
            PeerITFixture.onContext(context, () -> transport.receive(b.getTransferEndpoint(), b.getLeaseId(),
                    b.getTransferToken().toByteArray(), forB, Duration.ofSeconds(10)).completion()).await(20, TimeUnit.SECONDS);
            for (int i = 0; i < 2; i++) {
                PeerITFixture.fill(expected, "plain-theirs", i);
                assertThat(forB.get(i).slot().mismatch(expected)).isEqualTo(-1);
            }
            for (PeerGrant g : List.of(a, b)) {
                assertThat(grpc.release(PeerReleaseRequest.newBuilder().setLeaseId(g.getLeaseId()).build())
                        .await(10, TimeUnit.SECONDS).getReleased()).isTrue();
            }
            assertNothingLeaked();
        } finally {
            transport.close().await(10, TimeUnit.SECONDS);
            vertx.close().await(10, TimeUnit.SECONDS);
        }
    }
}
