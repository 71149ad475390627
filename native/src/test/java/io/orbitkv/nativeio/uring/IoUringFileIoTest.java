package io.orbitkv.nativeio.uring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.orbitkv.nativeio.libc.Libc;
import io.orbitkv.nativeio.libc.NativeIoException;
import io.orbitkv.nativeio.libc.TmpDirFactory;
import io.orbitkv.nativeio.testing.OpenFileDescriptors;
import io.orbitkv.nativeio.testing.TrackedArenas;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * io_uring file I/O on real files under /tmp (ext4, O_DIRECT capable). Ordering is observed through the
 * {@link FileIoListener} hook, never through timing; a FIFO read is used as a request that stays in flight until
 * the test releases it by writing to the FIFO.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class IoUringFileIoTest {

    private static final int DIRECT_RW = Libc.O_RDWR | Libc.O_CREAT | Libc.O_DIRECT;
    private static final long AWAIT_SECONDS = 20;

    @TempDir(factory = TmpDirFactory.class)
    Path dir;

    private long fdsBefore;
    private final RecordingListener listener = new RecordingListener();
    private final List<IoUringFileIo> instances = new ArrayList<>();

    @BeforeAll
    static void warmUp() {
        assumeTrue(IoUringFileIo.isAvailable(), () -> "io_uring unavailable: " + IoUringFileIo.unavailabilityCause());
        // Loads netty's native library and initializes classes once, so fd counts below only see our descriptors.
        IoUringFileIo.create(new IoUringFileIoOptions()).close();
    }

    @BeforeEach
    void countDescriptors() {
        fdsBefore = OpenFileDescriptors.count();
    }

    @AfterEach
    void nothingLeaks() {
        for (IoUringFileIo io : instances) {
            io.close();
            for (IoLane lane : IoLane.values()) {
                assertThat(io.inFlight(lane)).as("in flight on %s", lane).isZero();
                assertThat(io.queued(lane)).as("queued on %s", lane).isZero();
            }
            assertThat(io.lentBufferBytes()).isZero();
        }
        assertThat(OpenFileDescriptors.count()).as("open descriptors").isEqualTo(fdsBefore);
        assertThat(TrackedArenas.liveArenas()).as("live test arenas").isZero();
    }

    private IoUringFileIo start(IoUringFileIoOptions options) {
        IoUringFileIo io = IoUringFileIo.create(options.listener(listener));
        instances.add(io);
        return io;
    }

    private static <T> T await(CompletableFuture<T> future) throws Exception {
        return future.get(AWAIT_SECONDS, TimeUnit.SECONDS);
    }

    private Path fifo(String name) throws Exception {
        Path path = dir.resolve(name);
        Process mkfifo = new ProcessBuilder("mkfifo", path.toString()).inheritIO().start();
        assertThat(mkfifo.waitFor(AWAIT_SECONDS, TimeUnit.SECONDS)).isTrue();
        assertThat(mkfifo.exitValue()).isZero();
        return path;
    }

    /** Waits until every task handed to the loop before this call has run (the loop executes tasks in order). */
    private static void drainLoopTasks(IoUringFileIo io, UringFile anyFile) throws Exception {
        await(io.size(anyFile));
    }

    private static int crc32c(MemorySegment segment) {
        CRC32C crc = new CRC32C();
        crc.update(segment.asByteBuffer());
        return (int) crc.getValue();
    }

    private static void fillPattern(MemorySegment segment, long seed) {
        for (long i = 0; i < segment.byteSize(); i += 8) {
            segment.set(ValueLayout.JAVA_LONG_UNALIGNED, i, seed * 0x9E3779B97F4A7C15L + i);
        }
    }

    @Test
    void writes64MiBWithDirectIoAtDepth16AndReadsItBack() throws Exception {
        IoUringFileIo io = start(new IoUringFileIoOptions().maxInFlight(16));
        int chunkBytes = 2 << 20;
        int chunks = 32;
        try (TrackedArenas buffers = new TrackedArenas()) {
            UringFile file = await(io.open(dir.resolve("shard-0"), DIRECT_RW, Libc.MODE_0600));
            assertThat(file.direct()).isTrue();
            await(io.fallocate(file, 0, 0, (long) chunkBytes * chunks));

            MemorySegment source = buffers.allocateAligned((long) chunkBytes * chunks);
            fillPattern(source, 42);
            List<FileIoFuture> writes = new ArrayList<>();
            for (int i = 0; i < chunks; i++) {
                writes.add(io.write(file, (long) i * chunkBytes, source.asSlice((long) i * chunkBytes, chunkBytes),
                        IoLane.WRITE));
            }
            for (FileIoFuture write : writes) {
                assertThat(await(write)).isEqualTo(chunkBytes);
            }
            await(io.datasync(file, IoLane.WRITE));

            MemorySegment target = buffers.allocateAligned((long) chunkBytes * chunks);
            List<FileIoFuture> reads = new ArrayList<>();
            for (int i = 0; i < chunks; i++) {
                reads.add(io.read(file, (long) i * chunkBytes, target.asSlice((long) i * chunkBytes, chunkBytes),
                        IoLane.RESTORE));
            }
            for (FileIoFuture read : reads) {
                assertThat(await(read)).isEqualTo(chunkBytes);
            }
            assertThat(crc32c(target)).isEqualTo(crc32c(source));
            assertThat(await(io.size(file))).isEqualTo((long) chunkBytes * chunks);
            assertThat(listener.completions).hasSize(2 * chunks + 1)
                    .allSatisfy(c -> assertThat(c.errno()).isZero());
            await(io.closeFile(file));
            assertThat(file.isClosed()).isTrue();
        }
    }

    @Test
    void queuedRestoreReadIsSubmittedBeforeQueuedWrites() throws Exception {
        IoUringFileIo io = start(new IoUringFileIoOptions().maxInFlight(1).restoreSubmissionsPerWrite(4));
        Path blockerPath = fifo("blocker");
        Path shard = dir.resolve("shard");
        try (TrackedArenas buffers = new TrackedArenas()) {
            UringFile blocker = await(io.open(blockerPath, Libc.O_RDWR, 0));
            UringFile file = await(io.open(shard, DIRECT_RW, Libc.MODE_0600));
            await(io.fallocate(file, 0, 0, 3 * 4096));
            FileIoFuture blocked = io.read(blocker, 0, buffers.allocateAligned(4096), IoLane.RESTORE);
            await(listener.submittedOn(blockerPath));

            FileIoFuture write1 = io.write(file, 0, buffers.allocateAligned(4096), IoLane.WRITE);
            FileIoFuture write2 = io.write(file, 4096, buffers.allocateAligned(4096), IoLane.WRITE);
            FileIoFuture restore = io.read(file, 8192, buffers.allocateAligned(4096), IoLane.RESTORE);
            drainLoopTasks(io, file);
            assertThat(io.queued(IoLane.WRITE)).isEqualTo(2);
            assertThat(io.queued(IoLane.RESTORE)).isEqualTo(1);
            assertThat(io.inFlight(IoLane.RESTORE)).isEqualTo(1);

            Files.write(blockerPath, new byte[4096]);
            assertThat(await(blocked)).isEqualTo(4096);
            assertThat(await(restore)).isEqualTo(4096);
            await(write1);
            await(write2);

            assertThat(listener.submissionsOn(shard)).extracting(RecordingListener.Submission::fileOffset)
                    .containsExactly(8192L, 0L, 4096L);
        }
    }

    @Test
    void writesAreSubmittedAfterAtMostNConsecutiveRestores() throws Exception {
        IoUringFileIo io = start(new IoUringFileIoOptions().maxInFlight(1).restoreSubmissionsPerWrite(2));
        Path blockerPath = fifo("blocker");
        Path shard = dir.resolve("shard");
        try (TrackedArenas buffers = new TrackedArenas()) {
            UringFile blocker = await(io.open(blockerPath, Libc.O_RDWR, 0));
            UringFile file = await(io.open(shard, DIRECT_RW, Libc.MODE_0600));
            await(io.fallocate(file, 0, 0, 16 * 4096));
            FileIoFuture blocked = io.read(blocker, 0, buffers.allocateAligned(4096), IoLane.RESTORE);
            await(listener.submittedOn(blockerPath));

            List<FileIoFuture> all = new ArrayList<>();
            all.add(io.write(file, 100 * 4096L, buffers.allocateAligned(4096), IoLane.WRITE));
            all.add(io.write(file, 101 * 4096L, buffers.allocateAligned(4096), IoLane.WRITE));
            for (int i = 0; i < 6; i++) {
                all.add(io.read(file, i * 4096L, buffers.allocateAligned(4096), IoLane.RESTORE));
            }
            drainLoopTasks(io, file);
            Files.write(blockerPath, new byte[4096]);
            await(blocked);
            for (FileIoFuture future : all) {
                await(future);
            }

            assertThat(listener.submissionsOn(shard)).extracting(s -> s.lane() + "@" + s.fileOffset() / 4096)
                    .containsExactly("RESTORE@0", "RESTORE@1", "WRITE@100", "RESTORE@2", "RESTORE@3", "WRITE@101",
                            "RESTORE@4", "RESTORE@5");
        }
    }

    @Test
    void writesProgressWhileRestoreReadsAreContinuouslyQueued() throws Exception {
        int restoresPerWrite = 3;
        IoUringFileIo io = start(new IoUringFileIoOptions().maxInFlight(2).restoreSubmissionsPerWrite(restoresPerWrite));
        Path blockerPath = fifo("blocker");
        Path shard = dir.resolve("shard");
        int writes = 24;
        try (TrackedArenas buffers = new TrackedArenas()) {
            UringFile blocker = await(io.open(blockerPath, Libc.O_RDWR, 0));
            UringFile file = await(io.open(shard, DIRECT_RW, Libc.MODE_0600));
            await(io.fallocate(file, 0, 0, 64 * 4096));
            // Both in-flight slots are held by FIFO reads until everything below is queued.
            FileIoFuture blocked1 = io.read(blocker, 0, buffers.allocateAligned(4096), IoLane.RESTORE);
            FileIoFuture blocked2 = io.read(blocker, 0, buffers.allocateAligned(4096), IoLane.RESTORE);
            drainLoopTasks(io, file);
            assertThat(io.inFlight(IoLane.RESTORE)).isEqualTo(2);

            MemorySegment restoreBuffers = buffers.allocateAligned(8 * 4096);
            MemorySegment writeBuffer = buffers.allocateAligned(writes * 4096L);
            AtomicBoolean keepRestoring = new AtomicBoolean(true);
            AtomicInteger restoresSubmitted = new AtomicInteger();
            AtomicInteger restoresOutstanding = new AtomicInteger();
            CompletableFuture<Void> restoresStopped = new CompletableFuture<>();
            // Each restore completion queues the next one (on the loop thread), so the restore lane never empties.
            class RestoreLoop {
                void submit(int slot) {
                    restoresOutstanding.incrementAndGet();
                    restoresSubmitted.incrementAndGet();
                    io.read(file, slot * 4096L, restoreBuffers.asSlice(slot * 4096L, 4096), IoLane.RESTORE)
                            .whenComplete((bytes, failure) -> {
                                if (keepRestoring.get() && failure == null) {
                                    submit(slot);
                                }
                                if (restoresOutstanding.decrementAndGet() == 0) {
                                    restoresStopped.complete(null);
                                }
                            });
                }
            }
            RestoreLoop restoreLoop = new RestoreLoop();
            List<FileIoFuture> writeFutures = new ArrayList<>();
            for (int i = 0; i < writes; i++) {
                writeFutures.add(io.write(file, (32 + i) * 4096L, writeBuffer.asSlice(i * 4096L, 4096),
                        IoLane.WRITE));
            }
            for (int slot = 0; slot < 8; slot++) {
                restoreLoop.submit(slot);
            }
            drainLoopTasks(io, file);
            Files.write(blockerPath, new byte[2 * 4096]);
            await(blocked1);
            await(blocked2);
            for (FileIoFuture write : writeFutures) {
                assertThat(await(write)).isEqualTo(4096);
            }
            keepRestoring.set(false);
            await(restoresStopped);

            List<RecordingListener.Submission> order = listener.submissionsOn(shard);
            int lastWrite = 0;
            for (int i = 0; i < order.size(); i++) {
                if (order.get(i).lane() == IoLane.WRITE) {
                    lastWrite = i;
                }
            }
            int run = 0;
            int longestRestoreRunWhileWritesWaited = 0;
            for (RecordingListener.Submission submission : order.subList(0, lastWrite + 1)) {
                run = submission.lane() == IoLane.RESTORE ? run + 1 : 0;
                longestRestoreRunWhileWritesWaited = Math.max(longestRestoreRunWhileWritesWaited, run);
            }
            assertThat(longestRestoreRunWhileWritesWaited).isEqualTo(restoresPerWrite);
            assertThat(restoresSubmitted.get()).isGreaterThanOrEqualTo(writes * restoresPerWrite);
        }
    }

    @Test
    void cancellingAQueuedRequestCompletesItAtOnceWithoutTouchingItsBuffer() throws Exception {
        IoUringFileIo io = start(new IoUringFileIoOptions().maxInFlight(1));
        Path blockerPath = fifo("blocker");
        Path shard = dir.resolve("shard");
        try (TrackedArenas buffers = new TrackedArenas()) {
            UringFile blocker = await(io.open(blockerPath, Libc.O_RDWR, 0));
            UringFile file = await(io.open(shard, DIRECT_RW, Libc.MODE_0600));
            await(io.fallocate(file, 0, 0, 4096));
            FileIoFuture blocked = io.read(blocker, 0, buffers.allocateAligned(4096), IoLane.RESTORE);
            await(listener.submittedOn(blockerPath));

            MemorySegment untouched = buffers.allocateAligned(4096);
            untouched.fill((byte) 0x7E);
            FileIoFuture queued = io.read(file, 0, untouched, IoLane.RESTORE);
            drainLoopTasks(io, file);
            assertThat(io.queued(IoLane.RESTORE)).isEqualTo(1);

            assertThat(queued.cancel(false)).isTrue();
            assertThat(queued.isCancelled()).isTrue();
            assertThat(io.queued(IoLane.RESTORE)).isZero();

            Files.write(blockerPath, new byte[4096]);
            await(blocked);
            drainLoopTasks(io, file);
            assertThat(listener.submissionsOn(shard)).isEmpty();
            for (long i = 0; i < 4096; i++) {
                assertThat(untouched.get(ValueLayout.JAVA_BYTE, i)).isEqualTo((byte) 0x7E);
            }
        }
    }

    @Test
    void cancelledSubmittedReadKeepsItsBufferUntilTheKernelCompletes() throws Exception {
        IoUringFileIo io = start(new IoUringFileIoOptions().maxInFlight(4));
        Path pipePath = fifo("pipe");
        try (TrackedArenas buffers = new TrackedArenas()) {
            UringFile pipe = await(io.open(pipePath, Libc.O_RDWR, 0));
            MemorySegment destination = buffers.allocateAligned(4096);
            AtomicBoolean kernelCompletionSeenFirst = new AtomicBoolean();
            FileIoFuture read = io.read(pipe, 0, destination, IoLane.RESTORE);
            CompletableFuture<Void> observed = read.handle((bytes, failure) -> {
                kernelCompletionSeenFirst.set(listener.completions.size() == 1);
                return null;
            });
            await(listener.submittedOn(pipePath));

            assertThat(read.cancel(true)).isFalse();
            assertThat(read.cancelRequested()).isTrue();
            assertThat(read.isDone()).isFalse();
            assertThat(io.inFlight(IoLane.RESTORE)).isEqualTo(1);
            assertThat(io.lentBufferBytes()).isEqualTo(4096);

            byte[] payload = new byte[4096];
            java.util.Arrays.fill(payload, (byte) 0x3C);
            Files.write(pipePath, payload);

            await(observed);
            assertThat(kernelCompletionSeenFirst).isTrue();
            assertThat(read.isCancelled()).isTrue();
            assertThatThrownBy(read::join).isInstanceOf(CancellationException.class);
            // The kernel wrote into the buffer after the cancel: it was right not to hand it back earlier.
            assertThat(destination.get(ValueLayout.JAVA_BYTE, 0)).isEqualTo((byte) 0x3C);
            assertThat(destination.get(ValueLayout.JAVA_BYTE, 4095)).isEqualTo((byte) 0x3C);
            assertThat(io.lentBufferBytes()).isZero();
        }
    }

    @Test
    void fullLaneRejectsImmediatelyWithATypedFailure() throws Exception {
        IoUringFileIo io = start(new IoUringFileIoOptions().maxInFlight(1).writeQueueCapacity(2));
        Path blockerPath = fifo("blocker");
        try (TrackedArenas buffers = new TrackedArenas()) {
            UringFile blocker = await(io.open(blockerPath, Libc.O_RDWR, 0));
            FileIoFuture blocked = io.read(blocker, 0, buffers.allocateAligned(4096), IoLane.WRITE);
            await(listener.submittedOn(blockerPath));

            FileIoFuture first = io.write(blocker, 0, buffers.allocateAligned(4096), IoLane.WRITE);
            FileIoFuture second = io.write(blocker, 0, buffers.allocateAligned(4096), IoLane.WRITE);
            FileIoFuture third = io.write(blocker, 0, buffers.allocateAligned(4096), IoLane.WRITE);

            assertThat(third.isCompletedExceptionally()).isTrue();
            assertThatThrownBy(third::join).hasCauseInstanceOf(FileIoRejectedException.class)
                    .cause().satisfies(e -> assertThat(((FileIoRejectedException) e).reason())
                            .isEqualTo(FileIoRejectedException.Reason.QUEUE_FULL));
            assertThat(io.rejectedQueueFull(IoLane.WRITE)).isEqualTo(1);
            assertThat(io.rejectedQueueFull(IoLane.RESTORE)).isZero();

            Files.write(blockerPath, new byte[4096]);
            assertThat(await(blocked)).isEqualTo(4096);
            assertThat(await(first)).isEqualTo(4096);
            assertThat(await(second)).isEqualTo(4096);
        }
    }

    @Test
    void closeFailsQueuedRequestsCancelsInFlightOnesAndClosesDescriptors() throws Exception {
        IoUringFileIo io = IoUringFileIo.create(new IoUringFileIoOptions().maxInFlight(1).listener(listener));
        Path pipePath = fifo("pipe");
        try (TrackedArenas buffers = new TrackedArenas()) {
            UringFile pipe = await(io.open(pipePath, Libc.O_RDWR, 0));
            UringFile file = await(io.open(dir.resolve("shard"), DIRECT_RW, Libc.MODE_0600));
            FileIoFuture inFlight = io.read(pipe, 0, buffers.allocateAligned(4096), IoLane.RESTORE);
            await(listener.submittedOn(pipePath));
            FileIoFuture queued = io.write(file, 0, buffers.allocateAligned(4096), IoLane.WRITE);

            io.close();
            io.close(); // idempotent

            assertThatThrownBy(queued::join).cause().isInstanceOfSatisfying(FileIoRejectedException.class,
                    e -> assertThat(e.reason()).isEqualTo(FileIoRejectedException.Reason.CLOSED));
            assertThat(inFlight).isDone();
            assertThatThrownBy(inFlight::join).cause().isInstanceOfSatisfying(NativeIoException.class,
                    e -> assertThat(e.errno()).isIn(NativeIoException.ECANCELED, 4 /* EINTR */));
            assertThat(pipe.isClosed()).isTrue();
            assertThat(file.isClosed()).isTrue();
            assertThat(io.lentBufferBytes()).isZero();
            FileIoFuture late = io.write(file, 0, buffers.allocateAligned(4096), IoLane.WRITE);
            assertThatThrownBy(late::join).cause().isInstanceOf(FileIoRejectedException.class);
            assertThatThrownBy(() -> await(io.open(dir.resolve("late"), DIRECT_RW, Libc.MODE_0600)))
                    .isInstanceOf(ExecutionException.class).cause().isInstanceOf(FileIoRejectedException.class);
        }
    }

    @Test
    void openInMissingDirectoryFailsWithEnoent() throws Exception {
        IoUringFileIo io = start(new IoUringFileIoOptions());
        Path missing = dir.resolve("missing").resolve("shard");
        assertThatThrownBy(() -> await(io.open(missing, DIRECT_RW, Libc.MODE_0600)))
                .isInstanceOf(ExecutionException.class).cause()
                .isInstanceOfSatisfying(NativeIoException.class, e -> {
                    assertThat(e.errno()).isEqualTo(NativeIoException.ENOENT);
                    assertThat(e.path()).isEqualTo(missing);
                    assertThat(e.operation()).isEqualTo("open");
                });
    }

    @Test
    void readPastEndOfFileCompletesShortAndMisalignedDirectIoIsRefused() throws Exception {
        IoUringFileIo io = start(new IoUringFileIoOptions());
        try (TrackedArenas buffers = new TrackedArenas()) {
            UringFile file = await(io.open(dir.resolve("shard"), DIRECT_RW, Libc.MODE_0600));
            await(io.fallocate(file, 0, 0, 8192));
            MemorySegment buffer = buffers.allocateAligned(4 * 4096);
            assertThat(await(io.read(file, 4096, buffer, IoLane.RESTORE))).isEqualTo(4096);
            assertThat(io.shortTransferResubmissions()).isEqualTo(1);

            assertThatThrownBy(() -> io.read(file, 512, buffer.asSlice(0, 4096), IoLane.RESTORE))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("aligned");
            assertThatThrownBy(() -> io.read(file, 0, buffer.asSlice(512, 4096), IoLane.RESTORE))
                    .isInstanceOf(IllegalArgumentException.class);
            assertThatThrownBy(() -> io.write(file, 0, MemorySegment.ofArray(new byte[4096]), IoLane.WRITE))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("off-heap");
        }
    }

    /** Runs a command with no pipes left open afterwards (the fd-leak check counts them). */
    private static boolean runQuietly(String... command) throws Exception {
        Process process = new ProcessBuilder(command).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.DISCARD).redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")))
                .start();
        boolean done = process.waitFor(AWAIT_SECONDS, TimeUnit.SECONDS);
        process.getInputStream().close();
        process.getOutputStream().close();
        process.getErrorStream().close();
        return done && process.exitValue() == 0;
    }

    @Test
    void fullDeviceSurfacesAsEnospc() throws Exception {
        Path mountPoint = Files.createDirectory(dir.resolve("small-tmpfs"));
        boolean mounted = runQuietly("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mountPoint.toString());
        assumeTrue(mounted, "needs root to mount a 4 MiB tmpfs");
        try {
            IoUringFileIo io = start(new IoUringFileIoOptions());
            try (TrackedArenas buffers = new TrackedArenas()) {
                // tmpfs has no O_DIRECT: open without it.
                UringFile file = await(io.open(mountPoint.resolve("full"), Libc.O_RDWR | Libc.O_CREAT,
                        Libc.MODE_0600));
                MemorySegment chunk = buffers.allocateAligned(1 << 20);
                NativeIoException failure = null;
                for (int i = 0; i < 8 && failure == null; i++) {
                    try {
                        await(io.write(file, (long) i << 20, chunk, IoLane.WRITE));
                    } catch (ExecutionException e) {
                        failure = (NativeIoException) e.getCause();
                    }
                }
                assertThat(failure).isNotNull();
                assertThat(failure.errno()).isEqualTo(NativeIoException.ENOSPC);
                assertThat(failure.path()).isEqualTo(mountPoint.resolve("full"));
                assertThat(listener.completions).anySatisfy(c -> assertThat(c.errno()).isEqualTo(28));

                assertThatThrownBy(() -> await(io.fallocate(file, 0, 0, 64L << 20)))
                        .cause().isInstanceOfSatisfying(NativeIoException.class,
                                e -> assertThat(e.errno()).isEqualTo(NativeIoException.ENOSPC));
                await(io.closeFile(file));
            }
        } finally {
            assertThat(runQuietly("umount", mountPoint.toString())).isTrue();
        }
    }

    @Test
    void reportsSubmitToCompleteTimeFromTheInjectedClock() throws Exception {
        AtomicInteger ticks = new AtomicInteger();
        IoUringFileIo io = start(new IoUringFileIoOptions().nanoClock(() -> ticks.getAndIncrement() * 1000L));
        try (TrackedArenas buffers = new TrackedArenas()) {
            UringFile file = await(io.open(dir.resolve("shard"), DIRECT_RW, Libc.MODE_0600));
            await(io.write(file, 0, buffers.allocateAligned(4096), IoLane.WRITE));
            assertThat(listener.completions).singleElement()
                    .satisfies(c -> {
                        assertThat(c.submitToCompleteNanos()).isEqualTo(1000L);
                        assertThat(c.transferredBytes()).isEqualTo(4096);
                        assertThat(c.operation()).isEqualTo(FileIoOperation.WRITE);
                    });
        }
    }

    @Test
    void checksumOfDataWrittenThroughIoUringMatchesAPlainRead() throws Exception {
        IoUringFileIo io = start(new IoUringFileIoOptions());
        Path path = dir.resolve("shard");
        try (TrackedArenas buffers = new TrackedArenas()) {
            UringFile file = await(io.open(path, DIRECT_RW, Libc.MODE_0600));
            MemorySegment source = buffers.allocateAligned(1 << 20);
            fillPattern(source, 7);
            await(io.write(file, 0, source, IoLane.WRITE));
            await(io.closeFile(file));
            CRC32C plain = new CRC32C();
            plain.update(Files.readAllBytes(path));
            assertThat((int) plain.getValue()).isEqualTo(crc32c(source));
        }
    }
}
