package io.orbitkv.perf.report;

import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class BenchReportTest {

    private static final MachineInfo MACHINE =
            new MachineInfo(2, 24L << 30, "6.1.0", "Test CPU", "25", "Test VM", 1L << 30, "Linux amd64");

    private static BenchReport sample() {
        return BenchReport.builder("replay")
                .figure("throughput_ops_per_s", 125_000.5)
                .figure("latency", new JsonObject().put("p99_ns", 40_000).put("note", "line one\nline two"))
                .baseline("memcpy_gb_per_s", 6.0)
                .ratio("hit_ratio_vs_infinite", 0.91)
                .topLevelRatio("throughput_ratio", 250.0, 1000.0)
                .config("concurrency", 8)
                .config("trace", "shared/traces/synthetic_trace.jsonl")
                .machine(MACHINE)
                .build();
    }

    @Test
    void hasTheContractSectionsInOrderWithRatiosPromotedOnRequest() {
        JsonObject json = sample().toJson();

        assertThat(json.fieldNames()).containsExactly(
                "bench", "figures", "baselines", "ratios", "config", "machine", "passed", "failures", "throughput_ratio");
        assertThat(json.getBoolean("passed")).isTrue();
        assertThat(json.getJsonArray("failures")).isEmpty();
        assertThat(json.getString("bench")).isEqualTo("replay");
        assertThat(json.getJsonObject("figures").getDouble("throughput_ops_per_s")).isEqualTo(125_000.5);
        assertThat(json.getJsonObject("baselines").getDouble("memcpy_gb_per_s")).isEqualTo(6.0);
        assertThat(json.getJsonObject("ratios").fieldNames()).containsExactly("hit_ratio_vs_infinite", "throughput_ratio");
        assertThat(json.getDouble("throughput_ratio")).isEqualTo(0.25);
        assertThat(json.getJsonObject("config").getInteger("concurrency")).isEqualTo(8);
        assertThat(json.getJsonObject("machine")).isEqualTo(MACHINE.toJson());
    }

    @Test
    void printsExactlyOneParseableLine() {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        BenchReport report = sample();
        report.printTo(new PrintStream(bytes, true, StandardCharsets.UTF_8));

        String printed = bytes.toString(StandardCharsets.UTF_8);
        assertThat(printed).endsWith(System.lineSeparator());
        assertThat(printed.lines()).hasSize(1);
        assertThat(new JsonObject(printed.strip())).isEqualTo(report.toJson());
        assertThat(new JsonObject(printed.strip()).getJsonObject("figures").getJsonObject("latency").getString("note"))
                .isEqualTo("line one\nline two");
    }

    @Test
    void writesThePrettyReportIntoACreatedDirectory(@TempDir Path dir) throws IOException {
        BenchReport report = sample();

        Path written = report.writeTo(dir.resolve("out/nested"));
        Path named = report.writeTo(dir, "bounds.json");

        assertThat(written).isEqualTo(dir.resolve("out/nested/replay.json"));
        assertThat(new JsonObject(Files.readString(written))).isEqualTo(report.toJson());
        assertThat(new JsonObject(Files.readString(named))).isEqualTo(report.toJson());
        try (var files = Files.list(dir.resolve("out/nested"))) {
            assertThat(files).containsExactly(written); // no partial file left behind
        }
    }

    @Test
    void rejectsValuesJsonCannotCarry() {
        BenchReport.Builder builder = BenchReport.builder("x");

        assertThatThrownBy(() -> builder.ratio("throughput_ratio", 1.0, 0.0))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("Infinity");
        assertThatThrownBy(() -> builder.figure("mean", Double.NaN)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> builder.figure("nested", new JsonObject().put("a", new JsonArray().add(Double.NaN))))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("nested");
        assertThatThrownBy(() -> builder.config("when", new Object())).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> builder.topLevelRatio("machine", 1.0)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> BenchReport.builder(" ")).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void probesTheMachineWhenNoneIsGiven() {
        JsonObject machine = BenchReport.builder("probe").build().toJson().getJsonObject("machine");

        assertThat(machine.getInteger("cores")).isEqualTo(Runtime.getRuntime().availableProcessors());
    }

    @Test
    void aFailedCheckKeepsTheFiguresAndMarksTheReportNotPassed() {
        JsonObject json = BenchReport.builder("load").figure("mismatched_pages", 2)
                .check(true, "never recorded")
                .check(false, "2 restored pages differ from what was published")
                .failure("1 lease still active at the end")
                .machine(MACHINE).build().toJson();

        assertThat(json.getBoolean("passed")).isFalse();
        assertThat(json.getJsonArray("failures")).containsExactly(
                "2 restored pages differ from what was published", "1 lease still active at the end");
        assertThat(json.getJsonObject("figures").getInteger("mismatched_pages")).isEqualTo(2);
        assertThat(BenchReport.passed(json)).isFalse();
        assertThatThrownBy(() -> BenchReport.builder("x").topLevelRatio("passed", 1.0))
                .isInstanceOf(IllegalArgumentException.class);
    }
}
