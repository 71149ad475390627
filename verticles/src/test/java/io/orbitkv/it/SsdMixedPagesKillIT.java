package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.manager.Manager;
import io.orbitkv.protocol.engine.InstanceRole;
import io.orbitkv.protocol.engine.LeasedPage;
import io.orbitkv.protocol.engine.QueryReply;
import io.orbitkv.protocol.engine.QueryStatus;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.MemorySegment;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A Manager in its own process fills a small SSD tier with pages of four sizes (one engine model per size) to more
 * than 90 % of its capacity, is killed with SIGKILL, and a Manager restarted on the same data directory finds every
 * page on SSD and serves it with its bytes.
 */
@Timeout(300)
class SsdMixedPagesKillIT {

    /** 16 extents of 2 MiB + 4 KiB: a tier that held 16 pages of any size before pages were packed. */
    static final long CAPACITY = 16L * ((2 << 20) + 4096);
    /** Page size and page count per model, published in this order (large first, the small ones fill the tails). */
    static final long[][] MIX = {{2 << 20, 9}, {1 << 20, 6}, {256 << 10, 12}, {64 << 10, 40}};
    static final Pattern READY = Pattern.compile(
            "grpc unix:(\\S+) and tcp .* metrics http://(\\S+)/metrics, .* token (\\S+), bridge");

    @TempDir
    Path dir;

    Map<String, String> settings() {
        Map<String, String> settings = new HashMap<>();
        settings.put("data-dir", dir.toString());
        settings.put("pool.size", "96MiB");
        settings.put("grpc.tcp-port", "0");
        settings.put("metrics.port", "0");
        settings.put("ssd.capacity", Long.toString(CAPACITY));
        return settings;
    }

    @Test
    void mixedPageSizesFillTheSsdTierAndAllComeBackAfterSigkill() throws Exception {
        List<String> command = new ArrayList<>(List.of(ProcessHandle.current().info().command().orElse("java"),
                "--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow", "-Xmx256m",
                "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-cp", System.getProperty("java.class.path"), "io.orbitkv.cluster.ManagerProcessMain"));
        settings().forEach((key, value) -> command.addAll(List.of("--set", key + "=" + value)));
        Process child = new ProcessBuilder(command).redirectError(dir.resolve("manager.stderr").toFile()).start();
        Map<Long, List<ByteString>> chains = new HashMap<>();
        long payload = 0;
        try {
            Matcher ready = readyLine(child);
            String token = Files.readString(Path.of(ready.group(3))).strip();
            int pages = 0;
            try (OrbitKvClient client = OrbitKvClient.connectUnix(Path.of(ready.group(1)), token)) {
                for (long[] mix : MIX) {
                    long pageBytes = mix[0];
                    int count = (int) mix[1];
                    try (EngineSession session = client.register(RunningManager.identity("model-" + pageBytes,
                            pageBytes).build(), InstanceRole.PREFILL_AND_DECODE).await()) {
                        chains.put(pageBytes, PublishQueryRestoreIT.publish(session, "mixed-" + pageBytes, count));
                    }
                    pages += count;
                    payload += pageBytes * count;
                    // one size after the other, as published: the order the SSD role packs them in
                    int expected = pages;
                    await().atMost(Duration.ofSeconds(60))
                            .until(() -> metric(ready.group(2), "orbitkv_ssd_keys") >= expected);
                }
            }
            assertThat(metric(ready.group(2), "orbitkv_ssd_keys")).isEqualTo(pages);
            assertThat((double) payload / CAPACITY).as("payload share of the SSD capacity").isGreaterThan(0.90);
            child.toHandle().destroyForcibly(); // SIGKILL
            assertThat(child.waitFor(30, TimeUnit.SECONDS)).isTrue();
        } finally {
            child.destroyForcibly();
        }

        Manager manager = Manager.start(RunningManager.config(settings())).await(60, TimeUnit.SECONDS);
        try (OrbitKvClient client = OrbitKvClient.connectUnix(manager.unixSocket(), manager.token())) {
            assertThat(metric("127.0.0.1:" + manager.metricsPort(), "orbitkv_ssd_keys"))
                    .isEqualTo(chains.values().stream().mapToInt(List::size).sum());
            for (long[] mix : MIX) {
                long pageBytes = mix[0];
                try (EngineSession session = client.register(RunningManager.identity("model-" + pageBytes,
                        pageBytes).build(), InstanceRole.PREFILL_AND_DECODE).await()) {
                    List<ByteString> hashes = chains.get(pageBytes);
                    // at most 16 MiB per query, well inside the query byte budget of the 96 MiB pool
                    int step = (int) Math.max(1, (16L << 20) / pageBytes);
                    for (int from = 0; from < hashes.size(); from += step) {
                        List<ByteString> prefix = hashes.subList(0, Math.min(hashes.size(), from + step));
                        readBack(session, prefix, from, "mixed-" + pageBytes, pageBytes);
                    }
                }
            }
            assertThat(metric("127.0.0.1:" + manager.metricsPort(), "orbitkv_ssd_read_hits_total"))
                    .isEqualTo(chains.values().stream().mapToInt(List::size).sum());
        } finally {
            manager.close();
        }
    }

    /** Queries the prefix until READY and checks the bytes of its pages from position {@code from} on. */
    private static void readBack(EngineSession session, List<ByteString> prefix, int from, String seed,
                                 long pageBytes) throws Exception {
        QueryReply submitted = session.submit(List.of(SsdTierIT.chain(prefix)), 0).await();
        QueryReply ready = session.query(List.of(SsdTierIT.chain(prefix))).await();
        assertThat(ready.getStatus()).isEqualTo(QueryStatus.READY);
        assertThat(ready.getReadyBlocks()).isEqualTo(prefix.size());
        for (LeasedPage page : ready.getLease().getPagesList()) {
            if (page.getPosition() < from) {
                continue;
            }
            MemorySegment expected = MemorySegment.ofArray(new byte[(int) pageBytes]);
            PublishQueryRestoreIT.fill(expected, (seed + page.getPosition()).hashCode());
            assertThat(session.slot(page.getSlot()).asSlice(0, pageBytes).mismatch(expected))
                    .as("%s page %d", seed, page.getPosition()).isEqualTo(-1);
        }
        session.release(ready.getLease().getLeaseId()).await();
        if (submitted.getStatus() == QueryStatus.PENDING) {
            session.cancel(submitted.getTicket()).await();
        }
    }

    private Matcher readyLine(Process child) throws Exception {
        BufferedReader lines = new BufferedReader(new InputStreamReader(child.getInputStream(),
                StandardCharsets.UTF_8));
        String line;
        while ((line = lines.readLine()) != null) {
            Matcher matcher = READY.matcher(line);
            if (matcher.find()) {
                return matcher;
            }
        }
        throw new AssertionError("the Manager process ended before its ready line: "
                + Files.readString(dir.resolve("manager.stderr")));
    }

    private static double metric(String hostPort, String name) throws Exception {
        try (HttpClient http = HttpClient.newHttpClient()) {
            String body = http.send(HttpRequest.newBuilder(URI.create("http://" + hostPort + "/metrics")).build(),
                    HttpResponse.BodyHandlers.ofString()).body();
            for (String line : body.split("\n")) {
                if (line.startsWith(name + " ") || line.startsWith(name + "{")) {
                    return Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
                }
            }
        }
        return 0;
    }
}
