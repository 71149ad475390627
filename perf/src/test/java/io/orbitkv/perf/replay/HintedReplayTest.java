package io.orbitkv.perf.replay;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.perf.trace.SharedTraces;
import io.vertx.core.json.JsonObject;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The prefetch replay on the shared synthetic trace: hints sent L ms ahead make more requests ready at their first use
 * than the same requests without hints, on fresh Managers with the SSD tier, every byte verified, no lease left.
 */
class HintedReplayTest {

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void hintsAheadOfFirstUseMakeSsdPagesReadyByThen(@TempDir Path out) throws Exception {
        Path trace = SharedTraces.syntheticOrSkip();
        JsonObject report = HintedReplay.run(new TraceReplayer.Options(trace, out, 300, 0, 131072, 512, 1024, 64,
                null, 10_000, 1, 16, 64L << 20), 10, line -> { });
        System.err.println(report.encodePrettily());
        assertThat(report.getBoolean("passed")).isTrue();
        JsonObject on = report.getJsonObject("figures").getJsonObject("prefetch_on");
        JsonObject off = report.getJsonObject("figures").getJsonObject("prefetch_off");
        assertThat(on.getLong("requests")).isEqualTo(off.getLong("requests")).isPositive();
        assertThat(off.getDouble("ssd_pages_read")).as("the trace reaches back to SSD").isPositive();
        assertThat(off.getDouble("ready_at_first_use_fraction")).as("without hints some reads wait").isLessThan(1.0);
        assertThat(on.getDouble("ready_at_first_use_fraction"))
                .isGreaterThan(off.getDouble("ready_at_first_use_fraction"));
        assertThat(on.getJsonObject("boundary_choices").getDouble("longest")).isPositive();
        assertThat(on.getLong("mismatched_pages") + off.getLong("mismatched_pages")).isZero();
        assertThat(out.resolve(HintedReplay.REPORT_FILE)).isRegularFile();
    }
}
