package io.orbitkv.peer;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.cluster.ClusterCertificates;
import io.orbitkv.manager.Manager;
import io.orbitkv.nativeio.shm.SharedMemoryFile;
import io.vertx.core.Vertx;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The transport's received checksums ({@link PeerTransport.Receive#receivedChecksums}), over real sockets, both
 * receive paths: plaintext (recv straight into the slots, sendfile from a shared-memory file) and TLS (decrypted
 * buffers copied into the slots). Each value must be the CRC32C of the bytes the slot holds after the receive, so a
 * byte changed in flight (the source's flip hook) shows as a value that differs from the source's.
 */
class TcpPeerTransportChecksumTest {
    static final int PAGE = 2 << 20;
    static final int PAGES = 5;

    @TempDir
    Path dir;
    Vertx vertx;
    SharedMemoryFile sourcePool;
    final List<TcpPeerTransport> transports = new ArrayList<>();

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

    @ParameterizedTest
    @ValueSource(strings = {"plaintext", "tls"})
    void receivedChecksumsAreOverTheSlotsBytesAndShowAByteFlippedInFlight(String mode) throws Exception {
        boolean plaintext = mode.equals("plaintext");
        ClusterCertificates.create(dir.resolve("certs"), 2, List.of("127.0.0.1", "localhost"), Duration.ofDays(1));
        Path certs = dir.resolve("certs");
        vertx = Manager.newVertx(2);
        // page 3 of the first lease is changed in flight (a copy; the source pool is never written)
        PeerSettings sourceSettings = new PeerSettings(1, 1, plaintext, 10_000, 1L << 30, 64, 3, 0, 0);
        PeerSettings requesterSettings = new PeerSettings(1, 1, plaintext, 10_000, 1L << 30, 64, 0, 0, 0);
        TcpPeerTransport source = new TcpPeerTransport(vertx, sourceSettings, certs.resolve("ca.pem"),
                certs.resolve("manager-1.pem"), certs.resolve("manager-1.key"));
        TcpPeerTransport requester = new TcpPeerTransport(vertx, requesterSettings, certs.resolve("ca.pem"),
                certs.resolve("manager-2.pem"), certs.resolve("manager-2.key"));
        transports.add(requester);
        transports.add(source);
        Path poolPath = Path.of("/dev/shm", "orbitkv-crc-test-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        sourcePool = SharedMemoryFile.create(poolPath, (long) PAGES * PAGE);
        MemorySegment pool = sourcePool.segment();
        SplittableRandom random = new SplittableRandom(7);
        for (long o = 0; o < pool.byteSize(); o += 8) {
            pool.set(ValueLayout.JAVA_LONG_UNALIGNED, o, random.nextLong());
        }
        List<TcpPeerTransport.PageSlice> pages = new ArrayList<>();
        List<Integer> sourceCrcs = new ArrayList<>();
        for (int i = 0; i < PAGES; i++) {
            pages.add(new TcpPeerTransport.PageSlice((long) i * PAGE, PAGE));
            CRC32C crc = new CRC32C();
            crc.update(pool.asSlice((long) i * PAGE, PAGE).asByteBuffer());
            sourceCrcs.add((int) crc.getValue());
        }
        int port = source.serve("127.0.0.1", 0, poolPath, pool, new TcpPeerTransport.Source() {
            @Override
            public List<TcpPeerTransport.PageSlice> begin(long leaseId, byte[] token, String peerMemberId) {
                return pages;
            }

            @Override
            public void finished(long leaseId, boolean sent) {}
        }).await(10, TimeUnit.SECONDS);

        Arena arena = Arena.ofShared();
        try {
            for (int lease = 1; lease <= 2; lease++) {
                MemorySegment slots = arena.allocate((long) PAGES * PAGE, 4096);
                List<PeerTransport.Destination> destinations = new ArrayList<>();
                for (int i = 0; i < PAGES; i++) {
                    destinations.add(new PeerTransport.Destination(slots.asSlice((long) i * PAGE, PAGE)));
                }
                PeerTransport.Receive receive = requester.receive("127.0.0.1:" + port, lease, new byte[16], destinations,
                        Duration.ofSeconds(20));
                receive.completion().await(30, TimeUnit.SECONDS);
                List<Integer> received = receive.receivedChecksums();
                assertThat(received).hasSize(PAGES);
                for (int i = 0; i < PAGES; i++) {
                    CRC32C crc = new CRC32C();
                    crc.update(slots.asSlice((long) i * PAGE, PAGE).asByteBuffer());
                    assertThat(received.get(i)).as(mode + " lease " + lease + " page " + i + ": the slot's bytes")
                            .isEqualTo((int) crc.getValue());
                    boolean flipped = lease == 1 && i == 2;
                    if (flipped) {
                        assertThat(received.get(i)).as("the flipped page").isNotEqualTo(sourceCrcs.get(i));
                    } else {
                        assertThat(received.get(i)).as(mode + " lease " + lease + " page " + i)
                                .isEqualTo(sourceCrcs.get(i));
                    }
                }
            }
        } finally {
            for (TcpPeerTransport t : List.copyOf(transports)) {
                t.close().await(10, TimeUnit.SECONDS);
            }
            transports.clear();
            arena.close();
        }
        if (plaintext) {
            assertThat(TcpPeerTransport.receivedInPlaceBytes()).as("the plaintext path received in place").isPositive();
        }
    }
}
