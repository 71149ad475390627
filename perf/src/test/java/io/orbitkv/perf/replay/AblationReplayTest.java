package io.orbitkv.perf.replay;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.orbitkv.clusterkit.LocalEtcd;
import io.orbitkv.perf.BenchArgs;
import io.orbitkv.perf.trace.CacheBounds;
import io.orbitkv.perf.trace.MooncakeTrace;
import io.orbitkv.perf.trace.SharedTraces;
import io.orbitkv.perf.trace.TraceRequest;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** {@code replay --ablations} on a small slice: every row, equal capacity, readiness counted only where it can be judged. */
class AblationReplayTest {
    private static final int LIMIT = 120;
    private static final long POOL_BLOCKS = 64; // the smallest pool a Manager takes: 4 MiB of 64 KiB pages

    private static TraceReplayer.Options options(Path trace, Path out, long poolBlocks) {
        // SSD as many extents as pool pages (64 KiB pages + 4 KiB header).
        return new TraceReplayer.Options(trace, out, LIMIT, 1, 131_072, 512, 1024, poolBlocks, null, 10_000, 2, 16,
                poolBlocks * ((64 << 10) + 4096), TraceReplayer.Options.DEFAULT_H2D_BYTES_PER_SECOND, 0);
    }

    private static Map<String, JsonObject> rows(JsonObject report) {
        Map<String, JsonObject> rows = new LinkedHashMap<>();
        JsonArray array = report.getJsonObject("figures").getJsonArray("rows");
        for (int i = 0; i < array.size(); i++) {
            rows.put(array.getJsonObject(i).getString("configuration"), array.getJsonObject(i));
        }
        return rows;
    }

    @Test
    @Timeout(value = 300, unit = TimeUnit.SECONDS)
    void everyConfigurationRunsTheSameRequestsBesideTheBoundsAtTheSameCapacity(@TempDir Path out) throws Exception {
        Path trace = SharedTraces.syntheticOrSkip();
        TraceReplayer.Options options = options(trace, out, POOL_BLOCKS);

        JsonObject report = AblationReplay.run(options, new AblationReplay.Settings(5, 1, 1,
                AblationReplay.DEFAULT_PEER_READ_BYTES_PER_SECOND, AblationReplay.Scope.ALL), line -> { });

        assertThat(report.getBoolean("passed")).as(report.encode()).isTrue();
        Map<String, JsonObject> rows = rows(report);
        assertThat(rows.keySet()).containsExactly("no cache", "DRAM only", "DRAM+SSD, write all", "+ reuse-aware writes",
                "+ boundary choice", "+ deadline prefetch", "+ guarded selection", "everything on", "offline LRU at P+S",
                "offline Belady at P+S", "perfect readiness");
        List<TraceRequest> slice = MooncakeTrace.readAll(trace).subList(0, LIMIT);
        long capacity = POOL_BLOCKS + options.ssdExtents();
        CacheBounds.Bounds bounds = CacheBounds.simulate(slice, capacity);
        assertThat(rows.get("offline LRU at P+S").getJsonObject("figures").getLong("hit_blocks"))
                .isEqualTo(bounds.lruAt(capacity).hitBlocks());
        assertThat(rows.get("offline Belady at P+S").getJsonObject("figures").getLong("hit_blocks"))
                .isGreaterThanOrEqualTo(bounds.lruAt(capacity).hitBlocks());
        assertThat(rows.get("no cache").getJsonObject("figures").getLong("hit_blocks")).isZero();
        for (String name : List.of("DRAM only", "DRAM+SSD, write all", "everything on")) {
            JsonObject f = rows.get(name).getJsonObject("figures");
            assertThat(f.getLong("block_references")).isEqualTo(bounds.blockReferences());
            assertThat(f.getLong("hit_blocks")).isPositive();
            JsonObject readiness = f.getJsonObject("readiness");
            assertThat(readiness.getLong("ready_at_first_use"))
                    .isLessThanOrEqualTo(readiness.getLong("requests_with_something_to_prepare"));
            assertThat(f.getString("verified")).startsWith("sampled (");
            assertThat(rows.get(name).getDouble("ttft_p99_ms")).isGreaterThanOrEqualTo(rows.get(name).getDouble("ttft_p50_ms"));
        }
        assertThat(rows.get("DRAM only").getJsonObject("figures").getJsonObject("hit_blocks_by_tier").getLong("ssd")).isZero();
        assertThat(rows.get("DRAM+SSD, write all").getJsonObject("figures").getJsonObject("logical_bytes")
                .getLong("ssd_written")).isPositive();
        // Perfect readiness serves everything on's own hits at arrival: never slower than everything on.
        assertThat(rows.get("perfect readiness").getJsonObject("figures").getLong("hit_blocks"))
                .isEqualTo(rows.get("everything on").getJsonObject("figures").getLong("hit_blocks"));
        assertThat(rows.get("perfect readiness").getDouble("ttft_p99_ms"))
                .isLessThanOrEqualTo(rows.get("everything on").getDouble("ttft_p99_ms"));
        assertThat(out.resolve(AblationReplay.REPORT_FILE)).isRegularFile();
        assertThat(out.resolve(AblationReplay.TABLE_FILE)).isRegularFile();
        assertThat(out.resolve(AblationReplay.TTFT_PLOT)).isRegularFile();
    }

