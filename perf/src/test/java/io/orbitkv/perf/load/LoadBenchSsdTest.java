package io.orbitkv.perf.load;

import static org.assertj.core.api.Assertions.assertThat;

import io.vertx.core.json.JsonObject;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** {@code --ssd-mix}: a working set larger than a small pool, SSD tier on, cold-tail re-queries read back from SSD. */
class LoadBenchSsdTest {
    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void ssdMixReadsPagesBackFromSsdAndVerifiesThem() {
        JsonObject report = io.orbitkv.perf.Benchmarks.run("load", new String[] {
                "--concurrency=1", "--requests=300", "--seconds=20", "--warmup-requests=60", "--memcpy-seconds=0.1", 
                "--pool-size=16MiB", "--page-bytes=64KiB", "--prefixes=32", "--cancel-fraction=0.1", "--mode=closed",
                "--ssd-mix=0.5"});

        JsonObject figures = report.getJsonObject("figures");
        JsonObject closed = figures.getJsonArray("per_concurrency").getJsonObject(0).getJsonObject("closed_loop");
        assertThat(closed.getLong("requests")).isEqualTo(300);
        JsonObject tiers = closed.getJsonObject("hits_by_tier");
        assertThat(tiers.getLong("tier_reads_ssd_pages")).isPositive();
        assertThat(tiers.getLong("tier_read_bytes_ssd")).isPositive();
        assertThat(tiers.getLong("hit_pages_from_dram")).isPositive();
        assertThat(tiers.getLong("ssd_write_bytes")).isPositive();
        assertThat(closed.getLong("pending_polls")).isPositive();
        JsonObject ssd = figures.getJsonObject("ssd");
        assertThat(ssd.getBoolean("available")).isTrue();
        assertThat(ssd.getJsonObject("whole_run_including_warmup").getLong("ssd_writes_committed")).isPositive();
        assertThat(figures.getLong("verified_bytes")).isPositive();
        assertThat(figures.getLong("mismatched_pages")).isZero();
        assertThat(figures.getLong("active_leases_at_end")).isZero();
    }

    @Test
    void coldTailStartsPastThePrefixesThatFillDram() {
        PrefixWorkload w = new PrefixWorkload(10, 10, 10, 1.0, 1, 1, 1);
        assertThat(w.coldTailStart(35)).isEqualTo(3);
        assertThat(w.coldTailStart(1000)).isEqualTo(9);
        java.util.SplittableRandom r = new java.util.SplittableRandom(7);
        for (int i = 0; i < 200; i++) {
            assertThat(w.next(i, r, 1.0, 3).prefix()).isBetween(3, 9);
        }
    }
}
