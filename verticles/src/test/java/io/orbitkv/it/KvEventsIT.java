package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.events.EventsVerticle;
import io.orbitkv.model.ResidencySnapshot;
import io.orbitkv.model.ResidentKey;
import io.orbitkv.protocol.engine.GroupChain;
import io.orbitkv.protocol.engine.InstanceRole;
import io.orbitkv.protocol.engine.QueryReply;
import io.orbitkv.protocol.engine.QueryStatus;
import io.orbitkv.storage.StorageProxy;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.time.Duration;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * KV events and the router summary on a real Manager: a subscriber that knows only the event stream rebuilds exactly
 * the Manager's DRAM and SSD residency through evictions, SSD writes and read-backs, a range of batches it missed
 * (caught up through replay), and a Manager restart (cleared, then the recovered SSD extents).
 */
@Timeout(180)
class KvEventsIT {
    static final int PAGE = 1 << 20;

    @RegisterExtension
    final RunningManager running = new RunningManager().with("pool.size", "16MiB").with("ssd.capacity", "96MiB")
            .with("cost.observations", "1").with("events.endpoint", "tcp://127.0.0.1:*")
            .with("events.replay-endpoint", "tcp://127.0.0.1:*").with("events.interval-ms", "5")
            .with("events.summary.min-interval-ms", "0").with("events.summary.ssd-read-capacity", "1GiB");

    /** The Manager's own residency (the storage role's snapshot) as "namespace/hash" keys: [dram, ssd]. */
    static List<Set<String>> residency(RunningManager running) throws Exception {
        ResidencySnapshot snapshot = new StorageProxy(running.manager().vertx()).residencySnapshot(1 << 20)
                .await(10, TimeUnit.SECONDS);
        return List.of(keys(snapshot.dram()), keys(snapshot.ssd()));
    }

    static Set<String> keys(List<ResidentKey> resident) {
        Set<String> keys = new HashSet<>();
        for (ResidentKey k : resident) {
            keys.add(HexFormat.of().formatHex(k.key().namespace()) + "/" + HexFormat.of().formatHex(k.key().blockHash()));
        }
        return keys;
    }

