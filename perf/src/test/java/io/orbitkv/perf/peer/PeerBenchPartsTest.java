package io.orbitkv.perf.peer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.orbitkv.nativeio.shm.SharedMemoryFile;
import io.orbitkv.nativeio.shm.Smaps;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The parts of {@code bench peer} that decide what its figures mean: the baseline's parse and the huge-page proof. */
class PeerBenchPartsTest {

    @Test
    void iperf3sJsonGivesBytesPerSecondAndAnErrorOrTruncatedRunGivesNone() {
        assertThat(PeerBench.receivedBytesPerSecond(
                "{\"end\":{\"sum_received\":{\"bits_per_second\":16000000000.0}}}")).isEqualTo(2e9);
        // iperf3 -J reports a refused or failed run as JSON with an error and no sum: never a figure
        assertThat(PeerBench.receivedBytesPerSecond("{\"start\":{},\"end\":{},\"error\":\"unable to connect\"}")).isNull();
        assertThat(PeerBench.receivedBytesPerSecond("iperf3: error - unable to connect to server")).isNull();
        assertThat(PeerBench.receivedBytesPerSecond("")).isNull();
    }

    @Test
    void settingsForBothManagersAreKnownKeysAndAnythingElseIsRefused() {
        assertThat(PeerBench.managerSettings("")).isEmpty();
        assertThat(PeerBench.managerSettings("peer.transfer-loops=4, manager.event-loop-threads=2"))
                .containsExactlyInAnyOrderEntriesOf(java.util.Map.of("peer.transfer-loops", "4",
                        "manager.event-loop-threads", "2"));
        for (String bad : new String[] {"peer.transfer-loops", "=4", "no.such-key=1", "peer.transfer-loops=4,,pool.size=1GiB"}) {
            assertThatThrownBy(() -> PeerBench.managerSettings(bad)).as(bad)
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("--setting");
        }
    }

    @Test
    void theBenchsOwnHugePageMountReallyMapsThePoolWithTwoMibPagesAndIsGoneAfterClose(@TempDir Path dir) throws Exception {
        Path mountPoint;
        try (BenchPoolDir pool = BenchPoolDir.hugeOrShm(dir, 64L << 20)) {
            Assumptions.assumeTrue(pool.description().startsWith("tmpfs"), pool.description());
            mountPoint = pool.dir();
            assertThat(Files.readString(Path.of("/proc/self/mountinfo"))).contains(" " + mountPoint + " ");
            try (SharedMemoryFile file = SharedMemoryFile.create(mountPoint.resolve("pool"), 16L << 20)) {
                for (long o = 0; o < (4L << 20); o += 4096) {
                    file.segment().set(ValueLayout.JAVA_BYTE, o, (byte) 1);
                }
                assertThat(Smaps.hugeMappedBytesUnder(mountPoint)).isGreaterThanOrEqualTo(4L << 20);
            }
        }
        assertThat(Files.readString(Path.of("/proc/self/mountinfo"))).doesNotContain(" " + mountPoint + " ");
        assertThat(mountPoint).doesNotExist();
    }

    @Test
    void aPoolOnFourKibPagesShowsNoHugeMappedBytesAndAGivenPoolDirMustExist(@TempDir Path dir) throws Exception {
        Path shmDir = Files.createDirectory(Path.of("/dev/shm").resolve("orbitkv-bench-test-" + ProcessHandle.current().pid()));
        try (SharedMemoryFile pool = SharedMemoryFile.create(shmDir.resolve("pool"), 8L << 20)) {
            for (long o = 0; o < pool.sizeBytes(); o += 4096) {
                pool.segment().set(ValueLayout.JAVA_BYTE, o, (byte) 1);
            }
            long huge = Smaps.hugeMappedBytesUnder(shmDir);
            // /dev/shm gives 4 KiB pages unless the machine forces huge shmem pages
            String shmem = Files.readString(Path.of("/sys/kernel/mm/transparent_hugepage/shmem_enabled"));
            if (!shmem.contains("[force]")) {
                assertThat(huge).isZero();
            }
        } finally {
            Files.deleteIfExists(shmDir);
        }
        assertThatThrownBy(() -> BenchPoolDir.given(dir.resolve("missing"))).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("--pool-dir");
    }
}
