package io.orbitkv.nativeio.mooncake;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Two real engines in this process move bytes over TE's TCP transport on loopback between registered off-heap
 * buffers. Every engine call runs on one named owner thread, so the threads TE starts (which inherit that name) can be
 * counted, and must be gone after {@link MooncakeTransferEngine#close()}.
 */
class MooncakeTransferEngineTest {
    private static final String OWNER = "mc-te-owner";
    private static final long SEED = System.nanoTime();
    private static ExecutorService owner;

    @BeforeAll
    static void ownerThread() {
        assumeTrue(MooncakeTransferEngine.isAvailable(),
                () -> "Transfer Engine not built here: " + MooncakeTransferEngine.unavailabilityCause());
        owner = Executors.newSingleThreadExecutor(r -> new Thread(r, OWNER));
    }

    @AfterAll
    static void stopOwner() throws InterruptedException {
        if (owner != null) {
            owner.shutdownNow();
            assertThat(owner.awaitTermination(10, TimeUnit.SECONDS)).isTrue();
        }
    }

    @AfterEach
    void nothingLeaks() throws Exception {
        assertThat(MooncakeTransferEngine.liveResources()).as("live TE resources")
                .isEqualTo(new MooncakeTransferEngine.LiveResources(0, 0, 0));
        // TE's threads were started from the owner thread and carry its name; all must have been joined.
        await().atMost(Duration.ofSeconds(10)).untilAsserted(() ->
                assertThat(onOwner(MooncakeTransferEngineTest::threadsNamedLikeOwner)).as("TE threads").isEqualTo(1));
    }

    @Test
    void twoEnginesReadAndWriteRegisteredMemoryOverTcpByteForByte() throws Exception {
        int chunk = 2 << 20;
        int chunks = 4;
        try (Arena arena = Arena.ofShared()) {
            MemorySegment sourcePool = arena.allocate((long) chunk * chunks, 4096);
            MemorySegment requesterPool = arena.allocate((long) chunk * chunks, 4096);
            fill(sourcePool, SEED);
            onOwner(() -> {
                try (MooncakeTransferEngine source = MooncakeTransferEngine.startTcp("127.0.0.1");
                     MooncakeTransferEngine requester = MooncakeTransferEngine.startTcp("127.0.0.1")) {
                    assertThat(threadsNamedLikeOwner()).as("TE threads for two engines (plus the owner)")
                            .isGreaterThanOrEqualTo(1 + 2 * 2);
                    assertThat(source.segmentName()).startsWith("127.0.0.1:");
                    MemoryRegistration exposed = source.register(sourcePool);
                    MemoryRegistration slots = requester.register(requesterPool);
                    RemoteSegment remote = requester.openSegment(source.segmentName());

                    // Reads: chunk i of the source lands in chunk (chunks-1-i) of the requester.
                    List<TransferRequest> reads = new ArrayList<>();
                    for (int i = 0; i < chunks; i++) {
                        reads.add(TransferRequest.read(requesterPool.asSlice((long) (chunks - 1 - i) * chunk, chunk),
                                remote, exposed.address() + (long) i * chunk));
                    }
                    try (TransferBatch batch = requester.allocateBatch(chunks)) {
                        batch.submit(reads);
                        awaitTerminal(batch);
                        for (int i = 0; i < chunks; i++) {
                            TransferStatus status = batch.status(i);
                            assertThat(status.state()).as("read %d", i).isEqualTo(TransferState.COMPLETED);
                            assertThat(status.transferredBytes()).isEqualTo(chunk);
                        }
                    }
                    for (int i = 0; i < chunks; i++) {
                        assertSameBytes(sourcePool.asSlice((long) i * chunk, chunk),
                                requesterPool.asSlice((long) (chunks - 1 - i) * chunk, chunk), "read chunk " + i);
                    }

                    // Writes: a new pattern from the requester overwrites the source's second half, in two submits.
                    fill(requesterPool, SEED + 1);
                    try (TransferBatch batch = requester.allocateBatch(2)) {
                        batch.submit(TransferRequest.write(requesterPool.asSlice(0, chunk), remote,
                                exposed.address() + 2L * chunk));
                        batch.submit(TransferRequest.write(requesterPool.asSlice(chunk, chunk), remote,
                                exposed.address() + 3L * chunk));
                        assertThat(batch.submitted()).isEqualTo(2);
                        awaitTerminal(batch);
                        assertThat(batch.states()).containsOnly(TransferState.COMPLETED);
                    }
                    assertSameBytes(requesterPool.asSlice(0, 2L * chunk), sourcePool.asSlice(2L * chunk, 2L * chunk),
                            "written half");
                    assertThat(MooncakeTransferEngine.liveResources().registrations()).isEqualTo(2);
                    slots.close();
                    exposed.close();
                    exposed.close(); // idempotent
                }
                return null;
            });
        }
    }

    @Test
    void anEngineThatDiscoversItsTransportFallsBackToTcpWithoutAVerbsDeviceAndMovesBytes() throws Exception {
        assumeTrue(!Files.isDirectory(Path.of("/sys/class/infiniband")),
                "this host has verbs devices: TE would choose RDMA (perf/rdma/te-rdma.sh runs that path)");
        try (Arena arena = Arena.ofShared()) {
            MemorySegment exposed = arena.allocate(1 << 16, 4096);
            MemorySegment slot = arena.allocate(1 << 16, 4096);
            fill(exposed, SEED);
            onOwner(() -> {
                try (MooncakeTransferEngine source = MooncakeTransferEngine.startDiscovered("127.0.0.1");
                     MooncakeTransferEngine requester = MooncakeTransferEngine.startTcp("127.0.0.1")) {
                    source.register(exposed);
                    requester.register(slot);
                    RemoteSegment remote = requester.openSegment(source.segmentName());
                    try (TransferBatch batch = requester.allocateBatch(1)) {
                        batch.submit(TransferRequest.read(slot, remote, exposed.address()));
                        awaitTerminal(batch);
                        assertThat(batch.status(0).state()).isEqualTo(TransferState.COMPLETED);
                    }
                    assertSameBytes(exposed, slot, "read from a discovering engine");
                }
                return null;
            });
        }
    }

    @Test
    void aReadOutsideThePeersRegistrationsFailsTypedAndTheBatchStillFrees() throws Exception {
        try (Arena arena = Arena.ofShared()) {
            MemorySegment exposedMemory = arena.allocate(1 << 20, 4096);
            MemorySegment notExposed = arena.allocate(1 << 20, 4096);
            MemorySegment slot = arena.allocate(1 << 16, 4096);
            notExposed.fill((byte) 0x5a);
            onOwner(() -> {
                try (MooncakeTransferEngine source = MooncakeTransferEngine.startTcp("127.0.0.1");
                     MooncakeTransferEngine requester = MooncakeTransferEngine.startTcp("127.0.0.1")) {
                    source.register(exposedMemory);
                    requester.register(slot);
                    RemoteSegment remote = requester.openSegment(source.segmentName());
                    try (TransferBatch batch = requester.allocateBatch(1)) {
                        batch.submit(TransferRequest.read(slot, remote, notExposed.address()));
                        awaitTerminal(batch);
                        assertThat(batch.status(0).state()).isEqualTo(TransferState.FAILED);
                    }
                    assertThat(slot.toArray(ValueLayout.JAVA_BYTE)).as("no byte of unregistered memory served")
                            .containsOnly((byte) 0);
                }
                return null;
            });
        }
    }

    @Test
    void badArgumentsAreRefusedBeforeTheEngineSeesThemAndChangeNothing() throws Exception {
        try (Arena arena = Arena.ofShared()) {
            MemorySegment registered = arena.allocate(1 << 20, 4096);
            MemorySegment unregistered = arena.allocate(4096, 4096);
            onOwner(() -> {
                assertThatThrownBy(() -> MooncakeTransferEngine.startTcp("localhost"))
                        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("IP literal");
                try (MooncakeTransferEngine a = MooncakeTransferEngine.startTcp("127.0.0.1");
                     MooncakeTransferEngine b = MooncakeTransferEngine.startTcp("127.0.0.1")) {
                    MemoryRegistration registration = a.register(registered);
                    assertThatThrownBy(() -> a.register(registered.asSlice(4096, 4096)))
                            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("overlaps");
                    assertThatThrownBy(() -> a.register(MemorySegment.ofArray(new byte[4096])))
                            .isInstanceOf(IllegalArgumentException.class);
                    assertThatThrownBy(() -> a.openSegment("no-port")).isInstanceOf(IllegalArgumentException.class);
                    assertThatThrownBy(() -> a.openSegment("127.0.0.1:99999")).isInstanceOf(IllegalArgumentException.class);
                    assertThatThrownBy(() -> a.openSegment("127.0.0.1:1\0")).isInstanceOf(IllegalArgumentException.class);
                    assertThatThrownBy(() -> a.allocateBatch(0)).isInstanceOf(IllegalArgumentException.class);
                    assertThatThrownBy(() -> a.allocateBatch(MooncakeTransferEngine.MAX_BATCH_CAPACITY + 1))
                            .isInstanceOf(IllegalArgumentException.class);

                    RemoteSegment fromA = a.openSegment(b.segmentName());
                    assertThat(a.openSegment(b.segmentName())).isSameAs(fromA);
                    RemoteSegment fromB = b.openSegment(a.segmentName());
                    try (TransferBatch batch = a.allocateBatch(1)) {
                        long remote = registration.address();
                        assertThatThrownBy(() -> batch.submit(TransferRequest.read(unregistered, fromA, remote)))
                                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("registration");
                        assertThatThrownBy(() -> batch.submit(TransferRequest.read(
                                MemorySegment.ofArray(new byte[16]), fromA, remote)))
                                .isInstanceOf(IllegalArgumentException.class);
                        assertThatThrownBy(() -> batch.submit(TransferRequest.read(registered.asSlice(0, 64), fromB,
                                remote))).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("not opened");
                        assertThatThrownBy(() -> batch.submit(TransferRequest.read(registered.asSlice(0, 64), fromA,
                                -16))).isInstanceOf(IllegalArgumentException.class);
                        assertThatThrownBy(() -> batch.submit(List.of(
                                TransferRequest.read(registered.asSlice(0, 64), fromA, remote),
                                TransferRequest.read(registered.asSlice(64, 64), fromA, remote))))
                                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("capacity");
                        assertThatThrownBy(() -> batch.status(0)).isInstanceOf(IllegalArgumentException.class);
                        assertThat(batch.submitted()).isZero();

                        assertThatThrownBy(a::close).isInstanceOf(IllegalStateException.class)
                                .hasMessageContaining("batch");
                        assertThat(a.allocateBatch(1)).isNotNull().satisfies(TransferBatch::free); // a still open
                    }
                    registration.close();
                }
                return null;
            });
        }
    }

    @Test
    void aPeerThatIsNotThereIsATypedErrorNotACrash() throws Exception {
        int port;
        try (ServerSocket probe = new ServerSocket(0)) {
            port = probe.getLocalPort(); // closed again: nobody listens there now
        }
        onOwner(() -> {
            try (MooncakeTransferEngine engine = MooncakeTransferEngine.startTcp("127.0.0.1")) {
                assertThatThrownBy(() -> engine.openSegment("127.0.0.1:" + port)).isInstanceOf(MooncakeException.class)
                        .satisfies(e -> assertThat(((MooncakeException) e).operation()).isEqualTo("openSegment"));
            }
            return null;
        });
    }

    @Test
    void aClosedEngineRefusesEveryCall() throws Exception {
        onOwner(() -> {
            MooncakeTransferEngine engine = MooncakeTransferEngine.startTcp("127.0.0.1");
            String name = engine.segmentName();
            engine.close();
            engine.close();
            assertThatThrownBy(() -> engine.allocateBatch(1)).isInstanceOf(IllegalStateException.class);
            assertThatThrownBy(() -> engine.openSegment(name)).isInstanceOf(IllegalStateException.class);
            try (Arena arena = Arena.ofConfined()) {
                assertThatThrownBy(() -> engine.register(arena.allocate(4096, 4096)))
                        .isInstanceOf(IllegalStateException.class);
            }
            return null;
        });
    }

    // ---- helpers ----

    private static void awaitTerminal(TransferBatch batch) {
        await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(1)).until(batch::pollAll);
    }

    private static <T> T onOwner(Callable<T> body) throws Exception {
        try {
            return owner.submit(body).get(120, TimeUnit.SECONDS);
        } catch (java.util.concurrent.ExecutionException e) {
            if (e.getCause() instanceof Exception cause) {
                throw cause;
            }
            throw (Error) e.getCause();
        }
    }

    /** Threads of this process whose kernel name is the owner's: the owner itself plus what TE started from it. */
    private static int threadsNamedLikeOwner() {
        try (Stream<Path> tasks = Files.list(Path.of("/proc/self/task"))) {
            return (int) tasks.filter(task -> {
                try {
                    return Files.readString(task.resolve("comm")).strip().equals(OWNER);
                } catch (IOException gone) {
                    return false; // the thread ended while we looked
                }
            }).count();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static void fill(MemorySegment segment, long seed) {
        Random random = new Random(seed);
        byte[] bytes = new byte[(int) segment.byteSize()];
        random.nextBytes(bytes);
        MemorySegment.copy(bytes, 0, segment, ValueLayout.JAVA_BYTE, 0, bytes.length);
    }

    private static void assertSameBytes(MemorySegment expected, MemorySegment actual, String what) {
        long mismatch = expected.mismatch(actual);
        assertThat(mismatch).as("%s: first differing byte (seed %d)", what, SEED).isEqualTo(-1L);
    }
}