    static void awaitSameAsManager(KvEventSubscriber subscriber, RunningManager running) {
        await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> {
            List<Set<String>> manager = residency(running);
            assertThat(subscriber.cpu()).as("DRAM (CPU) blocks").isEqualTo(manager.get(0));
            assertThat(subscriber.disk()).as("SSD (DISK) blocks").isEqualTo(manager.get(1));
        });
    }

    static KvEventSubscriber subscribe(RunningManager running) {
        EventsVerticle events = running.manager().eventsRole().orElseThrow();
        return new KvEventSubscriber(events.endpoint(), events.replayEndpoint());
    }

    @Test
    void aSubscriberRebuildsTheResidencyThroughEvictionsSsdAMissedRangeAndARestart() throws Exception {
        Set<String> diskBeforeRestart;
        try (KvEventSubscriber subscriber = subscribe(running);
             OrbitKvClient client = running.unixClient();
             EngineSession session = client.register(RunningManager.identity("model-a", PAGE).build(),
                     InstanceRole.DECODE).await()) {
            List<ByteString> first = PublishQueryRestoreIT.publish(session, "first", 6);
            await().atMost(Duration.ofSeconds(20)).until(() -> running.metric("orbitkv_ssd_keys") >= 6.0);
            PublishQueryRestoreIT.publish(session, "second", 8);
            PublishQueryRestoreIT.publish(session, "third", 8);
            assertThat(running.metric("orbitkv_evictions_total")).isGreaterThanOrEqualTo(6.0);
            awaitSameAsManager(subscriber, running);
            assertThat(subscriber.removedFromCpu.get()).as("evictions announced").isGreaterThanOrEqualTo(6);
            assertThat(subscriber.storedOnDisk.get()).as("SSD commits announced").isGreaterThanOrEqualTo(6);

            // A range of batches the subscriber never sees: "first" is read back from SSD meanwhile.
            subscriber.dropping = true;
            double published = running.metric("orbitkv_events_published_total");
            QueryReply ready = session.query(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(first)
                    .build())).await();
            assertThat(ready.getStatus()).isEqualTo(QueryStatus.READY);
            session.release(ready.getLease().getLeaseId()).await();
            await().atMost(Duration.ofSeconds(20)).until(() -> subscriber.droppedBatches.get() > 0
                    && running.metric("orbitkv_events_published_total") > published);
            subscriber.dropping = false;
            long replayedBefore = subscriber.replayedBatches.get();
            // The next batch shows the gap; the subscriber catches up through the replay socket.
            PublishQueryRestoreIT.publish(session, "fourth", 2);
            awaitSameAsManager(subscriber, running);
            assertThat(subscriber.replayedBatches.get()).as("batches caught up through replay")
                    .isGreaterThan(replayedBefore);
            assertThat(running.metric("orbitkv_events_replays_served_total")).isGreaterThanOrEqualTo(2.0);
            assertThat(running.metric("orbitkv_events_published_total")).isPositive();
            // Let the SSD writes settle so the restart recovers what was announced.
            await().atMost(Duration.ofSeconds(20)).until(() -> running.metric("orbitkv_ssd_keys") >= 24.0);
            awaitSameAsManager(subscriber, running);
            diskBeforeRestart = subscriber.disk();
            assertThat(subscriber.clears.get()).isEqualTo(1);
        }

        running.restart(Map.of());
        try (KvEventSubscriber subscriber = subscribe(running)) {
            awaitSameAsManager(subscriber, running);
            assertThat(subscriber.clears.get()).as("a restart begins with AllBlocksCleared").isEqualTo(1);
            assertThat(subscriber.cpu()).as("DRAM does not survive a restart").isEmpty();
            assertThat(subscriber.disk()).as("the recovered SSD extents are announced").isNotEmpty()
                    .isSubsetOf(diskBeforeRestart);
        }
    }

    @Test
    void theRouterSummaryCountsBlocksPerTierAndKeepsUnknownEstimatesUnknown() throws Exception {
        try (OrbitKvClient client = running.unixClient();
             EngineSession session = client.register(RunningManager.identity("model-s", PAGE).build(),
                     InstanceRole.DECODE).await()) {
            List<ByteString> hashes = PublishQueryRestoreIT.publish(session, "summary", 4);
            await().atMost(Duration.ofSeconds(20)).until(() -> running.metric("orbitkv_ssd_keys") >= 4.0);
            // One-block demands, enough of them for the cost role's host-ready estimate to warm up.
            for (int i = 0; i < 24; i++) {
                QueryReply ready = session.query(List.of(GroupChain.newBuilder().setGroupId(0)
                        .addBlockHashes(hashes.get(i % 4)).build())).await();
                assertThat(ready.getStatus()).isEqualTo(QueryStatus.READY);
                session.release(ready.getLease().getLeaseId()).await();
            }
            String namespace = HexFormat.of().formatHex(session.namespace().toByteArray());
            await().atMost(Duration.ofSeconds(20)).untilAsserted(() -> {
                JsonObject summary = new JsonObject(running.scrapePath("/kv/summary"));
                assertThat(summary.getLong("at_ms")).isPositive();
                JsonObject ns = namespaceOf(summary, namespace);
                assertThat(ns.getJsonObject("blocks").getLong("dram")).isEqualTo(4);
                assertThat(ns.getJsonObject("blocks").getLong("ssd")).isEqualTo(4);
                assertThat(ns.getJsonObject("bytes").getLong("dram")).isEqualTo(4L * PAGE);
                JsonObject one = ns.getJsonObject("time_to_ready").getJsonArray("dram").getJsonObject(0);
                assertThat(one.getInteger("blocks")).isEqualTo(1);
                assertThat(one.getDouble("predicted_ms")).as("estimated from the observed demands").isPositive();
                assertThat(one.getLong("samples")).isPositive();
            });
            JsonObject summary = new JsonObject(running.scrapePath("/kv/summary"));
            JsonObject ns = namespaceOf(summary, namespace);
            // Nothing was observed for 256-block prefixes, nor for reads back from SSD: unknown, never zero.
            for (String tier : List.of("dram", "ssd")) {
                JsonArray estimates = ns.getJsonObject("time_to_ready").getJsonArray(tier);
                JsonObject longest = estimates.getJsonObject(estimates.size() - 1);
                assertThat(longest.getInteger("blocks")).isEqualTo(256);
                assertThat(longest.containsKey("predicted_ms")).isTrue();
                assertThat(longest.getValue("predicted_ms")).as(tier).isNull();
                assertThat(longest.getString("unknown_reason")).isEqualTo("NO_ENTRY");
            }
            JsonObject ssdRead = summary.getJsonObject("ssd_read");
            assertThat(ssdRead.getLong("capacity_bytes_per_second")).isEqualTo(1L << 30);
            assertThat(ssdRead.getLong("free_bytes_per_second"))
                    .isEqualTo((1L << 30) - ssdRead.getLong("in_use_bytes_per_second"));
            // Nothing that names a request, a session or a key.
            assertThat(summary.encode()).doesNotContain("summary:").doesNotContain(HexFormat.of()
                    .formatHex(hashes.get(0).toByteArray()));
        }
    }

    static JsonObject namespaceOf(JsonObject summary, String namespace) {
        for (Object o : summary.getJsonArray("namespaces")) {
            JsonObject ns = (JsonObject) o;
            if (ns.getString("namespace").equals(namespace)) {
                return ns;
            }
        }
        throw new AssertionError("namespace " + namespace + " not in " + summary.encode());
    }
}
