package io.orbitkv.perf.replay;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import java.util.List;
import org.junit.jupiter.api.Test;

/** Time to first token from arrival: engine queueing, reads queued on each Manager's devices, copy and recompute. */
class ArrivalModelTest {
    private static final long PAGE = 1_000_000; // logical bytes
    // prefill 1,000 tokens/s; SSD 10 MB/s (100 ms a page); peer 5 MB/s (200 ms); host-to-device 100 MB/s (10 ms)
    private static final ArrivalModel.Rates RATES = new ArrivalModel.Rates(1_000, 10e6, "test", 5e6, "test", 100e6, "test");

    private static ArrivalModel.Settings settings(int engines, double speed, long hintLeadNanos) {
        return new ArrivalModel.Settings(1, engines, speed, 100, PAGE, hintLeadNanos, RATES);
    }

    private static double ms(long nanos) {
        return nanos / 1e6;
    }

    @Test
    void aMissIsItsRecomputeAndAHitAddsItsCopy() {
        var miss = ArrivalModel.run(List.of(new ArrivalModel.Served(0, 500, 0, 0, 0, 0, 0)), settings(1, 1, -1));
        var hit = ArrivalModel.run(List.of(new ArrivalModel.Served(0, 500, 0, 2, 0, 0, 3_000_000)), settings(1, 1, -1));

        assertThat(ms(miss.ttft().maxNanos())).isCloseTo(500, within(1.0));
        // 3 ms to READY + 2 pages copied (20 ms) + 300 tokens recomputed (300 ms)
        assertThat(ms(hit.ttft().maxNanos())).isCloseTo(323, within(1.0));
    }

    @Test
    void aRequestWaitsForAFreeEngineFromItsArrival() {
        List<ArrivalModel.Served> two = List.of(new ArrivalModel.Served(0, 500, 0, 0, 0, 0, 0),
                new ArrivalModel.Served(100, 500, 0, 0, 0, 0, 0));

        var oneEngine = ArrivalModel.run(two, settings(1, 1, -1));
        var twoEngines = ArrivalModel.run(two, settings(2, 1, -1));
        var halfSpeed = ArrivalModel.run(two, settings(1, 0.5, -1));

        // The second arrives at 100 ms and starts at 500 ms: 400 ms wait + 500 ms prefill.
        assertThat(ms(oneEngine.ttft().maxNanos())).isCloseTo(900, within(1.0));
        assertThat(ms(oneEngine.engineWait().maxNanos())).isCloseTo(400, within(1.0));
        assertThat(ms(twoEngines.ttft().maxNanos())).isCloseTo(500, within(1.0));
        // At half speed it arrives at 200 ms: 300 ms wait.
        assertThat(ms(halfSpeed.engineWait().maxNanos())).isCloseTo(300, within(1.0));
    }

    @Test
    void speedZeroKeepsTheOrderAndDropsTheGaps() {
        var result = ArrivalModel.run(List.of(new ArrivalModel.Served(0, 500, 0, 0, 0, 0, 0),
                new ArrivalModel.Served(10_000, 500, 0, 0, 0, 0, 0)), settings(1, 0, -1));

        assertThat(result.engineWait().maxNanos()).isZero();
        assertThat(ms(result.ttft().maxNanos())).isCloseTo(500, within(1.0));
        assertThat(ArrivalModel.describe(settings(1, 0, -1)).getString("time")).contains("gaps dropped");
    }

    @Test
    void readsQueueBehindEachOtherOnTheManagersSsdAndOverlapItsMeasuredTime() {
        // Two engines, two requests at once, each 2 SSD pages (200 ms at the device rate) and 50 ms to READY measured.
        List<ArrivalModel.Served> two = List.of(new ArrivalModel.Served(0, 200, 0, 2, 2, 0, 50_000_000),
                new ArrivalModel.Served(0, 200, 0, 2, 2, 0, 50_000_000));

        var result = ArrivalModel.run(two, settings(2, 1, -1));

        // First: read done at 200 ms (the 50 ms overlap it), + 20 ms copy, nothing to recompute.
        assertThat(ms(result.ttft().minNanos())).isCloseTo(220, within(1.0));
        // Second: its read waits for the first: done at 400 ms.
        assertThat(ms(result.ttft().maxNanos())).isCloseTo(420, within(1.0));
        assertThat(ms(result.ssdRead().maxNanos())).isCloseTo(400, within(1.0));
    }

    @Test
    void peerReadsUseTheLinkRate() {
        var result = ArrivalModel.run(List.of(new ArrivalModel.Served(0, 100, 0, 1, 0, 1, 0)), settings(1, 1, -1));

        assertThat(ms(result.ttft().maxNanos())).isCloseTo(200 + 10, within(1.0));
    }

    @Test
    void prefetchStartsTheReadsWhileTheRequestWaitsForAnEngine() {
        // The second request waits 500 ms for the one engine; its SSD page (100 ms) can be read in that wait.
        List<ArrivalModel.Served> two = List.of(new ArrivalModel.Served(0, 500, 0, 0, 0, 0, 0),
                new ArrivalModel.Served(0, 100, 0, 1, 1, 0, 0));

        var without = ArrivalModel.run(two, settings(1, 1, -1));
        var withLead = ArrivalModel.run(two, settings(1, 1, 300_000_000));

        assertThat(ms(without.ttft().maxNanos())).isCloseTo(500 + 100 + 10, within(1.0));
        assertThat(ms(withLead.ttft().maxNanos())).isCloseTo(500 + 10, within(1.0));
    }
}
