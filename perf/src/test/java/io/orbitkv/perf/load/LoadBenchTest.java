package io.orbitkv.perf.load;

import static org.assertj.core.api.Assertions.assertThat;

import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The load generator at concurrency 1 and 4, a few hundred requests, under eviction pressure. */
class LoadBenchTest {
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void verifiesBytesAndLeaksNoLease(@TempDir Path out) {
        JsonObject report = io.orbitkv.perf.Benchmarks.run("load", new String[] {
                "--concurrency=1,4", "--requests=80", "--seconds=20", "--warmup-requests=60", "--ping-seconds=0.2",
                "--pool-size=16MiB", "--page-bytes=64KiB", "--prefixes=32", "--cancel-fraction=0.2", "--out=" + out});

        JsonObject figures = report.getJsonObject("figures");
        JsonArray perConcurrency = figures.getJsonArray("per_concurrency");
        assertThat(perConcurrency).hasSize(2);
        long requests = 0;
        long cancelled = 0;
        for (int i = 0; i < perConcurrency.size(); i++) {
            JsonObject entry = perConcurrency.getJsonObject(i);
            for (String phase : new String[] {"closed_loop", "open_loop"}) {
                JsonObject stats = entry.getJsonObject(phase);
                assertThat(stats).as(phase).isNotNull();
                requests += stats.getLong("requests");
                cancelled += stats.getLong("cancelled_after_submit") + stats.getLong("cancelled_after_ready");
                assertThat(stats.getJsonObject("time_to_ready").getLong("count")).isPositive();
            }
        }
        assertThat(requests).isGreaterThanOrEqualTo(200);
        assertThat(cancelled).isPositive();
        assertThat(figures.getLong("verified_bytes")).isPositive();
        assertThat(figures.getLong("mismatched_pages")).isZero();
        assertThat(figures.getLong("active_leases_at_end")).isZero();
        assertThat(figures.getLong("evictions_total")).isPositive();
        assertThat(figures.getJsonObject("ssd").getBoolean("available")).isFalse();
        assertThat(report.getJsonObject("baselines").getDouble("memcpy_bytes_per_second")).isPositive();
        assertThat(report.getJsonObject("baselines").getJsonObject("noop_grpc_ping").getJsonObject("c4").getLong("count")).isPositive();
        assertThat(report.getDouble("query_p50_ratio")).isPositive();
        assertThat(out.resolve("load.json")).isRegularFile();
        assertThat(out.resolve("load_throughput_vs_concurrency.png")).isRegularFile();
        assertThat(out.resolve("load_time_to_ready_cdf.png")).isRegularFile();
    }
}
