package io.orbitkv.ssd;

import static io.orbitkv.ssd.SsdTesting.key;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.nativeio.uring.IoUringFileIo;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import io.orbitkv.model.SsdEntry;
import io.orbitkv.model.SsdLease;
import io.orbitkv.model.SsdPageOutcome;
import io.orbitkv.model.SsdReadResult;
import io.orbitkv.model.SsdResidencyChange;

/** The SSD role through the real local event bus and its typed proxy. Hard timeouts, no sleeps. */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class SsdVerticleTest {

    @TempDir
    Path dir;

    private static <T> T join(Future<T> future) throws Exception {
        try {
            return future.toCompletionStage().toCompletableFuture().get(SsdTesting.WAIT_S, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            throw (Exception) e.getCause();
        }
    }

    @Test
    void offerLookupLeaseReadReleaseThroughTheProxy() throws Exception {
        assumeTrue(IoUringFileIo.isAvailable());
        Vertx vertx = Vertx.vertx();
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        try (Arena arena = Arena.ofShared()) {
            SsdVerticle verticle = new SsdVerticle(SsdTesting.small(dir, 8), registry);
            join(vertx.deployVerticle(verticle));
            SsdProxy proxy = verticle.proxy();
            assertThat(join(proxy.committedEntries())).isEmpty();
            CompletableFuture<SsdResidencyChange> added = new CompletableFuture<>();
            proxy.residencyChanges(added::complete);

            long length = 30_000;
            MemorySegment image = arena.allocate(length, 4096);
            SsdTesting.fill(image, length, 7);
            proxy.offerWrite(key(7), () -> image, length);
            SsdResidencyChange change = added.get(SsdTesting.WAIT_S, TimeUnit.SECONDS);
            assertThat(change.kind()).isEqualTo(SsdResidencyChange.Kind.SSD_ADDED);

            List<SsdEntry> entries = join(proxy.lookup(List.of(key(7), key(8))));
            assertThat(entries.get(0)).isEqualTo(new SsdEntry(key(7), true, change.generation(), length));
            assertThat(entries.get(1).present()).isFalse();

            // One command per phase for the whole batch; a stale page is a miss of its own, the others are leased.
            List<SsdPageOutcome<SsdLease>> leases = join(proxy.acquireLeases(List.of(
                    new SsdCommands.AcquireLease(key(7), change.generation() + 1),
                    new SsdCommands.AcquireLease(key(7), change.generation()),
                    new SsdCommands.AcquireLease(key(8), 1))));
            assertThat(leases).hasSize(3);
            assertThat(leases.get(0).failure()).isInstanceOfSatisfying(SsdException.class,
                    e -> assertThat(e.failure()).isEqualTo(SsdFailure.STALE_GENERATION));
            assertThat(leases.get(2).failure()).isInstanceOfSatisfying(SsdException.class,
                    e -> assertThat(e.failure()).isEqualTo(SsdFailure.NOT_FOUND));
            SsdLease lease = leases.get(1).value();
            MemorySegment slot = arena.allocate(SsdLayout.alignUp(length), 4096);
            MemorySegment tooSmall = arena.allocate(4096, 4096);
            List<SsdPageOutcome<SsdReadResult>> reads = join(proxy.readInto(List.of(
                    new SsdCommands.ReadInto(lease, slot), new SsdCommands.ReadInto(lease, tooSmall))));
            assertThat(reads.get(0).value().lengthBytes()).isEqualTo(length);
            assertThat(SsdTesting.matches(slot, length, 7)).isTrue();
            assertThat(reads.get(1).failure()).isInstanceOfSatisfying(SsdException.class,
                    e -> assertThat(e.failure()).isEqualTo(SsdFailure.DESTINATION_TOO_SMALL));
            assertThat(join(proxy.release(List.of(lease)))).isEqualTo(1);
            assertThat(join(proxy.release(List.of(lease)))).as("already ended: skipped").isZero();
            for (String command : List.of("acquire", "read", "release")) {
                assertThat(registry.get("orbitkv.ssd.commands").tag("command", command).counter().count())
                        .isEqualTo(command.equals("release") ? 2.0 : 1.0);
            }

            SsdStats stats = join(proxy.stats());
            assertThat(stats.readHits()).isEqualTo(1);
            assertThat(stats.activeLeases()).as("every lease ended").isZero();
            assertThat(stats.writesCommitted()).isEqualTo(1);
            assertThat(registry.find("orbitkv.ssd.write.bytes").counter().count()).isEqualTo(length);
            assertThat(registry.find("orbitkv.ssd.queue.depth").tags("lane", "RESTORE", "state", "in_flight")
                    .gauge()).isNotNull();
            join(vertx.undeploy(vertx.deploymentIDs().iterator().next()));
        } finally {
            join(vertx.close());
        }
    }
}
