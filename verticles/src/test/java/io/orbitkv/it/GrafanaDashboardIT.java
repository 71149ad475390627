package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;

import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * {@code conf/grafana/orbitkv-manager.json}: it parses as a Grafana dashboard, it has the sections the design asks for
 * (pool, leases, queries, SSD tier, cost, Vert.x), and every metric name any of its queries uses is exported by a real
 * Manager (SSD tier and cost observation on) after a workload that touches every family.
 */
@Timeout(120)
class GrafanaDashboardIT {
    static final Path DASHBOARD = Path.of("..", "conf", "grafana", "orbitkv-manager.json");
    /** Our metric namespaces: an identifier of these in a query is a metric name; the rest is PromQL. */
    private static final Pattern METRIC = Pattern.compile("\\b((?:orbitkv|vertx)_[a-zA-Z0-9_]+)\\b");

    @RegisterExtension
    final RunningManager running = new RunningManager().with("pool.size", "16MiB").with("ssd.capacity", "96MiB")
            .with("cost.observations", "1");

    static JsonObject dashboard() throws Exception {
        return new JsonObject(Files.readString(DASHBOARD));
    }

    /** Every panel's every target expression, keyed by "panel title #n". */
    static Map<String, String> queries(JsonObject dashboard) {
        Map<String, String> queries = new LinkedHashMap<>();
        for (Object p : dashboard.getJsonArray("panels")) {
            JsonObject panel = (JsonObject) p;
            JsonArray targets = panel.getJsonArray("targets", new JsonArray());
            for (int i = 0; i < targets.size(); i++) {
                queries.put(panel.getString("title") + " #" + i, targets.getJsonObject(i).getString("expr"));
            }
        }
        for (Object v : dashboard.getJsonObject("templating").getJsonArray("list")) {
            JsonObject variable = (JsonObject) v;
            if ("query".equals(variable.getString("type"))) {
                queries.put("variable $" + variable.getString("name"), variable.getString("definition"));
            }
        }
        return queries;
    }

    @Test
    void theDashboardParsesAndHasEverySection() throws Exception {
        JsonObject dashboard = dashboard();
        assertThat(dashboard.getString("title")).isNotBlank();
        assertThat(dashboard.getString("uid")).isNotBlank();
        assertThat(dashboard.getInteger("schemaVersion")).isPositive();
        List<String> rows = new ArrayList<>();
        for (Object p : dashboard.getJsonArray("panels")) {
            JsonObject panel = (JsonObject) p;
            assertThat(panel.getString("type")).isNotBlank();
            assertThat(panel.getJsonObject("gridPos")).isNotNull();
            if ("row".equals(panel.getString("type"))) {
                rows.add(panel.getString("title").toLowerCase(java.util.Locale.ROOT));
            } else {
                assertThat(panel.getJsonArray("targets")).as(panel.getString("title")).isNotEmpty();
                assertThat(panel.getJsonObject("datasource").getString("uid")).isEqualTo("${datasource}");
            }
        }
        assertThat(rows).anyMatch(r -> r.contains("pool")).anyMatch(r -> r.contains("lease"))
                .anyMatch(r -> r.contains("quer")).anyMatch(r -> r.contains("ssd")).anyMatch(r -> r.contains("cost"))
                .anyMatch(r -> r.contains("vert.x"));
        assertThat(queries(dashboard)).isNotEmpty().allSatisfy((panel, expr) -> assertThat(expr).as(panel).isNotBlank());
    }

    @Test
    void everyMetricAQueryUsesIsExportedByARealManager() throws Exception {
        String scrape = ManagerMetricsIT.scrapeAfterAWorkload(running);
        Files.createDirectories(Path.of("target"));
        Files.writeString(Path.of("target", "manager-metrics-scrape.txt"), scrape);
        Set<String> exported = ManagerMetricsIT.sampleNames(scrape);
        Set<String> missing = new TreeSet<>();
        for (Map.Entry<String, String> query : queries(dashboard()).entrySet()) {
            Matcher names = METRIC.matcher(query.getValue());
            int found = 0;
            while (names.find()) {
                found++;
                if (!exported.contains(names.group(1))) {
                    missing.add(names.group(1) + " (" + query.getKey() + ")");
                }
            }
            assertThat(found).as("%s names no orbitkv_/vertx_ metric: %s", query.getKey(), query.getValue()).isPositive();
        }
        assertThat(missing).as("metrics the dashboard queries but the Manager does not export").isEmpty();
    }
}
