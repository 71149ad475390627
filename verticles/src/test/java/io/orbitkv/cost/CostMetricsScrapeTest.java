package io.orbitkv.cost;

import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import org.junit.jupiter.api.Test;

import java.util.HashSet;
import java.util.List;
import java.util.OptionalLong;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.assertj.core.api.Assertions.assertThat;
import io.orbitkv.model.cost.CostEstimateKey;
import io.orbitkv.model.cost.CostPath;
import io.orbitkv.model.cost.ObservationOutcome;
import io.orbitkv.model.cost.ObservationRecord;
import io.orbitkv.model.cost.ObservedBytes;
import io.orbitkv.model.cost.ShadowAlternative;
import io.orbitkv.model.cost.ShadowRequest;
import io.orbitkv.model.cost.EstimateQuery;

/** Drives the role's handlers directly and reads the result the way /metrics will: a Prometheus scrape. */
class CostMetricsScrapeTest {

    private final PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    private final ManualClock clock = new ManualClock();
    private final CostRole role = new CostRole(clock, new CostMetrics(registry));

    @Test
    void scrapeCarriesPathOutcomeAndStageLabelsButNoIdentities() {
        CostEstimateKey read = TestKeys.ssdRead(4096);
        for (int i = 0; i < 5; i++) {
            role.onObservation(new ObservationRecord(read, ObservationOutcome.SUCCEEDED, OptionalLong.of(2_000),
                    OptionalLong.empty(), OptionalLong.of(50_000), ObservedBytes.of(4000, 4096)));
        }
        role.onObservation(TestKeys.outcome(read, ObservationOutcome.FAILED, 10_000));
        CostEstimateKey route = TestKeys.restore(CostPath.SSD_RESTORE_ROUTE, TestKeys.GPU1);
        role.onObservation(new ObservationRecord(route, ObservationOutcome.TIMED_OUT, OptionalLong.empty(),
                OptionalLong.of(3_000), OptionalLong.of(9_000_000_000L), ObservedBytes.logicalOnly(1 << 20)));
        role.onShadow(new ShadowRequest(route, List.of(ShadowAlternative.when(
                TestKeys.restore(CostPath.SSD_CUFILE_RESTORE_ROUTE, TestKeys.GPU1), () -> true))));
        clock.advanceNanos(7_000);
        role.onEstimate(new EstimateQuery(read));

        String text = registry.scrape();

        assertThat(text)
                .contains("orbitkv_cost_operations_total{outcome=\"succeeded\",path=\"ssd_read\"} 5")
                .contains("orbitkv_cost_operations_total{outcome=\"failed\",path=\"ssd_read\"} 1")
                .contains("orbitkv_cost_operations_total{outcome=\"timed_out\",path=\"ssd_restore_route\"} 1")
                .contains("orbitkv_cost_stage_seconds_count{outcome=\"succeeded\",path=\"ssd_read\",stage=\"service\"} 5")
                .contains("orbitkv_cost_stage_seconds_count{outcome=\"succeeded\",path=\"ssd_read\",stage=\"queue\"} 5")
                .contains("orbitkv_cost_stage_seconds_bucket{outcome=\"succeeded\",path=\"ssd_read\",stage=\"service\",le=\"1.0E-6\"} 0")
                .contains("orbitkv_cost_stage_seconds_bucket{outcome=\"succeeded\",path=\"ssd_read\",stage=\"service\",le=\"5.0E-5\"} 5")
                .contains("le=\"300.0\"")
                .contains("orbitkv_cost_stage_seconds_count{outcome=\"timed_out\",path=\"ssd_restore_route\",stage=\"admission\"} 1")
                .contains("orbitkv_cost_logical_bytes_total{path=\"ssd_read\"} 20000")
                .contains("orbitkv_cost_io_bytes_total{path=\"ssd_read\"} 20480")
                .contains("orbitkv_cost_logical_unknown_total{path=\"ssd_read\"} 1")
                .contains("orbitkv_cost_io_unknown_total{path=\"ssd_read\"} 1")
                .contains("orbitkv_cost_logical_bytes_total{path=\"ssd_restore_route\"} 1048576")
                .contains("orbitkv_cost_estimate_samples_total{path=\"ssd_read\"} 5")
                .contains("orbitkv_cost_prediction_error_seconds_count{path=\"ssd_read\"} 1")
                .contains("orbitkv_cost_estimate_age_seconds_count{path=\"ssd_read\"} 1")
                .contains("orbitkv_cost_estimate_entries 1")
                .contains("orbitkv_cost_estimate_evictions_total 0")
                .contains("orbitkv_cost_updates_dropped_total{message=\"observation\"} 0")
                .contains("orbitkv_cost_shadow_decisions_total{decision=\"unknown\",path=\"ssd_restore_route\"} 1");
        // Censored: a timed-out route has no total, and its I/O bytes are never counted at the route.
        assertThat(text)
                .doesNotContain("stage=\"total\"")
                .doesNotContain("orbitkv_cost_io_bytes_total{path=\"ssd_restore_route\"}")
                .doesNotContain("orbitkv_cost_io_unknown_total{path=\"ssd_restore_route\"}");
        // No resource, device or incarnation identity anywhere.
        assertThat(text).doesNotContain(TestKeys.STORE.name(), TestKeys.GPU1.name(),
                Long.toString(TestKeys.STORE_INCARNATION), "gpu_device", "ssd_store");

        Set<String> labelNames = new HashSet<>();
        Matcher labels = Pattern.compile("(?m)^orbitkv_cost_\\w+\\{([^}]*)}").matcher(text);
        while (labels.find()) {
            for (String pair : labels.group(1).split(",")) {
                labelNames.add(pair.substring(0, pair.indexOf('=')));
            }
        }
        assertThat(labelNames).isNotEmpty().isSubsetOf("path", "outcome", "stage", "decision", "message", "le");
    }
}
