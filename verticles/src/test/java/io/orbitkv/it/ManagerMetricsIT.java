package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.protocol.engine.GroupChain;
import io.orbitkv.protocol.engine.InstanceRole;
import io.orbitkv.protocol.engine.QueryReply;
import io.orbitkv.protocol.engine.QueryStatus;
import java.time.Duration;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * {@code /metrics} of a real Manager: Vert.x's own event-bus, HTTP/gRPC server and pool meters beside the roles'
 * {@code orbitkv_*} ones, with no label that could name a caller or a request, each Manager in the JVM with its own.
 */
@Timeout(120)
class ManagerMetricsIT {
    static final int PAGE = 1 << 20;
    private static final Pattern LABEL = Pattern.compile("([a-zA-Z_][a-zA-Z0-9_]*)=\"");

    @RegisterExtension
    final RunningManager running = new RunningManager().with("pool.size", "16MiB").with("ssd.capacity", "96MiB")
            .with("cost.observations", "1");

    @RegisterExtension
    final RunningManager other = new RunningManager().with("pool.size", "16MiB").with("ssd.enabled", "false");

    /**
     * A workload that touches every family the dashboard shows: publishes, hits, a miss, an eviction, SSD writes and
     * an SSD read back, cost observations; returns the scrape afterwards.
     */
    static String scrapeAfterAWorkload(RunningManager running) throws Exception {
        try (OrbitKvClient client = running.unixClient();
             EngineSession session = client.register(RunningManager.identity("model-metrics", PAGE).build(),
                     InstanceRole.PREFILL_AND_DECODE).await()) {
            List<ByteString> first = PublishQueryRestoreIT.publish(session, "first", 6);
            await().atMost(Duration.ofSeconds(20)).until(() -> running.metric("orbitkv_ssd_keys") >= 6.0);
            QueryReply hit = session.query(List.of(chain(first))).await();
            assertThat(hit.getStatus()).isEqualTo(QueryStatus.READY);
            session.release(hit.getLease().getLeaseId()).await();
            QueryReply miss = session.query(List.of(chain(io.orbitkv.client.sim.SyntheticKv.chain(99, 2)))).await();
            assertThat(miss.getStatus()).isEqualTo(QueryStatus.MISS);
            PublishQueryRestoreIT.publish(session, "second", 8);
            PublishQueryRestoreIT.publish(session, "third", 8);
            QueryReply fromSsd = session.query(List.of(chain(first))).await();
            assertThat(fromSsd.getStatus()).isEqualTo(QueryStatus.READY);
            session.release(fromSsd.getLease().getLeaseId()).await();
            await().atMost(Duration.ofSeconds(10)).until(() -> running.scrape()
                    .contains("orbitkv_cost_operations_total{outcome=\"succeeded\",path=\"ssd_read\"}"));
            client.ping().await();
        }
        return running.scrape();
    }

    static GroupChain chain(List<ByteString> hashes) {
        return GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes).build();
    }

    @Test
    void vertxOwnMetersAppearBesideOrbitkvOnes() throws Exception {
        String scrape = scrapeAfterAWorkload(running);

        assertThat(scrape).contains("orbitkv_pool_bytes ", "orbitkv_leases_active ");
        // The gRPC server is an HTTP/2 server: its calls are counted by method and status, per server address.
        assertThat(sampleNames(scrape)).anyMatch(n -> n.startsWith("vertx_http_server_requests"))
                .anyMatch(n -> n.startsWith("vertx_http_server_active_connections"))
                .anyMatch(n -> n.startsWith("vertx_eventbus_"))
                .anyMatch(n -> n.startsWith("vertx_pool_"));
        assertThat(scrape).containsPattern("vertx_http_server_requests_total\\{[^}]*method=\"POST\"");
    }

    @Test
    void noVertxMeterCarriesALabelThatCouldNameACallerOrARequest() throws Exception {
        String scrape = scrapeAfterAWorkload(running);
        for (String line : scrape.split("\n")) {
            if (!line.startsWith("vertx_")) {
                continue;
            }
            Matcher labels = LABEL.matcher(line.substring(0, Math.max(line.indexOf('}'), 0) + 1));
            while (labels.find()) {
                assertThat(labels.group(1)).as(line).isIn("local", "method", "code", "side", "failure", "pool_type",
                        "pool_name", "le", "quantile");
            }
        }
        assertThat(scrape).doesNotContain("remote=\"", "path=\"/", "route=\"", "address=\"");
    }

    @Test
    void eachManagerInTheJvmScrapesOnlyItsOwnVertxMeters() throws Exception {
        try (OrbitKvClient client = other.tcpClient()) {
            for (int i = 0; i < 3; i++) {
                client.ping().await();
            }
        }
        String mine = scrapeAfterAWorkload(running);
        String theirs = other.scrape();
        // Vert.x keys its backends by registry name JVM-wide: with a shared name both would count every call.
        assertThat(grpcCalls(theirs)).isEqualTo(3.0);
        assertThat(grpcCalls(mine)).isGreaterThan(10.0);
    }

    /** gRPC calls (HTTP/2 POSTs) the scraped Manager's servers answered. */
    static double grpcCalls(String scrape) {
        double calls = 0;
        for (String line : scrape.split("\n")) {
            if (line.startsWith("vertx_http_server_requests_total{") && line.contains("method=\"POST\"")) {
                calls += Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
            }
        }
        return calls;
    }

    static java.util.Set<String> sampleNames(String scrape) {
        java.util.Set<String> names = new java.util.TreeSet<>();
        for (String line : scrape.split("\n")) {
            if (line.isBlank() || line.startsWith("#")) {
                continue;
            }
            int end = line.indexOf('{');
            names.add(end >= 0 ? line.substring(0, end) : line.substring(0, line.indexOf(' ')));
        }
        return names;
    }
}
