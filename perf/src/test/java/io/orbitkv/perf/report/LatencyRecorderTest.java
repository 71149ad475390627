package io.orbitkv.perf.report;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;
import static org.assertj.core.data.Percentage.withPercentage;

class LatencyRecorderTest {

    @Test
    void summarisesAUniformDistributionWithinHistogramPrecision() {
        LatencyRecorder recorder = LatencyRecorder.singleWriter();
        for (long nanos = 1; nanos <= 100_000; nanos++) {
            recorder.recordNanos(nanos);
        }

        LatencySummary summary = recorder.summary();

        assertThat(summary.count()).isEqualTo(100_000);
        assertThat(summary.meanNanos()).isCloseTo(50_000.5, withPercentage(0.1));
        assertThat(summary.minNanos()).isEqualTo(1);
        assertThat(summary.maxNanos()).isCloseTo(100_000, withPercentage(0.1));
        assertThat(summary.p50Nanos()).isCloseTo(50_000, withPercentage(0.1));
        assertThat(summary.p90Nanos()).isCloseTo(90_000, withPercentage(0.1));
        assertThat(summary.p99Nanos()).isCloseTo(99_000, withPercentage(0.1));
        assertThat(summary.p999Nanos()).isCloseTo(99_900, withPercentage(0.1));
    }

    @Test
    void cdfIsIncreasingEndsAtOneAndTracksTheDistribution() {
        LatencyRecorder recorder = LatencyRecorder.singleWriter();
        for (long nanos = 1; nanos <= 10_000; nanos++) {
            recorder.recordNanos(nanos * 1_000);
        }

        List<LatencySummary.CdfPoint> cdf = recorder.summary().cdf();

        assertThat(cdf.size()).isBetween(10, 500);
        for (int i = 1; i < cdf.size(); i++) {
            assertThat(cdf.get(i).latencyNanos()).isGreaterThan(cdf.get(i - 1).latencyNanos());
            assertThat(cdf.get(i).cumulativeFraction()).isGreaterThan(cdf.get(i - 1).cumulativeFraction());
        }
        assertThat(cdf.getLast().cumulativeFraction()).isEqualTo(1.0);
        assertThat(cdf.getLast().latencyNanos()).isCloseTo(10_000_000L, withPercentage(0.1));
        // Uniform on (0, 10 ms]: the fraction at latency x is about x / 10 ms.
        for (LatencySummary.CdfPoint point : cdf) {
            assertThat(point.cumulativeFraction()).isCloseTo(point.latencyNanos() / 10_000_000.0, within(0.01));
        }
    }

    @Test
    void concurrentWritersLoseNothingWhileSummariesAreTaken() throws InterruptedException {
        LatencyRecorder recorder = LatencyRecorder.concurrent();
        int writers = 4;
        int perWriter = 50_000;
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> threads = new ArrayList<>();
        for (int w = 0; w < writers; w++) {
            long value = (w + 1) * 1_000L;
            threads.add(Thread.ofPlatform().start(() -> {
                awaitQuietly(start);
                for (int i = 0; i < perWriter; i++) {
                    recorder.recordNanos(value);
                }
            }));
        }
        start.countDown();
        long lastCount = 0;
        // Summaries taken while writers run must only grow (each interval is folded in exactly once).
        while (threads.stream().anyMatch(Thread::isAlive)) {
            long count = recorder.summary().count();
            assertThat(count).isGreaterThanOrEqualTo(lastCount);
            lastCount = count;
        }
        for (Thread thread : threads) {
            thread.join();
        }

        LatencySummary summary = recorder.summary();
        assertThat(summary.count()).isEqualTo((long) writers * perWriter);
        assertThat(summary.meanNanos()).isCloseTo(2_500, withPercentage(0.1));
        assertThat(summary.maxNanos()).isCloseTo(4_000, withPercentage(0.1));
    }

    @Test
    void coordinatedOmissionCorrectionBackFillsStalledRequests() {
        LatencyRecorder recorder = LatencyRecorder.singleWriter();
        recorder.recordNanos(10_000, 1_000);
        // One 10 µs stall with requests due every 1 µs: 9 more requests would have waited 9, 8, ... 1 µs.
        assertThat(recorder.summary().count()).isEqualTo(10);
    }

    @Test
    void resetForgetsWarmUpAndRecordSinceMeasuresElapsedTime() {
        LatencyRecorder recorder = LatencyRecorder.concurrent();
        recorder.recordNanos(1_000_000_000L);
        recorder.reset();
        long start = System.nanoTime();
        long recorded = recorder.recordSince(start);

        LatencySummary summary = recorder.summary();
        assertThat(summary.count()).isEqualTo(1);
        assertThat(recorded).isBetween(0L, 1_000_000_000L);
        assertThat(summary.maxNanos()).isLessThan(1_000_000_000L);
    }

    @Test
    void emptyRecorderSummarisesToZerosAndRejectsNegativeLatency() {
        LatencyRecorder recorder = LatencyRecorder.concurrent();
        assertThat(recorder.summary()).isEqualTo(new LatencySummary(0, 0, 0, 0, 0, 0, 0, 0, List.of()));
        assertThatThrownBy(() -> recorder.recordNanos(-1)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void jsonCarriesTheScalarFiguresAndOptionallyTheCdf() {
        LatencyRecorder recorder = LatencyRecorder.singleWriter();
        recorder.recordNanos(100);
        recorder.recordNanos(300);

        var json = recorder.summary().toJson();
        assertThat(json.fieldNames()).containsExactly(
                "count", "mean_ns", "min_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns");
        assertThat(json.getLong("count")).isEqualTo(2);
        assertThat(json.getDouble("mean_ns")).isEqualTo(200.0);
        assertThat(recorder.summary().toJsonWithCdf().getJsonArray("cdf").getJsonArray(0).getLong(0)).isEqualTo(100);
    }

    private static void awaitQuietly(CountDownLatch latch) {
        try {
            latch.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
