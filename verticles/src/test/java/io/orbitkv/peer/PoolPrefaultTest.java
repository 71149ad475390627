package io.orbitkv.peer;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.nativeio.shm.SharedMemoryFile;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** {@link PoolPrefault}: every page of the range becomes resident in the mapping, and no byte changes. */
class PoolPrefaultTest {
    static final long BYTES = 16L << 20;

    /** Resident kB of this process's mapping(s) of {@code file}, from /proc/self/smaps. */
    static long residentKb(Path file) throws IOException {
        long kb = 0;
        boolean inside = false;
        for (String line : Files.readAllLines(Path.of("/proc/self/smaps"))) {
            if (line.matches("^[0-9a-f]+-[0-9a-f]+ .*")) { // a mapping's header line
                inside = line.endsWith(file.toString());
            } else if (inside && line.startsWith("Rss:")) {
                kb += Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        }
        return kb;
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
}
