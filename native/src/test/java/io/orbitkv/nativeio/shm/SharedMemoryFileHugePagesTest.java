package io.orbitkv.nativeio.shm;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The real thing: a pool file on a tmpfs mounted {@code huge=within_size} (this test mounts one; skipped where it
 * cannot) is backed by 2 MiB pages once written — {@code /proc/self/smaps} counts them as ShmemPmdMapped — and
 * {@link PoolPages} says HUGE; the same on /dev/shm shows none and says NONE (unless shmem_enabled forces huge pages).
 */
class SharedMemoryFileHugePagesTest {
    private static final long SIZE = 64L << 20;
    private static HugeTmpfs tmpfs;
    private static HugeTmpfs advise;

    @BeforeAll
    static void mount() throws Exception {
        tmpfs = HugeTmpfs.mount("256m");
        advise = HugeTmpfs.mount("advise", "128m");
    }

    @AfterAll
    static void unmount() throws Exception {
        try {
            if (tmpfs != null) {
                tmpfs.close();
            }
        } finally {
            if (advise != null) {
                advise.close();
            }
        }
    }

    private static void writeFirst4MiB(MemorySegment segment) {
        for (long o = 0; o < (4L << 20); o += 4096) {
            segment.set(ValueLayout.JAVA_INT, o, (int) o);
        }
    }

    @Test
    void aPoolOnTheHugeMountIsBackedByHugePagesAndTheDetectorSaysSo() throws Exception {
        assertThat(PoolPages.of(tmpfs.dir).kind()).isEqualTo(PoolPages.Kind.HUGE);
        Path path = tmpfs.dir.resolve("orbitkv-pool-" + UUID.randomUUID());
        try (SharedMemoryFile pool = SharedMemoryFile.create(path, SIZE)) {
            writeFirst4MiB(pool.segment());
            long pmd = Math.max(HugeTmpfs.smapsKb(path, "ShmemPmdMapped"), HugeTmpfs.smapsKb(path, "FilePmdMapped"));
            assertThat(pmd).as("kB of %s mapped by 2 MiB pages", path).isGreaterThanOrEqualTo(4096);
            assertThat(pool.segment().get(ValueLayout.JAVA_INT, 8192)).isEqualTo(8192);
        }
        assertThat(Files.exists(path)).isFalse();
    }

    @Test
    void onAnAdviseMountTheMadvisedPoolGetsHugePages() throws Exception {
        assertThat(PoolPages.of(advise.dir).kind()).isEqualTo(PoolPages.Kind.ADVISE);
        Path path = advise.dir.resolve("orbitkv-pool-" + UUID.randomUUID());
        try (SharedMemoryFile pool = SharedMemoryFile.create(path, SIZE)) {
            writeFirst4MiB(pool.segment());
            assertThat(HugeTmpfs.smapsKb(path, "ShmemPmdMapped")).as("kB of %s mapped by 2 MiB pages", path)
                    .isGreaterThanOrEqualTo(4096);
            // A second mapping (an engine's) of the same file maps the same 2 MiB pages.
            try (SharedMemoryFile engine = SharedMemoryFile.map(path, SIZE)) {
                assertThat(engine.segment().get(ValueLayout.JAVA_INT, 4096)).isEqualTo(4096);
            }
        }
        assertThat(Files.exists(path)).isFalse();
    }

    @Test
    void aPoolLargerThanTheHugeMountFailsClearlyAndLeavesNothing() throws Exception {
        // On huge=advise the pages are faulted in through the mapping first: a full tmpfs there must not be a SIGBUS.
        for (HugeTmpfs mount : new HugeTmpfs[] {tmpfs, advise}) {
            Path path = mount.dir.resolve("orbitkv-pool-" + UUID.randomUUID());
            assertThatThrownBy(() -> SharedMemoryFile.create(path, 512L << 20))
                    .isInstanceOf(java.io.IOException.class).hasMessageContaining("No space left on device");
            try (var files = Files.list(mount.dir)) {
                assertThat(files.toList()).as("nothing left in %s", mount.dir).isEmpty();
            }
            // The room is back: a pool that fits is created there at once.
            try (SharedMemoryFile pool = SharedMemoryFile.create(path, SIZE)) {
                assertThat(pool.sizeBytes()).isEqualTo(SIZE);
            }
        }
    }

    @Test
    void aPoolOnDevShmHasNoHugePagesAndTheDetectorSaysNone() throws Exception {
        String override = PoolPages.bracketed(Files.readString(PoolPages.SHMEM_ENABLED));
        PoolPages.Answer answer = PoolPages.of(Path.of("/dev/shm"));
        org.junit.jupiter.api.Assumptions.assumeTrue(!override.equals("force") && answer.huge().equals("never"),
                "/dev/shm is huge here: " + answer.describe());
        assertThat(answer.kind()).isEqualTo(PoolPages.Kind.NONE);
        Path path = Path.of("/dev/shm", "orbitkv-test-" + UUID.randomUUID());
        try (SharedMemoryFile pool = SharedMemoryFile.create(path, SIZE)) {
            writeFirst4MiB(pool.segment());
            assertThat(HugeTmpfs.smapsKb(path, "Rss")).as("the entry is found").isGreaterThanOrEqualTo(4096);
            assertThat(HugeTmpfs.smapsKb(path, "ShmemPmdMapped")).isZero();
        }
    }
}
