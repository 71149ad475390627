package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.protocol.engine.InstanceRole;
import io.vertx.core.json.JsonObject;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The router summary on its own (no event stream), with cost observations off and no SSD capacity configured: the
 * counts follow the residency, and every figure nobody measured is null with its reason.
 */
@Timeout(120)
class KvSummaryIT {
    static final int PAGE = 64 * 1024;

    @RegisterExtension
    final RunningManager running = new RunningManager().with("events.summary.enabled", "true")
            .with("events.interval-ms", "5").with("events.summary.min-interval-ms", "0");

    @Test
    void withoutObservationsEveryEstimateIsUnknownAndCountsFollowTheResidency() throws Exception {
        assertThat(running.manager().eventsRole().orElseThrow().endpoint()).as("no event stream").isNull();
        try (OrbitKvClient client = running.unixClient();
             EngineSession session = client.register(RunningManager.identity("model-k", PAGE).build(),
                     InstanceRole.DECODE).await()) {
            String namespace = HexFormat.of().formatHex(session.namespace().toByteArray());
            PublishQueryRestoreIT.publish(session, "k1", 3);
            await().atMost(Duration.ofSeconds(20)).untilAsserted(() -> assertThat(dramBlocks(namespace)).isEqualTo(3));
            PublishQueryRestoreIT.publish(session, "k2", 2);
            await().atMost(Duration.ofSeconds(20)).untilAsserted(() -> assertThat(dramBlocks(namespace)).isEqualTo(5));
            JsonObject summary = new JsonObject(running.scrapePath("/kv/summary"));
            JsonObject ns = KvEventsIT.namespaceOf(summary, namespace);
            for (String tier : List.of("dram", "ssd")) {
                for (Object o : ns.getJsonObject("time_to_ready").getJsonArray(tier)) {
                    JsonObject estimate = (JsonObject) o;
                    assertThat(estimate.getValue("predicted_ms")).as(tier).isNull();
                    assertThat(estimate.getValue("samples")).isNull();
                    assertThat(estimate.getString("unknown_reason")).isEqualTo("DISABLED");
                }
            }
            JsonObject ssdRead = summary.getJsonObject("ssd_read");
            assertThat(ssdRead.getValue("capacity_bytes_per_second")).as("not configured: unknown").isNull();
            assertThat(ssdRead.getValue("free_bytes_per_second")).isNull();
        }
        assertThat(running.scrape()).doesNotContain("orbitkv_events_published_total");
    }

    private long dramBlocks(String namespace) throws Exception {
        JsonObject summary = new JsonObject(running.scrapePath("/kv/summary"));
        return KvEventsIT.namespaceOf(summary, namespace).getJsonObject("blocks").getLong("dram");
    }
}
