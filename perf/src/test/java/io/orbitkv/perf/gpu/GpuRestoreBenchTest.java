package io.orbitkv.perf.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import io.orbitkv.nativeio.cuda.CudaRuntime;
import io.orbitkv.perf.Benchmarks;
import io.orbitkv.perf.report.BenchReport;
import io.vertx.core.json.JsonObject;
import org.junit.jupiter.api.Test;

/** Without a GPU the bench does not pretend: its report fails, naming the probe's cause, and measures nothing. */
class GpuRestoreBenchTest {

    @Test
    void withoutAGpuTheReportFailsWithTheCauseAndNoFigures() {
        assumeFalse(CudaRuntime.isAvailable(), "a GPU is present: perf/gpu/qualify.sh runs the real bench");
        JsonObject report = Benchmarks.run("gpu-restore", new String[] {"--pages", "4", "--rounds", "1"});
        assertThat(BenchReport.passed(report)).isFalse();
        assertThat(report.getJsonArray(BenchReport.FAILURES).getString(0))
                .startsWith("CUDA unavailable: ").contains(CudaRuntime.unavailabilityCause().getMessage());
        assertThat(report.getJsonObject("figures").isEmpty()).isTrue();
        assertThat(report.getJsonObject("config").getInteger("pages")).isEqualTo(4);
    }
}
