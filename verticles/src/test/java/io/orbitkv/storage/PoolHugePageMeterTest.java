package io.orbitkv.storage;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import io.orbitkv.it.HugeTmpfs;
import io.orbitkv.nativeio.shm.PoolPages;
import io.orbitkv.nativeio.shm.SharedMemoryFile;
import io.orbitkv.nativeio.shm.Smaps;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

/**
 * {@link PoolHugePageMeter} on real tmpfs mounts (mounted here; skipped where that is impossible) and the real
 * {@code /proc/self/smaps}: touched pages of a pool on a huge mount are measured as mapped with 2 MiB pages, on a 4 KiB
 * tmpfs as none; only the pool file's own mappings count; a pool whose mount promises huge pages but whose pages came
 * as 4 KiB ones gets one WARN; re-reads are bounded by the interval however often the figure is asked for.
 */
class PoolHugePageMeterTest {
    private static final long POOL = 32L << 20;
    private static final long TOUCHED = 16L << 20;

    /** Writes one int per 4 KiB of the first {@code bytes}: every page of that range is touched by this mapping. */
    private static void touch(MemorySegment segment, long bytes) {
        for (long o = 0; o < bytes; o += 4096) {
            segment.set(ValueLayout.JAVA_INT, o, (int) o);
        }
    }

    /** Reads one int per 4 KiB of the first {@code bytes} (maps the pages without writing). */
    private static long read(MemorySegment segment, long bytes) {
        long sum = 0;
        for (long o = 0; o < bytes; o += 4096) {
            sum += segment.get(ValueLayout.JAVA_INT, o);
        }
        return sum;
    }

    private static PoolHugePageMeter meter(Path pool, PoolPages.Answer promise) throws Exception {
        return new PoolHugePageMeter(pool.toRealPath(), promise, System::nanoTime, PoolHugePageMeter.MIN_INTERVAL_NANOS);
    }

    @Test
    void onAHugeMountTheTouchedPagesAreMeasuredAsMappedWithTwoMibPagesAndOnlyThePoolFileCounts() throws Exception {
        try (HugeTmpfs tmpfs = HugeTmpfs.mount("128m")) {
            PoolPages.Answer promise = PoolPages.of(tmpfs.dir);
            assertThat(promise.kind()).isEqualTo(PoolPages.Kind.HUGE);
            Path path = tmpfs.dir.resolve("orbitkv-pool-meter");
            Path other = tmpfs.dir.resolve("orbitkv-pool-other");
            try (SharedMemoryFile pool = SharedMemoryFile.create(path, POOL, promise.kind());
                 SharedMemoryFile neighbour = SharedMemoryFile.create(other, POOL, promise.kind())) {
                PoolHugePageMeter meter = meter(path, promise);
                assertThat(meter.sample()).as("fallocate reserved the pool but mapped none of it")
                        .isEqualTo(Smaps.Mapped.NONE);
                touch(neighbour.segment(), POOL); // another pool file in the same directory: not this pool's figure
                touch(pool.segment(), TOUCHED);
                Smaps.Mapped mapped = meter.sample();
                assertThat(mapped.residentBytes()).as("touched").isGreaterThanOrEqualTo(TOUCHED).isLessThan(POOL);
                assertThat(mapped.hugeMappedBytes()).as("on 2 MiB pages").isGreaterThanOrEqualTo(TOUCHED)
                        .isLessThanOrEqualTo(mapped.residentBytes());
                assertThat(meter.warned()).isFalse();
            }
        }
    }

    @Test
    void onAFourKibTmpfsTheTouchedPagesAreMeasuredWithNoneOnTwoMibPages() throws Exception {
        try (HugeTmpfs tmpfs = HugeTmpfs.mount("never", "64m")) {
            PoolPages.Answer promise = PoolPages.of(tmpfs.dir);
            Assumptions.assumeTrue(promise.kind() == PoolPages.Kind.NONE, "shmem_enabled forces huge pages here");
            Path path = tmpfs.dir.resolve("orbitkv-pool-meter");
            try (SharedMemoryFile pool = SharedMemoryFile.create(path, POOL, promise.kind())) {
                PoolHugePageMeter meter = meter(path, promise);
                touch(pool.segment(), TOUCHED);
                Smaps.Mapped mapped = meter.sample();
                assertThat(mapped.residentBytes()).as("touched").isGreaterThanOrEqualTo(TOUCHED);
                assertThat(mapped.hugeMappedBytes()).as("on 2 MiB pages").isZero();
                assertThat(meter.warned()).as("4 KiB pages were all the mount promised").isFalse();
            }
        }
    }

