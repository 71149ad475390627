package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.orbitkv.common.ConfigException;
import io.orbitkv.manager.Manager;
import io.orbitkv.nativeio.shm.PoolPages;
import io.orbitkv.nativeio.shm.SharedMemoryFile;
import io.orbitkv.peer.PoolPrefault;
import java.time.Duration;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code pool.huge-pages} on real Managers: {@code require} on a 4 KiB-page /dev/shm refuses to start with a typed
 * error before any pool file exists; on a real {@code huge=within_size} tmpfs (mounted here; skipped where it cannot
 * be) it starts, the pool file lives there and {@code orbitkv_pool_huge_pages} is 1; {@code prefer} on /dev/shm starts
 * on 4 KiB pages with the gauge at 0. The measured figures on /metrics: once pages of the pool are touched through a
 * mapping in the Manager's process, {@code orbitkv_pool_huge_mapped_bytes} counts them on the huge mount and stays 0
 * on /dev/shm while {@code orbitkv_pool_touched_bytes} counts them on both.
 */
@Timeout(120)
class HugePagesIT {
    private static HugeTmpfs tmpfs;

    @BeforeAll
    static void mount() throws Exception {
        tmpfs = HugeTmpfs.mount("128m");
    }

    @AfterAll
    static void unmount() throws Exception {
        if (tmpfs != null) {
            tmpfs.close();
        }
    }

    private static Map<String, String> settings(Path data, String shmDir, String hugePages) {
        Map<String, String> s = new HashMap<>();
        s.put("data-dir", data.toString());
        s.put("pool.size", "32MiB");
        s.put("pool.shm-dir", shmDir);
        s.put("pool.huge-pages", hugePages);
        s.put("grpc.tcp-port", "0");
        s.put("metrics.port", "0");
        s.put("ssd.enabled", "false");
        return s;
    }

    /** This JVM's pool files in {@code dir} (orbitkv-pool-<pid>-*). */
    private static List<Path> ourPoolFiles(Path dir) throws Exception {
        try (Stream<Path> files = Files.list(dir)) {
            return files.filter(p -> p.getFileName().toString()
                    .startsWith("orbitkv-pool-" + ProcessHandle.current().pid() + "-")).sorted().toList();
        }
    }

    private static double hugeGauge(Manager manager) {
        return manager.registry().get("orbitkv.pool.huge.pages").gauge().value();
    }

    @Test
    void requireOnFourKibPagesRefusesToStartNamingTheDirectoryAndTheMountAndLeavesNoPoolFile() throws Exception {
        Path shm = Path.of("/dev/shm");
        Assumptions.assumeFalse(PoolPages.of(shm).hugePages(), "/dev/shm is on huge pages here");
        Path data = Files.createTempDirectory("orbitkv-it-");
        List<Path> before = ourPoolFiles(shm);
        try {
            assertThatThrownBy(() -> Manager.start(RunningManager.config(settings(data, "/dev/shm", "require")))
                    .await(60, TimeUnit.SECONDS))
                    .isInstanceOfSatisfying(ConfigException.class, e -> {
                        assertThat(e.key()).isEqualTo("pool.huge-pages");
                        assertThat(e.getMessage()).contains("/dev/shm", "4 KiB pages",
                                "mount -t tmpfs -o huge=within_size,mode=0700,size=<N>");
                    });
            assertThat(ourPoolFiles(shm)).as("no pool file left behind").isEqualTo(before);
            assertThat(Files.exists(data.resolve("engine.sock"))).as("nothing listens").isFalse();
        } finally {
            RunningManager.deleteTree(data);
        }
    }

    @Test
    void requireOnAHugePageMountStartsThereAndTheGaugeIsOne() throws Exception {
        Path data = Files.createTempDirectory("orbitkv-it-");
        Path pool;
        try {
            try (Manager manager = Manager.start(RunningManager.config(settings(data, tmpfs.dir.toString(), "require")))
                    .await(60, TimeUnit.SECONDS)) {
                pool = manager.poolPath();
                assertThat(pool.getParent()).isEqualTo(tmpfs.dir);
                assertThat(ourPoolFiles(tmpfs.dir)).containsExactly(pool);
                assertThat(hugeGauge(manager)).isEqualTo(1.0);
                // Touched before the first scrape: that scrape's smaps re-read sees them (the next is 5 s later).
                try (SharedMemoryFile mapping = touchPool(manager)) {
                    assertThat(scrapeLine(manager, "orbitkv_pool_huge_pages")).isEqualTo("orbitkv_pool_huge_pages 1.0");
                    awaitScraped(manager, "orbitkv_pool_huge_mapped_bytes");
                    assertThat(scrape(manager, "orbitkv_pool_touched_bytes")).isGreaterThanOrEqualTo(TOUCHED);
                }
            }
            assertThat(Files.exists(pool)).as("pool file removed on stop").isFalse();
        } finally {
            RunningManager.deleteTree(data);
        }
    }

    @Test
    void preferOnFourKibPagesStartsAndTheGaugeIsZero() throws Exception {
        Path shm = Path.of("/dev/shm");
        Assumptions.assumeFalse(PoolPages.of(shm).hugePages(), "/dev/shm is on huge pages here");
        Path data = Files.createTempDirectory("orbitkv-it-");
        try (Manager manager = Manager.start(RunningManager.config(settings(data, "/dev/shm", "prefer")))
                .await(60, TimeUnit.SECONDS)) {
            assertThat(hugeGauge(manager)).isZero();
            try (SharedMemoryFile mapping = touchPool(manager)) {
                awaitScraped(manager, "orbitkv_pool_touched_bytes");
                assertThat(scrape(manager, "orbitkv_pool_huge_mapped_bytes")).as("4 KiB pages, measured").isZero();
            }
        } finally {
            RunningManager.deleteTree(data);
        }
    }

    private static final long TOUCHED = 16L << 20;

    /**
     * Maps the Manager's pool in this process (as an engine in the same process would) and write-faults its first
     * {@link #TOUCHED} bytes without changing a byte ({@link PoolPrefault}); the caller closes the mapping.
     */
    private static SharedMemoryFile touchPool(Manager manager) throws Exception {
        SharedMemoryFile mapping = SharedMemoryFile.map(manager.poolPath(), 32L << 20);
        PoolPrefault.prefault(mapping.segment(), TOUCHED, () -> false);
        return mapping;
    }

    /** Scrapes until {@code name} counts at least {@link #TOUCHED} bytes (a scrape answers the previous smaps read). */
    private static void awaitScraped(Manager manager, String name) {
        Awaitility.await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(50)).untilAsserted(
                () -> assertThat(scrape(manager, name)).as(name).isGreaterThanOrEqualTo(TOUCHED));
    }

    /** The value of {@code name} on the real /metrics endpoint. */
    private static double scrape(Manager manager, String name) throws Exception {
        String line = scrapeLine(manager, name);
        return Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
    }

    /** The sample line of {@code name} on the real /metrics endpoint (its name and value, no labels). */
    private static String scrapeLine(Manager manager, String name) throws Exception {
        var client = java.net.http.HttpClient.newBuilder().version(java.net.http.HttpClient.Version.HTTP_1_1).build();
        String body = client.send(java.net.http.HttpRequest.newBuilder(
                        java.net.URI.create("http://127.0.0.1:" + manager.metricsPort() + "/metrics")).build(),
                java.net.http.HttpResponse.BodyHandlers.ofString()).body();
        return body.lines().filter(l -> l.startsWith(name + " ") || l.startsWith(name + "{")).findFirst()
                .orElseThrow(() -> new AssertionError(name + " not in the scrape"));
    }
}
