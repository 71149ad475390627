package io.orbitkv.perf.replay;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.orbitkv.perf.engine.TierCounters;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The modelled TTFT adds the logical bytes' transfer times, or says in the report that it leaves the SSD part out. */
class TtftModelTest {
    private static final long LOGICAL_PAGE = 131_072L * 512; // 64 MiB

    private static TraceReplayer.Options options(double h2d, double ssdRate) {
        return new TraceReplayer.Options(Path.of("t"), null, 0, 0, 131_072, 512, 1024, 100, null, 10_000, 1, 16,
                64L << 20, h2d, ssdRate);
    }

    private static TraceReplayer.Counters oneRequest(long ssdPages) {
        TraceReplayer.Counters counters = new TraceReplayer.Counters();
        counters.hitBlocks.add(2);
        counters.costs.add(new TraceReplayer.RequestCost(1_000_000, 2, ssdPages, 10_000_000));
        return counters;
    }

    private static TierCounters ssdPagesRead(long pages) {
        return new TierCounters(2, 0, pages, 0, 0, 0, 0, 0, 0, 0, 0, Map.of());
    }

    @Test
    void ttftIsTimeToReadyPlusSsdReadPlusHostToDevicePlusPrefill() {
        var model = TraceReplayer.TtftModel.of(options(1e9, 1e8), oneRequest(1), ssdPagesRead(1), 0, true);

        double expectedMs = 1 + 10 + 1e3 * LOGICAL_PAGE / 1e8 + 1e3 * 2 * LOGICAL_PAGE / 1e9;
        assertThat(model.ttft().summary().meanNanos() / 1e6).isCloseTo(expectedMs, within(expectedMs * 0.01));
        assertThat(model.transferJson().getString("ssd_read")).startsWith("included");
        assertThat(model.ratesJson(options(1e9, 1e8)).getString("ssd_read_source")).contains("given");
    }

    @Test
    void theMeasuredSsdRateIsUsedWhenNoneIsGiven() {
        var model = TraceReplayer.TtftModel.of(options(1e9, 0), oneRequest(1), ssdPagesRead(1), 2e8, true);

        double expectedMs = 1 + 10 + 1e3 * LOGICAL_PAGE / 2e8 + 1e3 * 2 * LOGICAL_PAGE / 1e9;
        assertThat(model.ttft().summary().meanNanos() / 1e6).isCloseTo(expectedMs, within(expectedMs * 0.01));
        assertThat(model.ratesJson(options(1e9, 0)).getString("ssd_read_source")).startsWith("measured in this run");
    }

    @Test
    void withoutTheManagersCountersTheSsdPartIsLeftOutAndSaidSo() {
        var model = TraceReplayer.TtftModel.of(options(1e9, 1e8), oneRequest(-1), null, 0, false);

        double expectedMs = 1 + 10 + 1e3 * 2 * LOGICAL_PAGE / 1e9;
        assertThat(model.ttft().summary().meanNanos() / 1e6).isCloseTo(expectedMs, within(expectedMs * 0.01));
        assertThat(model.transferJson().getString("ssd_read")).startsWith("left out");
    }

    @Test
    void severalEnginesApportionTheRunsSsdPagesByHitBlocks() {
        TraceReplayer.Counters counters = oneRequest(-1);
        var model = TraceReplayer.TtftModel.of(options(1e9, 1e8), counters, ssdPagesRead(1), 0, true);

        double expectedMs = 1 + 10 + 1e3 * LOGICAL_PAGE / 1e8 + 1e3 * 2 * LOGICAL_PAGE / 1e9;
        assertThat(model.ttft().summary().meanNanos() / 1e6).isCloseTo(expectedMs, within(expectedMs * 0.01));
        assertThat(model.transferJson().getString("ssd_read")).startsWith("included, apportioned");
    }
}
