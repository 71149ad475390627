package io.orbitkv.peer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.clusterkit.ClusterCertificates;
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
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The transport's own loops ({@code peer.transfer-loops}), over real sockets: concurrent receives land on different
 * transfer loops (not on the owner's loop), every crossing to the owner happens on the owner's context (the source's
 * begin/finished, the receive's completion listeners), the bytes and checksums are right, and close() ends the loops'
 * threads. With 0 loops everything stays on the owner's loop.
 */
class TcpPeerTransportLoopsTest {
    static final int PAGE = 2 << 20;
    static final int PAGES = 4;
    static final int RECEIVES = 4;

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
    @CsvSource({"plaintext,2", "tls,2", "plaintext,0"})
    void receivesSpreadOverTheTransferLoopsAndTheOwnerIsOnlyCalledOnItsContext(String mode, int loops) throws Exception {
        boolean plaintext = mode.equals("plaintext");
        ClusterCertificates.create(dir.resolve("certs"), 2, List.of("127.0.0.1", "localhost"), Duration.ofDays(1));
        Path certs = dir.resolve("certs");
        vertx = Manager.newVertx(2);
        PeerSettings settings = new PeerSettings(1, 1, plaintext, 10_000, 1L << 30, 64, 0, 0, 0).withTransferLoops(loops);
        TcpPeerTransport source = new TcpPeerTransport(vertx, settings, new SimpleMeterRegistry(), certs.resolve("ca.pem"),
                certs.resolve("manager-1.pem"), certs.resolve("manager-1.key"), "source", Ticker.SYSTEM);
        TcpPeerTransport requester = new TcpPeerTransport(vertx, settings, new SimpleMeterRegistry(),
                certs.resolve("ca.pem"), certs.resolve("manager-2.pem"), certs.resolve("manager-2.key"), "requester",
                Ticker.SYSTEM);
        transports.add(requester);
        transports.add(source);
        assertThat(requester.transferLoops()).isEqualTo(loops);
        Path poolPath = Path.of("/dev/shm", "orbitkv-loops-test-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        sourcePool = SharedMemoryFile.create(poolPath, (long) PAGES * PAGE);
        MemorySegment pool = sourcePool.segment();
        SplittableRandom random = new SplittableRandom(11);
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
        // the owners: the source role's context (serve) and the requester role's context (receive)
        Context sourceOwner = vertx.getOrCreateContext();
        Context requesterOwner = vertx.getOrCreateContext();
        Set<String> ownerCallsOffContext = ConcurrentHashMap.newKeySet();
        Set<Long> finishedLeases = ConcurrentHashMap.newKeySet();
        TcpPeerTransport.Source grants = new TcpPeerTransport.Source() {
            @Override
            public List<TcpPeerTransport.PageSlice> begin(long leaseId, byte[] token, String peerMemberId) {
                if (Vertx.currentContext() != sourceOwner) {
                    ownerCallsOffContext.add("begin on " + Thread.currentThread().getName());
                }
                return pages;
            }

            @Override
            public void finished(long leaseId, boolean sent) {
                if (Vertx.currentContext() != sourceOwner) {
                    ownerCallsOffContext.add("finished on " + Thread.currentThread().getName());
                }
                finishedLeases.add(leaseId);
            }
        };
        int port = Future.<Integer>future(p -> sourceOwner.runOnContext(v ->
                source.serve("127.0.0.1", 0, poolPath, pool, grants).onComplete(p))).await(10, TimeUnit.SECONDS);

        try (Arena arena = Arena.ofShared()) {
            List<MemorySegment> slots = new ArrayList<>();
            for (int r = 0; r < RECEIVES; r++) {
                slots.add(arena.allocate((long) PAGES * PAGE, 4096)); // zeroed here, not on the owner's loop
            }
            List<PeerTransport.Receive> receives = new ArrayList<>();
            // all receives opened at once from the requester's owner context
            Future.<Void>future(p -> requesterOwner.runOnContext(v -> {
                for (int r = 0; r < RECEIVES; r++) {
                    MemorySegment region = slots.get(r);
                    List<PeerTransport.Destination> destinations = new ArrayList<>();
                    for (int i = 0; i < PAGES; i++) {
                        destinations.add(new PeerTransport.Destination(region.asSlice((long) i * PAGE, PAGE)));
                    }
                    PeerTransport.Receive receive = requester.receive("127.0.0.1:" + port, r + 1, new byte[16],
                            destinations, Duration.ofSeconds(20));
                    receive.completion().onComplete(ar -> {
                        if (Vertx.currentContext() != requesterOwner) {
                            ownerCallsOffContext.add("completion on " + Thread.currentThread().getName());
                        }
                    });
                    receives.add(receive);
                }
                p.complete();
            })).await(10, TimeUnit.SECONDS);
            Future.all(receives.stream().map(PeerTransport.Receive::completion).toList()).await(30, TimeUnit.SECONDS);

            Set<String> landedOn = ConcurrentHashMap.newKeySet();
            for (int r = 0; r < RECEIVES; r++) {
                List<Integer> received = receives.get(r).receivedChecksums();
                for (int i = 0; i < PAGES; i++) {
                    CRC32C crc = new CRC32C();
                    crc.update(slots.get(r).asSlice((long) i * PAGE, PAGE).asByteBuffer());
                    assertThat((int) crc.getValue()).as("receive %d page %d holds the source's bytes", r, i)
                            .isEqualTo(sourceCrcs.get(i));
                    assertThat(received.get(i)).isEqualTo(sourceCrcs.get(i));
                }
                landedOn.add(((TcpReceive) receives.get(r)).landedOn);
            }
            if (loops > 0) {
                assertThat(landedOn).as("the receives' bytes landed on the requester's own loops")
                        .allMatch(name -> name.startsWith("orbitkv-transfer-requester-")).hasSize(loops);
            } else {
                assertThat(landedOn).as("without loops of its own, on the owner's loop").hasSize(1)
                        .noneMatch(name -> name.startsWith("orbitkv-transfer-"));
            }
            // finished() hops to the owner after the last write: await it, then nothing ran off the owners' contexts
            await().atMost(Duration.ofSeconds(10)).until(() -> finishedLeases.size() == RECEIVES);
            assertThat(ownerCallsOffContext).as("owner calls off the owner's context").isEmpty();
        } finally {
            for (TcpPeerTransport t : List.copyOf(transports)) {
                t.close().await(10, TimeUnit.SECONDS);
            }
            transports.clear();
        }
        assertThat(aliveThreads("orbitkv-transfer-source-")).as("close() ended the source's loops").isEmpty();
        assertThat(aliveThreads("orbitkv-transfer-requester-")).as("close() ended the requester's loops").isEmpty();
    }

    static List<String> aliveThreads(String prefix) {
        return Thread.getAllStackTraces().keySet().stream().filter(Thread::isAlive).map(Thread::getName)
                .filter(n -> n.startsWith(prefix)).toList();
    }

    /**
     * The racy part of the test above, alone and repeated: netty completes a group's termination just before its
     * threads leave their run loop, so close() must also join them. Each round makes a transport with two loops, runs
     * a task on each (so the threads exist), closes it, and requires that no thread of that transport is alive.
     */
    @Test
    void closeReturnsOnlyOnceEveryTransferLoopThreadEnded() throws Exception {
        ClusterCertificates.create(dir.resolve("certs"), 1, List.of("127.0.0.1", "localhost"), Duration.ofDays(1));
        Path certs = dir.resolve("certs");
        vertx = Manager.newVertx(2);
        PeerSettings settings = new PeerSettings(1, 1, true, 10_000, 1L << 30, 64, 0, 0, 0).withTransferLoops(2);
        for (int round = 0; round < 200; round++) {
            String name = "close-" + round;
            TcpPeerTransport transport = new TcpPeerTransport(vertx, settings, new SimpleMeterRegistry(),
                    certs.resolve("ca.pem"), certs.resolve("manager-1.pem"), certs.resolve("manager-1.key"), name,
                    Ticker.SYSTEM);
            Context owner = vertx.getOrCreateContext();
            // one receive per loop (to a closed port: it fails fast), so both loop threads have started
            Future.<Void>future(p -> owner.runOnContext(v -> {
                List<Future<Void>> ends = new ArrayList<>();
                for (int i = 0; i < 2; i++) {
                    ends.add(transport.receive("127.0.0.1:1", i, new byte[16], List.of(), Duration.ofSeconds(5))
                            .completion().otherwiseEmpty());
                }
                Future.all(ends).<Void>mapEmpty().onComplete(p);
            })).await(10, TimeUnit.SECONDS);
            assertThat(aliveThreads("orbitkv-transfer-" + name + "-")).as("round %d: the loops run", round).hasSize(2);
            Future.<Void>future(p -> owner.runOnContext(v -> transport.close().onComplete(p))).await(10, TimeUnit.SECONDS);
            assertThat(aliveThreads("orbitkv-transfer-" + name + "-")).as("round %d: close() ended them", round).isEmpty();
        }
    }
}