    /**
     * A real fallback: on a {@code huge=advise} mount the pool's pages were allocated without the advised mapping (as
     * on a kernel without MADV_POPULATE_WRITE, where the reservation is fallocate alone), so they are 4 KiB pages
     * although the mount promises huge ones; the advised mapping that touches them later maps them 4 KiB by 4 KiB.
     */
    @Test
    void aPoolWhoseMountPromisesHugePagesButGotFourKibPagesWarnsOnce() throws Exception {
        try (HugeTmpfs tmpfs = HugeTmpfs.mount("advise", "64m")) {
            PoolPages.Answer promise = PoolPages.of(tmpfs.dir);
            assertThat(promise.kind()).isEqualTo(PoolPages.Kind.ADVISE);
            Path path = tmpfs.dir.resolve("orbitkv-pool-meter");
            try (FileChannel channel = FileChannel.open(path, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                ByteBuffer zeros = ByteBuffer.allocate(1 << 20);
                for (long o = 0; o < POOL; o += zeros.capacity()) {
                    channel.write(zeros.clear(), o);
                }
            }
            Logger log = (Logger) LoggerFactory.getLogger(PoolHugePageMeter.class);
            ListAppender<ILoggingEvent> seen = new ListAppender<>();
            seen.start();
            log.addAppender(seen);
            try (SharedMemoryFile pool = SharedMemoryFile.map(path, POOL)) {
                PoolHugePageMeter meter = meter(path, promise);
                assertThat(read(pool.segment(), TOUCHED)).isZero();
                Smaps.Mapped mapped = meter.sample();
                assertThat(mapped.residentBytes()).isGreaterThanOrEqualTo(TOUCHED);
                assertThat(mapped.hugeMappedBytes()).isZero();
                meter.sample();
                assertThat(meter.warned()).isTrue();
                assertThat(seen.list).as("one WARN line, not one per sample").hasSize(1);
                assertThat(seen.list.getFirst().getLevel().toString()).isEqualTo("WARN");
                assertThat(seen.list.getFirst().getFormattedMessage())
                        .contains("promises huge pages", "huge=advise", "16 MiB", "only 0 MiB", path.toRealPath().toString());
            } finally {
                log.detachAppender(seen);
                Files.deleteIfExists(path);
            }
        }
    }

    @Test
    void reReadsAreBoundedByTheIntervalHoweverOftenTheFigureIsAskedFor() throws Exception {
        Path dir = Path.of("/dev/shm");
        Path path = dir.resolve("orbitkv-meter-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        AtomicLong now = new AtomicLong(1_000);
        AtomicLong handedOff = new AtomicLong();
        long interval = TimeUnit.SECONDS.toNanos(5);
        try (SharedMemoryFile pool = SharedMemoryFile.create(path, 8L << 20)) {
            PoolHugePageMeter meter = new PoolHugePageMeter(path.toRealPath(), PoolPages.of(dir), now::get, interval);
            java.util.concurrent.Executor worker = read -> {
                handedOff.incrementAndGet();
                read.run();
            };
            touch(pool.segment(), 4L << 20);
            for (int i = 0; i < 100; i++) {
                meter.latest(worker);
            }
            assertThat(meter.samples()).as("the first ask reads, the next 99 get its answer").isEqualTo(1);
            assertThat(meter.latest(worker).residentBytes()).isGreaterThanOrEqualTo(4L << 20);
            now.addAndGet(interval - 1);
            meter.latest(worker);
            assertThat(meter.samples()).isEqualTo(1);
            now.addAndGet(1);
            for (int i = 0; i < 100; i++) {
                meter.latest(worker);
            }
            assertThat(meter.samples()).as("one more per interval").isEqualTo(2);
            assertThat(handedOff.get()).isEqualTo(2);
            meter.close();
            now.addAndGet(10 * interval);
            meter.latest(worker);
            assertThat(meter.samples()).as("none after close").isEqualTo(2);
        } finally {
            Files.deleteIfExists(path);
        }
    }

    @Test
    void itWarnsOnlyWhenTheMountPromisesHugePagesAndFewerThanHalfOfEnoughTouchedBytesAreOnThem() {
        long enough = PoolHugePageMeter.WARN_MIN_TOUCHED_BYTES;
        for (PoolPages.Kind promising : new PoolPages.Kind[] {PoolPages.Kind.HUGE, PoolPages.Kind.ADVISE}) {
            assertThat(PoolHugePageMeter.fellBack(promising, new Smaps.Mapped(enough, 0))).isTrue();
            assertThat(PoolHugePageMeter.fellBack(promising, new Smaps.Mapped(enough, enough / 2 - 4096))).isTrue();
            assertThat(PoolHugePageMeter.fellBack(promising, new Smaps.Mapped(enough, enough / 2))).isFalse();
            assertThat(PoolHugePageMeter.fellBack(promising, new Smaps.Mapped(enough - 4096, 0)))
                    .as("too little touched to tell").isFalse();
        }
        assertThat(PoolHugePageMeter.fellBack(PoolPages.Kind.NONE, new Smaps.Mapped(1L << 30, 0))).isFalse();
    }
}
