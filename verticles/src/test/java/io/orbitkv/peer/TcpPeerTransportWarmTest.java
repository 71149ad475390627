package io.orbitkv.peer;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.clusterkit.ClusterCertificates;
import io.orbitkv.clusterkit.LocalEtcd;
import io.orbitkv.common.Ticker;
import io.orbitkv.manager.Manager;
import io.orbitkv.nativeio.shm.SharedMemoryFile;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Warming over real sockets ({@link TcpPeerTransport#warm}): connections opened ahead of need, one per transfer loop,
 * carry the next receives on those loops without a new connection; with TLS a source whose certificate names another
 * member is refused; an unreachable port is counted as failed and the receive that follows still works on its own.
 */
class TcpPeerTransportWarmTest {
    static final int PAGE = 1 << 20;
    static final int LOOPS = 2;

    @TempDir
    Path dir;
    Vertx vertx;
    SharedMemoryFile sourcePool;
    final List<TcpPeerTransport> transports = new ArrayList<>();
    TcpPeerTransport source;
    TcpPeerTransport requester;
    Context requesterOwner;
    int port;

    @AfterEach
    void close() throws Exception {
        for (TcpPeerTransport t : transports) {
            t.close().await(10, TimeUnit.SECONDS);
        }
        if (vertx != null) {
            vertx.close().await(10, TimeUnit.SECONDS);
        }
        if (sourcePool != null) {
            sourcePool.close();
            Files.deleteIfExists(sourcePool.path());
        }
    }

    /** A source (manager-1) serving one page of known bytes for any lease, and a requester (manager-2). */
    private void start(boolean plaintext) throws Exception {
        ClusterCertificates.create(dir.resolve("certs"), 2, List.of("127.0.0.1", "localhost"), Duration.ofDays(1));
        Path certs = dir.resolve("certs");
        vertx = Manager.newVertx(2);
        PeerSettings settings = new PeerSettings(1, 1, plaintext, 10_000, 1L << 30, 64, 0, 0, 0).withTransferLoops(LOOPS);
        source = new TcpPeerTransport(vertx, settings, new SimpleMeterRegistry(), certs.resolve("ca.pem"),
                certs.resolve("manager-1.pem"), certs.resolve("manager-1.key"), "source", Ticker.SYSTEM);
        requester = new TcpPeerTransport(vertx, settings, new SimpleMeterRegistry(), certs.resolve("ca.pem"),
                certs.resolve("manager-2.pem"), certs.resolve("manager-2.key"), "requester", Ticker.SYSTEM);
        transports.add(requester);
        transports.add(source);
        Path poolPath = Path.of("/dev/shm", "orbitkv-warm-test-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        sourcePool = SharedMemoryFile.create(poolPath, PAGE);
        MemorySegment pool = sourcePool.segment();
        for (long o = 0; o < PAGE; o += 8) {
            pool.set(ValueLayout.JAVA_LONG_UNALIGNED, o, o * 31 + 7);
        }
        TcpPeerTransport.Source grants = new TcpPeerTransport.Source() {
            @Override
            public List<TcpPeerTransport.PageSlice> begin(long leaseId, byte[] token, String peerMemberId) {
                return List.of(new TcpPeerTransport.PageSlice(0, PAGE));
            }

            @Override
            public void finished(long leaseId, boolean sent) {}
        };
        Context sourceOwner = vertx.getOrCreateContext();
        port = Future.<Integer>future(p -> sourceOwner.runOnContext(v ->
                source.serve("127.0.0.1", 0, poolPath, pool, grants).onComplete(p))).await(10, TimeUnit.SECONDS);
        requesterOwner = vertx.getOrCreateContext();
    }

    private int warm(String endpoint, String member, int connections) throws Exception {
        return Future.<Integer>future(p -> requesterOwner.runOnContext(v ->
                requester.warm(endpoint, member, connections).onComplete(p))).await(20, TimeUnit.SECONDS);
    }

    /** {@code n} receives at once from the requester's owner (they take the loops in turn); every byte compared. */
    private void receive(int n) throws Exception {
        try (Arena arena = Arena.ofShared()) {
            List<MemorySegment> slots = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                slots.add(arena.allocate(PAGE, 4096));
            }
            Future.<Void>future(p -> requesterOwner.runOnContext(v -> {
                List<Future<Void>> all = new ArrayList<>();
                for (int i = 0; i < n; i++) {
                    all.add(requester.receive("127.0.0.1:" + port, i + 1, new byte[] {1},
                            List.of(new PeerTransport.Destination(slots.get(i))), Duration.ofSeconds(10)).completion());
                }
                Future.all(all).<Void>mapEmpty().onComplete(p);
            })).await(30, TimeUnit.SECONDS);
            for (MemorySegment slot : slots) {
                assertThat(slot.mismatch(sourcePool.segment())).isEqualTo(-1);
            }
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"plaintext", "tls"})
    void warmedConnectionsCarryTheFirstReceivesOnEveryLoopWithoutANewConnection(String mode) throws Exception {
        start(mode.equals("plaintext"));
        assertThat(warm("127.0.0.1:" + port, "manager-1", LOOPS)).isEqualTo(LOOPS);
        assertThat(requester.connectionsWarmed()).isEqualTo(LOOPS);
        // a second round finds them idle and opens nothing
        assertThat(warm("127.0.0.1:" + port, "manager-1", LOOPS)).isEqualTo(LOOPS);
        assertThat(requester.connectionsWarmed()).isEqualTo(LOOPS);

        receive(LOOPS);
        assertThat(requester.connectionsOpened()).as("connections opened by the receives").isZero();
        assertThat(requester.warmFailures()).isZero();
    }

    @Test
    void aTransferPortWhoseCertificateNamesAnotherMemberIsNotWarmed() throws Exception {
        start(false);
        assertThat(warm("127.0.0.1:" + port, "manager-3", LOOPS)).isZero();
        assertThat(requester.connectionsWarmed()).isZero();
        assertThat(requester.warmFailures()).isEqualTo(LOOPS);
        receive(1); // the refused ones were not pooled: the receive opens its own
        assertThat(requester.connectionsOpened()).isEqualTo(1);
    }

    @Test
    void anUnreachablePortIsCountedAndBlocksNothing() throws Exception {
        start(true);
        int closed = LocalEtcd.freePort();
        assertThat(warm("127.0.0.1:" + closed, "manager-1", LOOPS)).isZero();
        assertThat(requester.warmFailures()).isEqualTo(LOOPS);
        receive(1);
        assertThat(requester.connectionsOpened()).isEqualTo(1);
    }
}
