package io.orbitkv.perf.cost;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.orbitkv.perf.Benchmarks;
import io.vertx.core.json.JsonObject;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** {@code bench cost-overhead}: drained clocks, SSD reads observed, exact observation counts, bootstrap pass rule. */
class CostOverheadBenchTest {

    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void aSmallRunObservesExactlyWhatItsOnRoundsDidAndNothingInItsOffRounds() {
        // A budget no noise can exceed: this run checks the accounting, not the overhead.
        JsonObject report = Benchmarks.run("cost-overhead", new String[] {"--rounds=4", "--requests=30",
                "--pool-size=16MiB", "--requery-every=5", "--requery-distance=600", "--warmup-requests=600",
                "--resamples=200", "--budget=100"});

        assertThat(report.getJsonArray("failures")).isEmpty();
        assertThat(report.getBoolean("passed")).isTrue();
        JsonObject figures = report.getJsonObject("figures");
        JsonObject on = figures.getJsonObject("observations_on_counted");
        JsonObject off = figures.getJsonObject("observations_off_counted");
        assertThat(on.getLong("ssd_reads")).as("re-queried pages read back from SSD").isPositive();
        assertThat(on.getJsonObject("operations_by_path").getLong("ssd_read", 0L)
                + on.getJsonObject("operations_by_path").getLong("ssd_read_bounced", 0L)).isEqualTo(on.getLong("ssd_reads"));
        // Host-ready routes: one per READY answer (admission), plus one per plan that read pages back from SSD (planning).
        assertThat(on.getLong("planning_route_samples")).isPositive();
        assertThat(on.getJsonObject("operations_by_path").getLong("host_ready_route"))
                .isEqualTo(on.getLong("ready_answers") + on.getLong("planning_route_samples"));
        assertThat(on.getLong("ssd_writes_committed")).isPositive();
        assertThat(off.getLong("operations")).isZero();
        assertThat(off.getLong("shadow_decisions")).isZero();
        assertThat(off.getLong("ssd_reads")).as("the off side does the same SSD work").isPositive();
        assertThat(figures.getDouble("observations_on_cpu_nanos_per_request")).isPositive();
        assertThat(report.getJsonObject("baselines").getDouble("observations_off_cpu_nanos_per_request")).isPositive();
        assertThat(report.getJsonObject("ratios").getDouble("cpu_per_request_regression")).isNotNull();
        JsonObject interval = figures.getJsonObject("throughput_regression_interval");
        assertThat(interval.getDouble("upper")).isGreaterThanOrEqualTo(interval.getDouble("median"));
        assertThat(report.getDouble("throughput_regression_upper95")).isEqualTo(interval.getDouble("upper"));
        assertThat(report.getDouble("p50_regression_upper95")).isNotNull();
    }

    @Test
    void anObservationInAnOffRoundOrAMissingOneInAnOnRoundIsAMismatch() {
        var none = new CostOverheadBench.ObservationCounts(Map.of(), 0, 0);
        assertThat(new CostOverheadBench.Expected(false, 10, 1, 5, 0).mismatch(none)).isNull();
        var stray = new CostOverheadBench.ObservationCounts(Map.of("host_ready_route", 1L), 0, 0);
        assertThat(new CostOverheadBench.Expected(false, 10, 1, 5, 0).mismatch(stray)).contains("observation was off");

        var complete = new CostOverheadBench.ObservationCounts(Map.of("host_ready_route", 10L, "ssd_read", 1L,
                "ssd_write", 5L, "pool_copy_out", 5L, "ssd_save_staged_route", 5L), 6, 0);
        assertThat(new CostOverheadBench.Expected(true, 10, 1, 5, 0).mismatch(complete)).isNull();
        var noRead = new CostOverheadBench.ObservationCounts(Map.of("host_ready_route", 10L,
                "ssd_write", 5L, "pool_copy_out", 5L, "ssd_save_staged_route", 5L), 5, 0);
        assertThat(new CostOverheadBench.Expected(true, 10, 1, 5, 0).mismatch(noRead)).contains("expected");
        // A plan that read pages back from SSD adds its complete-route sample under host_ready_route.
        var withRoute = new CostOverheadBench.ObservationCounts(Map.of("host_ready_route", 11L, "ssd_read", 1L,
                "ssd_write", 5L, "pool_copy_out", 5L, "ssd_save_staged_route", 5L), 6, 0);
        assertThat(new CostOverheadBench.Expected(true, 10, 1, 5, 1).mismatch(withRoute)).isNull();
        assertThat(new CostOverheadBench.Expected(true, 10, 1, 5, 0).mismatch(withRoute)).contains("expected");
        var dropped = new CostOverheadBench.ObservationCounts(complete.byPath(), 6, 2);
        assertThat(new CostOverheadBench.Expected(true, 10, 1, 5, 0).mismatch(dropped)).contains("dropped");
    }

    @Test
    void aRequeryDistanceThatCannotReachAnEvictedPageOnSsdIsRefused() {
        assertThatThrownBy(() -> Benchmarks.run("cost-overhead", new String[] {"--pool-size=32MiB", "--requery-distance=100"}))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("--requery-distance");
    }
}