    @Test
    @Timeout(value = 300, unit = TimeUnit.SECONDS)
    void twoManagersAreComparedWithOneOfTwiceTheCapacityAndWithPeeringOff(@TempDir Path out) throws Exception {
        assumeTrue(LocalEtcd.installed(), "etcd is not installed (/usr/bin/etcd): install Debian's etcd-server");
        Path trace = SharedTraces.syntheticOrSkip();

        JsonObject report = AblationReplay.run(options(trace, out, 1000), new AblationReplay.Settings(5, 2, 1,
                AblationReplay.DEFAULT_PEER_READ_BYTES_PER_SECOND, AblationReplay.Scope.MANAGERS), line -> { });

        assertThat(report.getBoolean("passed")).as(report.encode()).isTrue();
        Map<String, JsonObject> rows = rows(report);
        assertThat(rows.keySet()).containsExactly("2 Managers x P, peering", "2 Managers x P, peering off",
                "1 Manager x 2P", "offline LRU at 2(P+S)");
        JsonObject peering = rows.get("2 Managers x P, peering").getJsonObject("figures");
        JsonObject off = rows.get("2 Managers x P, peering off").getJsonObject("figures");
        assertThat(peering.getJsonObject("hit_blocks_by_tier").getLong("peer"))
                .as("prefixes the other Manager published are fetched from it").isPositive();
        assertThat(off.getJsonObject("hit_blocks_by_tier").getLong("peer")).isZero();
        assertThat(rows.get("1 Manager x 2P").getJsonObject("figures").getLong("pool_blocks_per_manager")).isEqualTo(2000);
        assertThat(peering.getLong("peer_checksum_mismatches")).isZero();
    }

    @Test
    void everyAcceptedOptionTakesEffectOrIsRefused() {
        Path trace = Path.of("no-such-trace.jsonl");
        assertThatThrownBy(() -> ReplayCommand.run(BenchArgs.parse("--trace", trace.toString(), "--hint-lead-ms", "5",
                "--data-dir", "/tmp"))).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("--data-dir");
        assertThatThrownBy(() -> ReplayCommand.run(BenchArgs.parse("--trace", trace.toString(), "--hint-lead-ms", "5",
                "--managers", "2"))).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("--ablations");
        // Options of the planned replays are refused by the plain one instead of being ignored.
        assertThatThrownBy(() -> ReplayCommand.run(BenchArgs.parse("--trace", trace.toString(), "--runs", "3")))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("--runs");
    }
}
