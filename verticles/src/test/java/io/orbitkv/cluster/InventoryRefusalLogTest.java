package io.orbitkv.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import com.google.protobuf.ByteString;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.common.Ticker;
import io.orbitkv.manager.Manager;
import io.orbitkv.protocol.peer.InventoryBatch;
import io.orbitkv.protocol.peer.InventoryEntry;
import io.orbitkv.protocol.peer.InventorySnapshotRequest;
import io.orbitkv.storage.StorageSettings;
import io.orbitkv.storage.StorageVerticle;
import io.orbitkv.storage.StorageProxy;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.eventbus.ReplyException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

/**
 * Refused inventory messages leave one WARN line per kind and member per interval, naming no key: batches from a
 * member that is not current, and a snapshot asked by one. The inventory role runs over a real storage role on a
 * local event bus; no member is current (membership is not deployed).
 */
class InventoryRefusalLogTest {
    static final long POOL = 8L << 20;
    Vertx vertx;
    Path pool;
    final ListAppender<ILoggingEvent> seen = new ListAppender<>();
    final Logger captured = (Logger) LoggerFactory.getLogger(InventoryRole.class);

    @AfterEach
    void close() throws Exception {
        captured.detachAppender(seen);
        if (vertx != null) {
            vertx.close().await(10, TimeUnit.SECONDS);
        }
        if (pool != null) {
            Files.deleteIfExists(pool);
        }
    }

    @Test
    void refusedBatchesAndSnapshotRequestsAreOneWarnLinePerKindAndMember() throws Exception {
        seen.start();
        captured.addAppender(seen);
        vertx = Manager.newVertx(1);
        pool = Path.of("/dev/shm", "orbitkv-inventory-log-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        vertx.deployVerticle(new StorageVerticle(new StorageSettings().pool(pool, POOL).chunkBytes(1 << 20)
                .residencyCapacity(1024).incarnation(1), new SimpleMeterRegistry(), Ticker.SYSTEM)).await(30, TimeUnit.SECONDS);
        ClusterSettings settings = new ClusterSettings("manager-1", List.of(URI.create("http://127.0.0.1:1")),
                "/orbitkv-log-test", 2, "127.0.0.1", 0, 1, List.of(), null, null, null, 60_000, 1024, 1024, 0);
        MembershipRole membership = new MembershipRole(settings, 1, Map.of(), List.of(), new SimpleMeterRegistry());
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        vertx.deployVerticle(new InventoryRole(settings, membership, new StorageProxy(vertx), registry))
                .await(30, TimeUnit.SECONDS);

        byte[] hash = new byte[32];
        java.util.Arrays.fill(hash, (byte) 0x6B);
        InventoryBatch batch = InventoryBatch.newBuilder().setMemberId("manager-5").setIncarnation(77)
                .setAfterSequence(0).setLastSequence(1).addEntries(InventoryEntry.newBuilder()
                        .setChange(InventoryEntry.Change.DRAM_ADDED).setNamespace(ByteString.copyFrom(new byte[16]))
                        .setBlockHash(ByteString.copyFrom(hash)).setGeneration(3).setLengthBytes(4096).setSequence(1))
                .build();
        for (int i = 0; i < 5; i++) {
            vertx.eventBus().send(InventoryRole.BATCHES, Buffer.buffer(batch.toByteArray()));
        }
        await().atMost(Duration.ofSeconds(10)).until(() -> registry.get("orbitkv.cluster.messages.rejected")
                .tag("reason", "not-member").counter().count() == 5.0);
        byte[] ask = InventorySnapshotRequest.newBuilder().setMemberId("manager-6").setIncarnation(5).build().toByteArray();
        for (int i = 0; i < 3; i++) {
            Throwable refused = vertx.eventBus().request(InventoryRole.snapshotAddress("manager-1"), Buffer.buffer(ask))
                    .toCompletionStage().toCompletableFuture().handle((reply, failure) -> failure).get(10, TimeUnit.SECONDS);
            assertThat(refused).isInstanceOf(ReplyException.class);
        }
        List<String> warnings = seen.list.stream().filter(e -> e.getLevel() == Level.WARN)
                .map(ILoggingEvent::getFormattedMessage).toList();
        assertThat(warnings).as("five refused batches and three refused snapshots: one line each").containsExactly(
                "inventory batch refused (member manager-5): not a current member at that incarnation",
                "inventory snapshot request refused (member manager-6): not a current member at that incarnation");
        assertThat(String.join("\n", warnings)).doesNotContain(HexFormat.of().formatHex(hash), "6b6b", "77");
    }
}
