package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.manager.Manager;
import io.orbitkv.protocol.engine.InstanceRole;
import io.orbitkv.protocol.engine.QueryReply;
import io.orbitkv.protocol.engine.QueryStatus;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * A Manager stopped with SSD reads (pages read back into pool slots) and SSD writes (fdatasync'd, so they are slow)
 * in flight: the stop runs in order (engine refuses, queries cancelled, storage quiesced, SSD drained, and only then
 * the pool unmapped), no read into a pool slot is in flight at the unmap, the JVM survives, and after a restart every
 * page committed before the stop is served with its bytes; pages whose write the stop cut short are misses, never
 * wrong bytes.
 */
@Timeout(180)
class OrderedShutdownIT {
    static final int PAGE = SsdTierIT.PAGE;

    @RegisterExtension
    final RunningManager running = new RunningManager().with("pool.size", "16MiB").with("ssd.capacity", "256MiB").with("ssd.extent", "1MiB")
            .with("ssd.sync-writes", "true");

    /**
     * Whether I/O is in flight at the instant the stop begins depends on the scheduler, so the scenario runs until one
     * stop began with both reads and writes in flight (at most {@value #ATTEMPTS} times); every attempt checks the order,
     * the drain and the served bytes.
     */
    static final int ATTEMPTS = 6;

    @Test
    void stoppingWithSsdReadsAndWritesInFlightDrainsThemBeforeTheUnmapAndLosesNoCommittedExtent() throws Exception {
        boolean bothInFlight = false;
        for (int attempt = 0; attempt < ATTEMPTS && !bothInFlight; attempt++) {
            Manager.StopReport report = stopWithIoInFlight("a" + attempt);
            bothInFlight = report.poolReadsInFlightAtStop() > 0 && report.ssdWritesInFlightAtStop() > 0;
        }
        assertThat(bothInFlight).as("one of %d stops began with SSD reads and writes in flight", ATTEMPTS).isTrue();
    }

    private Manager.StopReport stopWithIoInFlight(String prefix) throws Exception {
        List<ByteString> first;
        List<ByteString> rest;
        Manager.StopReport report;
        try (OrbitKvClient client = running.unixClient();
             EngineSession session = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await()) {
            double keysBefore = running.metric("orbitkv_ssd_keys");
            first = PublishQueryRestoreIT.publish(session, prefix + "first", 6);
            await().atMost(Duration.ofSeconds(30)).until(() -> running.metric("orbitkv_ssd_keys") >= keysBefore + 6.0);
            // Push "first" out of the 16 MiB pool: its pages survive on SSD only, while 16 new SSD writes queue up.
            PublishQueryRestoreIT.publish(session, prefix + "second", 8);
            rest = PublishQueryRestoreIT.publish(session, prefix + "third", 8);
            QueryReply submitted = session.submit(List.of(SsdTierIT.chain(first)), 0).await();
            assertThat(submitted.getStatus()).as("being read back from SSD").isEqualTo(QueryStatus.PENDING);
            report = running.manager().stopWithReport().await(60, TimeUnit.SECONDS);
        }
        assertThat(report.steps()).containsExactly("health", "engine-refusing-and-closed",
                "queries-cancelled-and-leases-ended", "plans-drained",
                "restores-drained-and-destinations-unmapped", "storage-quiesced", "ssd-drained", "pool-unmapped", "cost");
        assertThat(report.readsInFlightAtUnmap()).as("reads into pool slots in flight at the unmap").isZero();

        running.restart(Map.of());
        assertThat(running.metric("orbitkv_ssd_keys")).as("every extent committed before the stop came back")
                .isGreaterThanOrEqualTo(report.ssdCommittedAtStop());
        try (OrbitKvClient client = running.unixClient();
             EngineSession session = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await()) {
            QueryReply ready = session.query(List.of(SsdTierIT.chain(first))).await();
            assertThat(ready.getStatus()).as("committed before the stop: served after the restart").isEqualTo(QueryStatus.READY);
            assertThat(ready.getReadyBlocks()).isEqualTo(6);
            SsdTierIT.verify(session, ready, prefix + "first");
            session.release(ready.getLease().getLeaseId()).await();
            // Writes cut short by the stop are misses; whatever is served has its own bytes.
            QueryReply reply = session.query(List.of(SsdTierIT.chain(rest))).await();
            if (reply.getStatus() == QueryStatus.READY) {
                SsdTierIT.verify(session, reply, prefix + "third");
                session.release(reply.getLease().getLeaseId()).await();
            }
        }
        return report;
    }
}
