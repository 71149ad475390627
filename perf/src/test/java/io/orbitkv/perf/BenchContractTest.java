package io.orbitkv.perf;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.perf.replay.ReplayCommand;
import io.orbitkv.perf.trace.SharedTraces;
import io.vertx.core.json.JsonObject;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** The output contract: the last stdout line is one JSON object with the five sections. */
class BenchContractTest {
    private static final List<String> SECTIONS = List.of("bench", "figures", "baselines", "ratios", "config", "machine");

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void replayPrintsTheReportAsTheLastStdoutLine(@TempDir Path out) {
        Path trace = SharedTraces.syntheticOrSkip();
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        PrintStream original = System.out;
        int exit;
        System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
        try {
            exit = new CommandLine(new ReplayCommand()).execute("--trace", trace.toString(), "--out", out.toString(),
                    "--limit", "40", "--pool-blocks", "256");
        } finally {
            System.setOut(original);
        }
        assertThat(exit).isZero();
        String[] lines = captured.toString(StandardCharsets.UTF_8).strip().split("\n");
        JsonObject report = new JsonObject(lines[lines.length - 1]);
        assertThat(report.fieldNames()).containsAll(SECTIONS);
        assertThat(report.getString("bench")).isEqualTo("replay");
        assertThat(report.getJsonObject("machine").getInteger("cores")).isPositive();
        assertThat(report.getJsonObject("ratios").isEmpty()).isFalse();
    }

    @Test
    void jmhBenchmarkListIsOnTheClassPath() throws IOException {
        try (InputStream list = getClass().getResourceAsStream("/META-INF/BenchmarkList")) {
            assertThat(list).as("META-INF/BenchmarkList from the JMH annotation processor").isNotNull();
            String text = new String(list.readAllBytes(), StandardCharsets.UTF_8);
            assertThat(text).contains("AllocatorBenchmark", "ImageStoreBenchmark", "ChecksumBenchmark", "ExtentHeaderBenchmark");
        }
    }
}
