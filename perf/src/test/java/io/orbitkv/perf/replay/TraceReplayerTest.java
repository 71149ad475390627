package io.orbitkv.perf.replay;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.perf.trace.CacheBounds;
import io.orbitkv.perf.trace.MooncakeTrace;
import io.orbitkv.perf.trace.SharedTraces;
import io.orbitkv.perf.trace.TraceRequest;
import io.vertx.core.json.JsonObject;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** Replays a slice of the shared trace against an in-process Manager whose pool is far smaller than the slice. */
class TraceReplayerTest {
    private static final int LIMIT = 200;
    private static final long POOL_BLOCKS = 1000;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void replayMatchesTheOfflineBoundsAndReturnsEveryLease(@TempDir Path out) throws Exception {
        Path trace = SharedTraces.syntheticOrSkip();
        TraceReplayer.Options options = new TraceReplayer.Options(trace, out, LIMIT, 0, 131072, 512, 1024, POOL_BLOCKS,
                null, 10_000, 1, 16);

        JsonObject report = TraceReplayer.run(options, line -> { });

        List<TraceRequest> slice = MooncakeTrace.readAll(trace).subList(0, LIMIT);
        CacheBounds.Bounds bounds = CacheBounds.simulate(slice, POOL_BLOCKS);
        JsonObject figures = report.getJsonObject("figures");
        JsonObject baselines = report.getJsonObject("baselines");
        assertThat(report.getJsonObject("config").getLong("pool_capacity_blocks")).isEqualTo(POOL_BLOCKS);
        assertThat(baselines.getDouble("infinite_cache_hit_ratio")).isEqualTo(bounds.infinite().ratio());
        assertThat(baselines.getLong("infinite_cache_hit_blocks")).isEqualTo(bounds.infinite().hitBlocks());
        assertThat(baselines.getJsonObject("lru_at_manager_capacity").getLong("hit_blocks"))
                .isEqualTo(bounds.lruAt(POOL_BLOCKS).hitBlocks());
        assertThat(figures.getLong("block_references")).isEqualTo(bounds.blockReferences());
        assertThat(figures.getLong("hit_blocks")).isPositive().isLessThanOrEqualTo(bounds.infinite().hitBlocks());
        // One engine in trace order: the Manager does exactly what its offline model predicts.
        assertThat(figures.getLong("hit_blocks")).isEqualTo(figures.getJsonObject("manager_semantics_model").getLong("hit_blocks"));
        assertThat(figures.getLong("evictions")).isPositive();
        assertThat(figures.getLong("mismatched_pages")).isZero();
        assertThat(figures.getLong("verified_bytes")).isPositive();
        assertThat(figures.getLong("active_leases_at_end")).isZero();
        assertThat(figures.getLong("session_leases_at_end")).isZero();
        assertThat(figures.getJsonObject("hits_by_tier").getJsonObject("ssd").getBoolean("available")).isFalse();
        // Modelled figures live apart from the measured ones, with their assumptions.
        assertThat(figures.containsKey("ttft_modelled")).isFalse();
        assertThat(figures.containsKey("restored_logical_bytes")).isFalse();
        JsonObject model = report.getJsonObject("model");
        assertThat(model.getJsonObject("ttft").getLong("count")).isEqualTo(LIMIT);
        assertThat(model.getJsonObject("logical_bytes").getLong("restored")).isPositive();
        assertThat(model.getJsonArray("assumptions")).isNotEmpty();
        assertThat(model.getJsonObject("transfer").getString("ssd_read")).contains("zero");
        assertThat(model.getJsonObject("rates").getDouble("host_to_device_bytes_per_second")).isEqualTo(25e9);
        assertThat(baselines.getJsonObject("lru_at_manager_capacity").getString("tiers")).isEqualTo("DRAM");
        assertThat(report.getBoolean("passed")).isTrue();
        assertThat(out.resolve(TraceReplayer.REPORT_FILE)).isRegularFile();
        assertThat(Files.size(out.resolve(TraceReplayer.HIT_RATIO_PLOT))).isPositive();
        assertThat(Files.size(out.resolve(TraceReplayer.LATENCY_PLOT))).isPositive();
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void ssdTierAddsHitsBeyondTheDramOnlyRun(@TempDir Path out) throws Exception {
        Path trace = SharedTraces.syntheticOrSkip();
        int limit = 300;
        long pool = 500;
        JsonObject dramOnly = TraceReplayer.run(new TraceReplayer.Options(trace, null, limit, 0, 131072, 512, 1024, pool,
                null, 10_000, 1, 16), line -> { }).getJsonObject("figures");
        JsonObject withSsdReport = TraceReplayer.run(new TraceReplayer.Options(trace, out, limit, 0, 131072, 512, 1024, pool,
                null, 10_000, 1, 16, 64L << 20), line -> { });
        JsonObject withSsd = withSsdReport.getJsonObject("figures");
        // Judged against LRU at what the Manager can hit on: DRAM plus SSD (64 MiB of 64 KiB pages + 4 KiB headers).
        long extents = (64L << 20) / ((64 << 10) + 4096);
        JsonObject baselines = withSsdReport.getJsonObject("baselines");
        JsonObject lruBoth = baselines.getJsonObject("lru_at_dram_plus_ssd_capacity");
        assertThat(lruBoth.getLong("capacity_blocks")).isEqualTo(pool + extents);
        assertThat(baselines.getJsonObject("lru_at_manager_capacity").getString("tiers")).isEqualTo("DRAM + SSD");
        assertThat(withSsdReport.getDouble("hit_ratio_over_lru"))
                .isCloseTo(withSsd.getDouble("hit_ratio") / lruBoth.getDouble("hit_ratio"), org.assertj.core.data.Offset.offset(1e-9));
        assertThat(baselines.getJsonObject("lru_at_dram_capacity").getLong("capacity_blocks")).isEqualTo(pool);
        JsonObject model = withSsdReport.getJsonObject("model");
        assertThat(model.getJsonObject("transfer").getString("ssd_read")).startsWith("included: each request's own");
        assertThat(model.getJsonObject("rates").getDouble("ssd_read_bytes_per_second")).isPositive();
        assertThat(model.getJsonObject("logical_bytes").getLong("ssd_read")).isPositive();

        JsonObject ssd = withSsd.getJsonObject("hits_by_tier").getJsonObject("ssd");
        assertThat(ssd.getBoolean("available")).isTrue();
        assertThat(ssd.getLong("hit_blocks")).isPositive();
        assertThat(ssd.getLong("read_scaled_bytes")).isPositive();
        assertThat(withSsd.getJsonObject("hits_by_tier").getJsonObject("dram").getLong("hit_blocks")
                + ssd.getLong("hit_blocks")).isEqualTo(withSsd.getLong("hit_blocks"));
        assertThat(withSsd.getLong("hit_blocks")).isGreaterThanOrEqualTo(dramOnly.getLong("hit_blocks"));
        assertThat(dramOnly.getJsonObject("hits_by_tier").getJsonObject("ssd").getBoolean("available")).isFalse();
        assertThat(withSsd.getLong("mismatched_pages")).isZero();
        assertThat(withSsd.getLong("verified_bytes")).isPositive();
        assertThat(withSsd.getLong("active_leases_at_end")).isZero();
        assertThat(withSsd.getLong("session_leases_at_end")).isZero();
    }
}
