package io.orbitkv.perf.trace;

import io.orbitkv.perf.report.PlotsTestSupport;
import io.vertx.core.json.JsonObject;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

class TraceBoundsReportTest {

    @Test
    void writesBoundsJsonAndPlotForASmallTrace(@TempDir Path dir) throws IOException {
        Path trace = dir.resolve("tiny.jsonl");
        Files.writeString(trace, """
                {"timestamp": 0, "input_length": 1536, "output_length": 1, "hash_ids": [0, 1, 2]}
                {"timestamp": 5, "input_length": 1024, "output_length": 1, "hash_ids": [0, 3]}
                {"timestamp": 9, "input_length": 1536, "output_length": 1, "hash_ids": [0, 1, 2]}
                """);
        Path out = dir.resolve("out");

        JsonObject report = TraceBoundsReport.run(trace, new long[] {4, 2}, out);

        assertThat(new JsonObject(Files.readString(out.resolve(TraceBoundsReport.BOUNDS_FILE)))).isEqualTo(report);
        assertThat(report.getString("bench")).isEqualTo(TraceBoundsReport.BENCH_NAME);
        JsonObject figures = report.getJsonObject("figures");
        assertThat(figures.getLong("block_references")).isEqualTo(8);
        assertThat(figures.getLong("unique_blocks")).isEqualTo(4);
        assertThat(figures.getLong("infinite_hit_blocks")).isEqualTo(4); // block 0 in request 2, all 3 in request 3
        // Capacities come out sorted. At 2 blocks, request 2 finds {1, 2} (no hit) and leaves {0, 3}, so request 3
        // hits block 0 only. At 4 blocks nothing is evicted: the infinite figure.
        assertThat(figures.getJsonArray("lru").getJsonObject(0).getLong("capacity_blocks")).isEqualTo(2);
        assertThat(figures.getJsonArray("lru").getJsonObject(0).getLong("hit_blocks")).isEqualTo(1);
        assertThat(figures.getJsonArray("lru").getJsonObject(1).getLong("capacity_blocks")).isEqualTo(4);
        assertThat(figures.getJsonArray("lru").getJsonObject(1).getLong("hit_blocks")).isEqualTo(4);
        assertThat(report.getJsonObject("config").getString("trace")).isEqualTo(trace.toString());
        PlotsTestSupport.assertDrawnPng(out.resolve(TraceBoundsReport.PLOT_FILE), 1024, 768);
    }

    @Test
    void sharedTraceReportQuotesTheReadmeFigures(@TempDir Path out) {
        JsonObject figures = TraceBoundsReport.run(SharedTraces.syntheticOrSkip(),
                TraceBoundsReport.README_CAPACITIES_BLOCKS, out).getJsonObject("figures");

        assertThat(figures.getDouble("infinite_hit_ratio_percent")).isEqualTo(64.0);
        assertThat(figures.getJsonArray("lru").stream().map(p -> ((JsonObject) p).getDouble("hit_ratio_percent")))
                .containsExactly(14.4, 27.9, 42.3, 57.1, 64.0);
    }
}
