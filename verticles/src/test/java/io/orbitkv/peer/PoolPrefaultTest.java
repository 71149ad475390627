package io.orbitkv.peer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.orbitkv.it.HugeTmpfs;
import io.orbitkv.nativeio.shm.PoolPages;
import io.orbitkv.nativeio.shm.SharedMemoryFile;
import io.orbitkv.nativeio.shm.Smaps;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * {@link PoolPrefault}: every page of the range becomes resident in the mapping, and no byte changes; on a real
 * huge-page tmpfs (mounted by the test, skipped where it cannot) one write per 2 MiB maps the whole range.
 */
class PoolPrefaultTest {
    static final long BYTES = 16L << 20;

    /** Resident kB of this process's mapping(s) of {@code file}, from /proc/self/smaps. */
    static long residentKb(Path file) throws IOException {
        return Math.max(0, Smaps.kb(file, "Rss"));
    }

    @Test
    void theRangeBecomesResidentAndNoByteChanges() throws Exception {
        Path path = Path.of("/dev/shm", "orbitkv-prefault-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        try (SharedMemoryFile created = SharedMemoryFile.create(path, 2 * BYTES)) {
            // fill through one mapping, prefault another (the peer role maps the pool on its own)
            MemorySegment writer = created.segment();
            SplittableRandom random = new SplittableRandom(3);
            for (long o = 0; o < writer.byteSize(); o += 8) {
                writer.set(ValueLayout.JAVA_LONG_UNALIGNED, o, random.nextLong());
            }
            byte[] before = writer.toArray(ValueLayout.JAVA_BYTE);
            try (SharedMemoryFile mapped = SharedMemoryFile.map(path, 2 * BYTES)) {
                long residentBefore = residentKb(path);
                assertThat(PoolPrefault.prefault(mapped.segment(), BYTES + 100, () -> false)).isEqualTo(BYTES);
                long gained = residentKb(path) - residentBefore;
                assertThat(gained * 1024).as("the prefaulted range is mapped").isGreaterThanOrEqualTo(BYTES);
                assertThat(mapped.segment().asSlice(0, 2 * BYTES).toArray(ValueLayout.JAVA_BYTE)).isEqualTo(before);
                // a stop request ends it at the next step
                assertThat(PoolPrefault.prefault(mapped.segment(), BYTES, () -> true)).isZero();
            }
        } finally {
            Files.deleteIfExists(path);
        }
    }

    @Test
    void onHugePagesOneWritePer2MiBMapsTheWholeRangeWithoutChangingAByte() throws Exception {
        try (HugeTmpfs tmpfs = HugeTmpfs.mount("128m")) {
            Path path = tmpfs.dir.resolve("orbitkv-pool-prefault");
            try (SharedMemoryFile created = SharedMemoryFile.create(path, 2 * BYTES)) {
                // Values in the first 4 KiB of each 2 MiB page (the ints the prefault adds zero to), through the
                // creator's mapping; they are only 8 of 16 MiB, so before the prefault the peer's mapping maps nothing.
                for (long o = 0; o < 2 * BYTES; o += PoolPrefault.STEP) {
                    created.segment().set(ValueLayout.JAVA_LONG, o, o + 7);
                }
                assertThat(PoolPrefault.pageBytes(PoolPages.of(path.getParent()))).as("what PeerVerticle prefaults with").isEqualTo(2L << 20);
                try (SharedMemoryFile mapped = SharedMemoryFile.map(path, 2 * BYTES)) {
                    long pmdBefore = HugeTmpfs.smapsKb(path, "ShmemPmdMapped");
                    assertThat(PoolPrefault.prefault(mapped.segment(), BYTES + 100, PoolPages.HUGE_PAGE_BYTES,
                            () -> false)).isEqualTo(BYTES);
                    long gained = HugeTmpfs.smapsKb(path, "ShmemPmdMapped") - pmdBefore;
                    assertThat(gained * 1024).as("8 writes mapped 16 MiB as 2 MiB pages").isEqualTo(BYTES);
                    for (long o = 0; o < 2 * BYTES; o += PoolPrefault.STEP) {
                        assertThat(mapped.segment().get(ValueLayout.JAVA_LONG, o)).isEqualTo(o + 7);
                    }
                }
            }
            assertThat(Files.exists(path)).isFalse();
        }
    }

    @Test
    void onFourKibPagesOneWritePer2MiBLeavesTheRestUnmappedSoThePageSizeMatters() throws Exception {
        Path path = Path.of("/dev/shm", "orbitkv-prefault-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        org.junit.jupiter.api.Assumptions.assumeFalse(PoolPages.of(path.getParent()).hugePages(), "/dev/shm is huge");
        try (SharedMemoryFile created = SharedMemoryFile.create(path, BYTES);
             SharedMemoryFile mapped = SharedMemoryFile.map(path, BYTES)) {
            assertThat(PoolPrefault.pageBytes(PoolPages.of(path.getParent()))).as("what PeerVerticle prefaults with").isEqualTo(4096);
            long before = residentKb(path);
            PoolPrefault.prefault(mapped.segment(), BYTES, PoolPages.HUGE_PAGE_BYTES, () -> false);
            assertThat((residentKb(path) - before) * 1024).as("8 writes, 8 pages of 4 KiB").isLessThan(BYTES / 4);
        } finally {
            Files.deleteIfExists(path);
        }
    }

    @Test
    void aPageSizeThatIsNotAPowerOfTwoOfAtLeast4KibIsRefused() throws Exception {
        MemorySegment none = MemorySegment.ofArray(new int[1024]);
        for (long bad : new long[] {0, 1024, 6144, -4096}) {
            assertThatThrownBy(() -> PoolPrefault.prefault(none, 4096, bad, () -> false))
                    .isInstanceOf(IllegalArgumentException.class);
        }
    }
}
