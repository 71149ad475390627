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
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void verifiesBytesAndLeaksNoLease(@TempDir Path out) {
        JsonObject report = io.orbitkv.perf.Benchmarks.run("load", new String[] {
                "--concurrency=1,4", "--requests=80", "--seconds=20", "--warmup-requests=60", "--memcpy-seconds=0.1", "--ping-every=2",
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
                // Ping ran inside the measured phase, not in a window of its own.
                assertThat(stats.getJsonObject("noop_ping").getLong("count")).as(phase).isPositive();
                assertThat(stats.getDouble("memcpy_bytes_per_second_same_threads")).isPositive();
            }
        }
        assertThat(requests).isGreaterThanOrEqualTo(200);
        assertThat(cancelled).isPositive();
        assertThat(figures.getLong("verified_bytes")).isPositive();
        assertThat(figures.getLong("mismatched_pages")).isZero();
        assertThat(figures.getLong("active_leases_at_end")).isZero();
        assertThat(figures.getLong("evictions_total")).isPositive();
        assertThat(figures.getJsonObject("ssd").getBoolean("available")).isFalse();
        JsonObject baselines = report.getJsonObject("baselines");
        for (int c : new int[] {1, 4}) {
            for (String phase : new String[] {"closed_loop", "open_loop"}) {
                String key = "c" + c + "_" + phase;
                JsonObject memcpy = baselines.getJsonObject("memcpy_bytes_per_second").getJsonObject(key);
                assertThat(memcpy.getInteger("threads")).as(key).isEqualTo(c);
                assertThat(memcpy.getDouble("bytes_per_second")).as(key).isPositive();
                assertThat(baselines.getJsonObject("noop_grpc_ping").getJsonObject(key).getLong("count")).as(key).isPositive();
                assertThat(report.getJsonObject("ratios").getDouble(phase + "_restored_over_memcpy_c" + c)).as(key).isPositive();
            }
            assertThat(report.getJsonObject("ratios").getDouble("query_rpc_p50_over_ping_p50_c" + c)).isPositive();
        }
        // The headline ratio names the concurrency it was measured at.
        assertThat(report.getDouble("query_p50_ratio_c1")).isPositive();
        assertThat(report.containsKey("query_p50_ratio")).isFalse();
        assertThat(report.getBoolean("passed")).isTrue();
        assertThat(out.resolve("load.json")).isRegularFile();
        assertThat(out.resolve("load_throughput_vs_concurrency.png")).isRegularFile();
        assertThat(out.resolve("load_time_to_ready_cdf.png")).isRegularFile();
    }

    @Test
    void wrongBytesOrALeftoverLeaseFailTheRun() {
        for (long[] bad : new long[][] {{1, 0, 0}, {0, 2, 0}, {0, 0, 3}}) {
            io.orbitkv.perf.report.BenchReport.Builder report = io.orbitkv.perf.report.BenchReport.builder("load");
            LoadBench.judge(report, bad[0], bad[1], bad[2]);
            JsonObject json = report.build().toJson();
            assertThat(json.getBoolean("passed")).isFalse();
            assertThat(json.getJsonArray("failures")).hasSize(1);
        }
        io.orbitkv.perf.report.BenchReport.Builder clean = io.orbitkv.perf.report.BenchReport.builder("load");
        LoadBench.judge(clean, 0, 0, 0);
        assertThat(clean.build().toJson().getBoolean("passed")).isTrue();
    }
}
