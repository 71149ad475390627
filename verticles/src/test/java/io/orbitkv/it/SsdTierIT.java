package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.manager.Manager;
import io.orbitkv.manager.ManagerConfig;
import io.orbitkv.protocol.engine.*;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The SSD tier through the real engine API: published pages reach SSD in the background; once evicted from DRAM a
 * query answers PENDING while they are read back into pool slots, then READY with the right bytes; and they survive a
 * Manager restart.
 */
@Timeout(120)
class SsdTierIT {
    static final int PAGE = 1 << 20;

    @RegisterExtension
    final RunningManager running = new RunningManager().with("pool.size", "16MiB").with("ssd.capacity", "96MiB")
            .with("cost.observations", "1");

    static GroupChain chain(List<ByteString> hashes) {
        return GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes).build();
    }

    static void verify(EngineSession session, QueryReply reply, String seed) {
        for (LeasedPage page : reply.getLease().getPagesList()) {
            MemorySegment expected = MemorySegment.ofArray(new byte[PAGE]);
            PublishQueryRestoreIT.fill(expected, (seed + page.getPosition()).hashCode());
            assertThat(session.slot(page.getSlot()).mismatch(expected)).as("page %d", page.getPosition()).isEqualTo(-1);
        }
    }

    @Test
    void evictedPrefixesComeBackFromSsdWithTheirBytes() throws Exception {
        try (OrbitKvClient client = running.unixClient();
             EngineSession session = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await()) {
            List<ByteString> first = PublishQueryRestoreIT.publish(session, "first", 6);
            await().atMost(Duration.ofSeconds(20)).until(() -> running.metric("orbitkv_ssd_keys") >= 6.0);
            // Push "first" out of the 16 MiB pool.
            PublishQueryRestoreIT.publish(session, "second", 8);
            PublishQueryRestoreIT.publish(session, "third", 8);
            assertThat(running.metric("orbitkv_evictions_total")).isGreaterThanOrEqualTo(6.0);
            QueryReply submitted = session.submit(List.of(chain(first)), 0).await();
            assertThat(submitted.getStatus()).as("read back from SSD first").isEqualTo(QueryStatus.PENDING);
            QueryReply ready = session.query(List.of(chain(first))).await();
            assertThat(ready.getStatus()).isEqualTo(QueryStatus.READY);
            assertThat(ready.getReadyBlocks()).isEqualTo(6);
            verify(session, ready, "first");
            session.release(ready.getLease().getLeaseId()).await();
            if (submitted.getStatus() == QueryStatus.PENDING) {
                session.cancel(submitted.getTicket()).await();
            }
            assertThat(running.metric("orbitkv_tier_reads_total{tier=\"ssd\"}")).isGreaterThanOrEqualTo(6.0);
            assertThat(running.metric("orbitkv_ssd_read_hits_total")).isGreaterThanOrEqualTo(6.0);
            // The cost role saw SSD reads and pool copies (image -> SSD staging) of this real workload.
            await().atMost(Duration.ofSeconds(10)).until(() -> running.scrape()
                    .contains("orbitkv_cost_operations_total{outcome=\"succeeded\",path=\"ssd_read\"}"));
            assertThat(running.scrape()).contains("orbitkv_cost_operations_total{outcome=\"succeeded\",path=\"pool_copy_out\"}")
                    .contains("orbitkv_cost_operations_total{outcome=\"succeeded\",path=\"ssd_write\"}");
            // Every save was compared in shadow with writing straight from the pool slot; never executed here, unknown.
            await().atMost(Duration.ofSeconds(10)).until(() -> running.scrape()
                    .contains("orbitkv_cost_shadow_decisions_total{decision=\"unknown\",path=\"ssd_save_staged_route\"}"));
            // Each read back was compared in shadow with the bounce-buffer path; never executed, it stays unknown.
            await().atMost(Duration.ofSeconds(10)).until(() -> running.scrape()
                    .contains("orbitkv_cost_shadow_decisions_total{decision=\"unknown\",path=\"ssd_read\"}"));
        }
    }

    @Test
    void aPrefixLongerThanThePoolCanLeaseIsReadyForTheLongestPartThatFits() throws Exception {
        try (OrbitKvClient client = running.unixClient();
             EngineSession session = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await()) {
            // 20 MiB of prefix through a 16 MiB pool whose query budget is 12 MiB: the head left DRAM long ago.
            List<ByteString> hashes = new ArrayList<>();
            for (int part = 0; part < 4; part++) {
                List<ByteString> chunk = PublishQueryRestoreIT.chain("long", 20).subList(part * 5, part * 5 + 5);
                publishAt(session, chunk, part * 5);
                hashes.addAll(chunk);
            }
            await().atMost(Duration.ofSeconds(20)).until(() -> running.metric("orbitkv_ssd_keys") >= 20.0);
            double evictionsBefore = running.metric("orbitkv_evictions_total");
            QueryReply ready = session.query(List.of(chain(hashes))).await();
            assertThat(ready.getStatus()).isEqualTo(QueryStatus.READY);
            assertThat(ready.getReadyBlocks()).as("the query byte budget: 75% of 16 MiB").isEqualTo(12);
            verify(session, ready, "long");
            session.release(ready.getLease().getLeaseId()).await();
            // Reading the head back evicted only what it needed room for: no ping-pong between DRAM and SSD.
            assertThat(running.metric("orbitkv_evictions_total") - evictionsBefore).isLessThanOrEqualTo(12.0);
        }
    }

    /** Publishes pages whose bytes follow the ("long" + position) pattern {@link #verify} expects. */
    static void publishAt(EngineSession session, List<ByteString> hashes, int firstPosition) {
        AllocatePublishReply allocated = session.allocate(hashes.stream()
                .map(h -> PageKey.newBuilder().setGroupId(0).setBlockHash(h).build()).toList()).await();
        for (int i = 0; i < allocated.getSlotsCount(); i++) {
            PublishQueryRestoreIT.fill(session.slot(allocated.getSlots(i).getSlot()), ("long" + (firstPosition + i)).hashCode());
        }
        session.seal(allocated.getPublishId(), List.of()).await();
    }

    @Test
    void writingStraightFromThePoolServesTheSameBytes() throws Exception {
        running.restart(Map.of("ssd.write-from-pool", "true"));
        try (OrbitKvClient client = running.unixClient();
             EngineSession session = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await()) {
            List<ByteString> first = PublishQueryRestoreIT.publish(session, "first", 6);
            await().atMost(Duration.ofSeconds(20)).until(() -> running.metric("orbitkv_ssd_keys") >= 6.0);
            PublishQueryRestoreIT.publish(session, "second", 8);
            PublishQueryRestoreIT.publish(session, "third", 8);
            QueryReply ready = session.query(List.of(chain(first))).await();
            assertThat(ready.getReadyBlocks()).isEqualTo(6);
            verify(session, ready, "first");
            session.release(ready.getLease().getLeaseId()).await();
            assertThat(running.metric("orbitkv_tier_reads_total{tier=\"ssd\"}")).isGreaterThanOrEqualTo(6.0);
            await().atMost(Duration.ofSeconds(10)).until(() -> running.scrape()
                    .contains("orbitkv_cost_operations_total{outcome=\"succeeded\",path=\"ssd_save_direct_route\"}"));
            assertThat(running.scrape()).as("no staging copy was made")
                    .doesNotContain("orbitkv_cost_operations_total{outcome=\"succeeded\",path=\"pool_copy_out\"}");
        }
    }

    @Test
    void committedPagesSurviveARestart() throws Exception {
        List<ByteString> hashes;
        try (OrbitKvClient client = running.unixClient();
             EngineSession session = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await()) {
            hashes = PublishQueryRestoreIT.publish(session, "durable", 5);
            await().atMost(Duration.ofSeconds(20)).until(() -> running.metric("orbitkv_ssd_keys") >= 5.0);
        }
        running.restart(Map.of());
        assertThat(running.metric("orbitkv_ssd_keys")).isEqualTo(5.0);
        assertThat(running.metric("orbitkv_images")).isZero();
        try (OrbitKvClient client = running.unixClient();
             EngineSession session = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await()) {
            QueryReply ready = session.query(List.of(chain(hashes))).await();
            assertThat(ready.getStatus()).isEqualTo(QueryStatus.READY);
            assertThat(ready.getReadyBlocks()).isEqualTo(5);
            verify(session, ready, "durable");
            // Read back from SSD after a restart, each page carries the CRC32C its extent recorded.
            for (LeasedPage page : ready.getLease().getPagesList()) {
                assertThat(page.hasCrc32C()).as("page %d", page.getPosition()).isTrue();
                assertThat(page.getCrc32C()).isEqualTo(PublishQueryRestoreIT.crc(session.slot(page.getSlot())));
            }
            session.release(ready.getLease().getLeaseId()).await();
        }
    }

    @Test
    void aMissingConfiguredSsdDirectoryIsAClearStartupError() throws Exception {
        Path data = Files.createTempDirectory("orbitkv-ssd-missing");
        Path missing = data.resolve("no-such-dir");
        ManagerConfig config = RunningManager.config(Map.of("data-dir", data.toString(), "pool.size", "8MiB",
                "grpc.tcp-port", "0", "metrics.port", "0", "ssd.dir", missing.toString(), "ssd.capacity", "16MiB"));
        assertThatThrownBy(() -> Manager.start(config).await(60, TimeUnit.SECONDS)).hasMessageContaining(missing.toString());
        RunningManager.deleteTree(data);
    }
}
