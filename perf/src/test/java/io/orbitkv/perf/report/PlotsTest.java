package io.orbitkv.perf.report;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

class PlotsTest {

    @Test
    void hitRatioVsCapacity(@TempDir Path dir) throws IOException {
        Path png = Plots.hitRatioVsCapacity(dir.resolve("hit.png"), "hit ratio", List.of(
                Plots.Series.measured("LRU", new double[] {0, 2_000, 5_000, 10_000}, new double[] {0, 0.14, 0.28, 0.42}),
                Plots.Series.horizontal("infinite", 0.64, 0, 10_000)), 800, 600);

        PlotsTestSupport.assertDrawnPng(png, 800, 600);
    }

    @Test
    void latencyCdfOnALogAxisToleratesZeroLatency(@TempDir Path dir) throws IOException {
        LatencyRecorder fast = LatencyRecorder.singleWriter();
        LatencyRecorder slow = LatencyRecorder.singleWriter();
        fast.recordNanos(0);
        for (long i = 1; i <= 5_000; i++) {
            fast.recordNanos(i * 10);
            slow.recordNanos(i * 1_000);
        }

        Path png = Plots.latencyCdf(dir.resolve("sub/cdf.png"), "latency", List.of(
                Plots.Series.latencyCdf("fast", fast.summary().cdf()),
                Plots.Series.latencyCdf("slow", slow.summary().cdf())), 640, 480);

        PlotsTestSupport.assertDrawnPng(png, 640, 480);
    }

    @Test
    void throughputVsConcurrency(@TempDir Path dir) throws IOException {
        double[] concurrency = {1, 2, 4, 8, 16};
        Path png = Plots.throughputVsConcurrency(dir.resolve("tput.png"), "throughput", "ops/s", List.of(
                Plots.Series.measured("OrbitKV", concurrency, new double[] {1e4, 1.9e4, 3.5e4, 5e4, 5.2e4}),
                Plots.Series.measured("baseline", concurrency, new double[] {2e4, 4e4, 8e4, 1.6e5, 3.2e5})),
                Plots.DEFAULT_WIDTH, Plots.DEFAULT_HEIGHT);

        PlotsTestSupport.assertDrawnPng(png, Plots.DEFAULT_WIDTH, Plots.DEFAULT_HEIGHT);
    }

    @Test
    void rejectsMismatchedSeriesAndEmptyPlots(@TempDir Path dir) {
        assertThatThrownBy(() -> Plots.Series.measured("bad", new double[] {1, 2}, new double[] {1}))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("bad");
        assertThatThrownBy(() -> Plots.hitRatioVsCapacity(dir.resolve("x.png"), "t", List.of(), 10, 10))
                .isInstanceOf(IllegalArgumentException.class);
    }
}
