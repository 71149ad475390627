package io.orbitkv.peer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.orbitkv.clusterkit.ClusterCertificates;
import io.orbitkv.manager.Manager;
import io.orbitkv.nativeio.shm.SharedMemoryFile;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
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
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The transport's received checksums ({@link PeerTransport.Receive#receivedChecksums}), over real sockets, both
 * receive paths: plaintext (recv straight into the slots, sendfile from a shared-memory file) and TLS (decrypted
 * straight into the slots, a record across a page's end copied in), each with the CRC32C inline on the event loop
 * ({@code peer.verify-threads} 0) and on verifier threads (2). Each value must be the CRC32C of the bytes the slot
 * holds after the receive, so a byte changed in flight (the source's flip hook) shows as a value that differs from
 * the source's; the requester's {@code orbitkv_peer_verified_bytes_total{thread}} (labelled by the thread that
 * really ran the CRC) shows where it ran. A fence while a verifier holds a page completes only after that check let go
 * of the slot, and the check then skips the page.
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

    /** A source transport serving the {@link #PAGES} pages of a random shared-memory pool, and a requester. */
    private final class Pair {
        final TcpPeerTransport source;
        final TcpPeerTransport requester;
        final SimpleMeterRegistry requesterMeters = new SimpleMeterRegistry();
        final List<Integer> sourceCrcs = new ArrayList<>();
        final int port;

        Pair(boolean plaintext, long flipPage, int verifyThreads) throws Exception {
            ClusterCertificates.create(dir.resolve("certs"), 2, List.of("127.0.0.1", "localhost"), Duration.ofDays(1));
            Path certs = dir.resolve("certs");
            vertx = Manager.newVertx(2);
            PeerSettings sourceSettings = new PeerSettings(1, 1, plaintext, 10_000, 1L << 30, 64, flipPage, 0, 0);
            PeerSettings requesterSettings = new PeerSettings(1, 1, plaintext, 10_000, 1L << 30, 64, 0, 0, 0)
                    .withVerifyThreads(verifyThreads);
            source = new TcpPeerTransport(vertx, sourceSettings, certs.resolve("ca.pem"),
                    certs.resolve("manager-1.pem"), certs.resolve("manager-1.key"));
            requester = new TcpPeerTransport(vertx, requesterSettings, requesterMeters, certs.resolve("ca.pem"),
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
            for (int i = 0; i < PAGES; i++) {
                pages.add(new TcpPeerTransport.PageSlice((long) i * PAGE, PAGE));
                CRC32C crc = new CRC32C();
                crc.update(pool.asSlice((long) i * PAGE, PAGE).asByteBuffer());
                sourceCrcs.add((int) crc.getValue());
            }
            port = source.serve("127.0.0.1", 0, poolPath, pool, new TcpPeerTransport.Source() {
                @Override
                public List<TcpPeerTransport.PageSlice> begin(long leaseId, byte[] token, String peerMemberId) {
                    return pages;
                }

                @Override
                public void finished(long leaseId, boolean sent) {}
            }).await(10, TimeUnit.SECONDS);
        }

        /** Received bytes whose CRC32C ran on {@code thread} ({@code event_loop} or {@code verifier}). */
        double verified(String thread) {
            return requesterMeters.get("orbitkv_peer_verified_bytes_total").tag("thread", thread).counter().count();
        }
    }

    @ParameterizedTest(name = "{0}, verify-threads {1}")
    @CsvSource({"plaintext, 0", "plaintext, 2", "tls, 0", "tls, 2"})
    void receivedChecksumsAreOverTheSlotsBytesAndShowAByteFlippedInFlight(String mode, int verifyThreads) throws Exception {
        boolean plaintext = mode.equals("plaintext");
        // page 3 of the first lease is changed in flight (a copy; the source pool is never written)
        Pair pair = new Pair(plaintext, 3, verifyThreads);
        TcpPeerTransport requester = pair.requester;
        int port = pair.port;
        List<Integer> sourceCrcs = pair.sourceCrcs;

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
                assertThat(requester.verificationsPending()).as("every check reported back before completion").isZero();
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
            // Where the CRC ran: the label is the thread that computed it (Context.isOnEventLoopThread()).
            double all = 2.0 * PAGES * PAGE;
            assertThat(pair.verified(verifyThreads == 0 ? "event_loop" : "verifier")).as("bytes checked").isEqualTo(all);
            assertThat(pair.verified(verifyThreads == 0 ? "verifier" : "event_loop")).as("bytes checked elsewhere").isZero();
        } finally {
            for (TcpPeerTransport t : List.copyOf(transports)) {
                t.close().await(10, TimeUnit.SECONDS);
            }
            transports.clear();
            arena.close();
        }
        if (plaintext) {
            assertThat(requester.receivedInPlaceBytes()).as("the plaintext path received in place").isPositive();
            assertThat(pair.source.recordBuffersCreated() + pair.source.recordBuffersReused()).as("no TLS records")
                    .isZero();
        } else {
            // decrypted straight into the slots, but for a record that crosses a page's end (copied in)
            assertThat(requester.receivedInPlaceBytes()).as("the TLS path decrypted in place")
                    .isGreaterThanOrEqualTo(requester.receivedBytes() * 9 / 10);
            // 20 MiB in records of at most 16 KiB: at least 1280 records, written by the source into the few buffers
            // its connection keeps (a fresh allocation per record would count every one as created)
            long records = 2L * PAGES * PAGE / (16 << 10);
            assertThat(pair.source.recordBuffersReused()).as("records written into reused buffers")
                    .isGreaterThanOrEqualTo(records - pair.source.recordBuffersCreated());
            assertThat(pair.source.recordBuffersCreated()).as("record buffers the source allocated")
                    .isLessThanOrEqualTo(2L * RecordBuffers.MAX_FREE);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"plaintext", "tls"})
    void aFenceWhileAVerifierHoldsAPageCompletesOnlyAfterTheCheckLetGoAndTheCheckThenSkipsIt(String mode) throws Exception {
        Pair pair = new Pair(mode.equals("plaintext"), 0, 1);
        TcpPeerTransport requester = pair.requester;
        CountDownLatch holding = new CountDownLatch(1);
        CountDownLatch letGo = new CountDownLatch(1);
        AtomicInteger checks = new AtomicInteger();
        requester.beforeVerify(() -> {
            if (checks.getAndIncrement() == 0) { // the first page's check: held until the test lets it go
                holding.countDown();
                try {
                    letGo.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        });
        Context context = vertx.getOrCreateContext();
        Arena arena = Arena.ofShared();
        try {
            MemorySegment slots = arena.allocate((long) PAGES * PAGE, 4096);
            List<PeerTransport.Destination> destinations = new ArrayList<>();
            for (int i = 0; i < PAGES; i++) {
                destinations.add(new PeerTransport.Destination(slots.asSlice((long) i * PAGE, PAGE)));
            }
            PeerTransport.Receive receive = onContext(context, () -> Future.succeededFuture(requester.receive(
                    "127.0.0.1:" + pair.port, 1, new byte[16], destinations, Duration.ofSeconds(20))))
                    .await(10, TimeUnit.SECONDS);
            assertThat(holding.await(20, TimeUnit.SECONDS)).as("the first page landed and its check started").isTrue();
            Future<Void> fenced = receive.fence(); // queues its step on the receive's loop, from this thread
            // The fence's step ends the receive, closes the connection, then waits for the held check.
            await().atMost(Duration.ofSeconds(10)).until(() -> requester.fencesWaitingForVerification() == 1);
            assertThat(fenced.isComplete()).as("the fence waits while a verifier holds a page").isFalse();
            assertThat(requester.verificationsPending()).isPositive();
            assertThat(receive.completion().failed()).as("the receive ended at the fence").isTrue();
            letGo.countDown();
            fenced.await(10, TimeUnit.SECONDS);
            assertThat(requester.verificationsPending()).as("no check outstanding after the fence").isZero();
            assertThat(requester.fencesWaitingForVerification()).isZero();
            assertThat(pair.verified("verifier")).as("the held check saw the fence and skipped its page, as did any queued")
                    .isZero();
            assertThat(pair.verified("event_loop")).isZero();
            assertThat(receive.receivedChecksums()).isNull();
        } finally {
            letGo.countDown();
            for (TcpPeerTransport t : List.copyOf(transports)) {
                t.close().await(10, TimeUnit.SECONDS);
            }
            transports.clear();
            arena.close(); // the slots go only now that no check can read them
        }
    }

    /** Runs {@code action} on {@code context}; its result. */
    static <T> Future<T> onContext(Context context, Supplier<Future<T>> action) {
        Promise<T> promise = Promise.promise();
        context.runOnContext(v -> action.get().onComplete(promise));
        return promise.future();
    }
}
