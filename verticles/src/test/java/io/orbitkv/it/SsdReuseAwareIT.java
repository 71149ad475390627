package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.protocol.engine.InstanceRole;
import io.orbitkv.protocol.engine.QueryReply;
import io.orbitkv.protocol.engine.QueryStatus;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * {@code ssd.write-policy: reuse-aware} on a real Manager with real shard files: a published page reaches SSD only once
 * it is seen again, by a query that hits it in DRAM or by a second publish of the same key; a page published once and
 * never asked for stays off the disk.
 */
@Timeout(120)
class SsdReuseAwareIT {
    static final int PAGE = 1 << 20;
    static final String NOT_YET_REUSED = "orbitkv_ssd_writes_dropped_total{reason=\"NOT_YET_REUSED\"}";
    static final String COMMITTED = "orbitkv_ssd_writes_committed_total";

    @RegisterExtension
    final RunningManager running = new RunningManager().with("pool.size", "32MiB").with("ssd.capacity", "64MiB")
            .with("ssd.write-policy", "reuse-aware");

    @Test
    void aPageReachesSsdOnlyWhenADramHitOrASecondPublishSeesItAgain() throws Exception {
        try (OrbitKvClient client = running.unixClient();
             EngineSession session = client.register(RunningManager.identity("model-a", PAGE).build(),
                     InstanceRole.DECODE).await()) {
            List<ByteString> hit = PublishQueryRestoreIT.publish(session, "hit", 4);
            PublishQueryRestoreIT.publish(session, "once", 4);
            PublishQueryRestoreIT.publish(session, "again", 2);
            // Each seal-time offer is a first sighting: recorded, not written.
            await().atMost(Duration.ofSeconds(20)).until(() -> running.metric(NOT_YET_REUSED) >= 10.0);
            assertThat(running.metric(COMMITTED)).isZero();

            // A DRAM hit is the second sighting of the four pages it pins.
            QueryReply ready = session.query(List.of(SsdTierIT.chain(hit))).await();
            assertThat(ready.getStatus()).isEqualTo(QueryStatus.READY);
            assertThat(ready.getReadyBlocks()).isEqualTo(4);
            session.release(ready.getLease().getLeaseId()).await();
            await().atMost(Duration.ofSeconds(20)).until(() -> running.metric(COMMITTED) >= 4.0);
            assertThat(running.metric(COMMITTED)).isEqualTo(4.0);

            // A second publish of resident keys is a second sighting too (nothing to write into DRAM: no slots).
            PublishQueryRestoreIT.publish(session, "again", 2);
            await().atMost(Duration.ofSeconds(20)).until(() -> running.metric(COMMITTED) >= 6.0);
            await().atMost(Duration.ofSeconds(20)).until(() -> running.metric("orbitkv_ssd_keys") >= 6.0);

            // The pages published once and never asked for stayed off the disk; nothing else was offered meanwhile.
            assertThat(running.metric(COMMITTED)).isEqualTo(6.0);
            assertThat(running.metric(NOT_YET_REUSED)).isEqualTo(10.0);
            assertThat(running.metric("orbitkv_ssd_keys")).isEqualTo(6.0);
        }
    }
}
