package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.google.protobuf.ByteString;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.admission.AdmissionVerticle;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.OrbitKvException;
import io.orbitkv.common.Ticker;
import io.orbitkv.model.cost.ResourceId;
import io.orbitkv.model.cost.ResourceKind;
import io.orbitkv.engine.EngineSettings;
import io.orbitkv.engine.EngineVerticle;
import io.orbitkv.engine.SessionCleanup;
import io.orbitkv.manager.Manager;
import io.orbitkv.planning.PlanningVerticle;
import io.orbitkv.model.plan.RouteResources;
import io.orbitkv.protocol.engine.GroupChain;
import io.orbitkv.protocol.engine.InstanceRole;
import io.orbitkv.protocol.engine.PageKey;
import io.orbitkv.protocol.engine.QueryReply;
import io.orbitkv.protocol.engine.QueryStatus;
import io.orbitkv.storage.StorageCommands.StorageStats;
import io.orbitkv.storage.StorageProxy;
import io.orbitkv.storage.StorageSettings;
import io.orbitkv.storage.StorageVerticle;
import io.vertx.core.Vertx;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Timeout;

/**
 * Issue 9 item 6 (engine part): ending a session runs every cleanup step even when one fails, and reports every
 * failure. The real storage, admission and engine roles run on one Vertx and an engine talks to them over the Unix
 * socket; the only thing injected is the failure a step reports after it ran ({@link SessionCleanup.Faults}).
 */
@Timeout(120)
class SessionCleanupIT {
    static final int PAGE = 64 * 1024;
    static final String TOKEN = "cleanup-test-token-0123456789abcdef";

    final Set<SessionCleanup.Step> failing = ConcurrentHashMap.newKeySet();
    Path dir;
    Path pool;
    Vertx vertx;
    EngineSettings engineSettings;

    @BeforeEach
    void startRoles() throws Exception {
        dir = Files.createTempDirectory("orbitkv-cleanup");
        pool = Path.of("/dev/shm", "orbitkv-cleanup-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        long poolBytes = 8L << 20;
        long quarantineNanos = TimeUnit.SECONDS.toNanos(60);
        vertx = Manager.newVertx(RunningManager.eventLoops());
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        engineSettings = new EngineSettings().unixSocket(dir.resolve("engine.sock")).tcp("127.0.0.1", 0).token(TOKEN)
                .pool(pool, poolBytes).quarantineNanos(quarantineNanos)
                .cleanupFaults(step -> failing.contains(step) ? new IllegalStateException("injected failure of " + step) : null);
        vertx.deployVerticle(new StorageVerticle(new StorageSettings().pool(pool, poolBytes).chunkBytes(1L << 20)
                        .residencyCapacity(1024).incarnation(1).quarantineNanos(quarantineNanos), registry, Ticker.SYSTEM))
                .compose(id -> vertx.deployVerticle(new PlanningVerticle(PlanningVerticle.Settings.localOnly(false,
                        new RouteResources(new ResourceId(ResourceKind.DRAM_POOL, "dram-pool", 1),
                                new ResourceId(ResourceKind.SSD_STORE, "ssd-store", 1))), registry, Ticker.SYSTEM, null)))
                .compose(id -> vertx.deployVerticle(new AdmissionVerticle(AdmissionVerticle.Settings.builder().maxOutstanding(64, 1024)
                        .leaseBudgetBytes(poolBytes / 2).build(), registry, Ticker.SYSTEM)))
                .compose(id -> vertx.deployVerticle(new EngineVerticle(engineSettings, registry, Ticker.SYSTEM)))
                .await(60, TimeUnit.SECONDS);
    }

    @AfterEach
    void stopRoles() throws Exception {
        vertx.close().await(30, TimeUnit.SECONDS);
        assertThat(Files.exists(pool)).isFalse();
        RunningManager.deleteTree(dir);
    }

    static List<Set<SessionCleanup.Step>> failures() {
        return List.of(EnumSet.of(SessionCleanup.Step.LEASES_AND_QUERIES), EnumSet.of(SessionCleanup.Step.UNSEALED_PUBLISHES),
                EnumSet.allOf(SessionCleanup.Step.class));
    }

    @ParameterizedTest
    @ValueSource(ints = {0, 1, 2})
    void everyStepRunsWhenOneFailsAndEveryFailureIsReported(int which) throws Exception {
        Set<SessionCleanup.Step> injected = failures().get(which);
        StorageProxy storage = new StorageProxy(vertx);
        try (OrbitKvClient client = OrbitKvClient.connectUnix(engineSettings.unixSocket(), TOKEN)) {
            EngineSession engine = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await();
            List<ByteString> hashes = PublishQueryRestoreIT.publish(engine, "cleanup", 2);
            QueryReply ready = engine.query(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes).build())).await();
            assertThat(ready.getStatus()).isEqualTo(QueryStatus.READY);
            engine.allocate(List.of(PageKey.newBuilder().setGroupId(0).setBlockHash(ByteString.copyFromUtf8("open")).build())).await();
            EngineSession witness = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await();

            failing.addAll(injected);
            assertThatThrownBy(() -> engine.unregister().await())
                    .isInstanceOfSatisfying(OrbitKvException.class, e -> {
                        assertThat(e.grpcStatus()).isEqualTo("INTERNAL");
                        for (SessionCleanup.Step step : injected) {
                            assertThat(e.getMessage()).as("every failed step is reported").contains(step.name());
                        }
                        for (SessionCleanup.Step step : EnumSet.complementOf(EnumSet.copyOf(injected))) {
                            assertThat(e.getMessage()).doesNotContain(step.name());
                        }
                    });
            failing.clear();

            // Both steps ran whatever failed: the lease ended, the open publish ended, all three slots are held.
            assertThat(witness.stats().await().getActiveLeases()).as("the leases step ran").isZero();
            StorageStats stats = storage.stats().await(10, TimeUnit.SECONDS);
            assertThat(stats.openPublishes()).as("the unsealed-publishes step ran").isZero();
            assertThat(stats.pinnedImages()).isZero();
            assertThat(stats.quarantinedSlots()).isEqualTo(3);
            engine.abandon();
            witness.close();
        }
    }
}
