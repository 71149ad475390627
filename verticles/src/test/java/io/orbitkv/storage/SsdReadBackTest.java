package io.orbitkv.storage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.common.Ticker;
import io.orbitkv.manager.Manager;
import io.orbitkv.nativeio.uring.IoUringFileIo;
import io.orbitkv.ssd.SsdProxy;
import io.orbitkv.ssd.SsdSettings;
import io.orbitkv.ssd.SsdStore;
import io.orbitkv.ssd.SsdVerticle;
import io.vertx.core.Vertx;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import io.orbitkv.model.StateKey;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.AllocateResult;
import io.orbitkv.model.KeyEvidence;
import io.orbitkv.model.KeyGeneration;

/**
 * The planning path's read-back from SSD through the real storage and SSD roles (real pool file, real io_uring, real
 * shard files): an N-page read-back is one lease, one read and one release command at the SSD role, not N of each;
 * the pages come back pinned with the CRC32C of the bytes published; no lease, pin or reserved slot is left over.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SsdReadBackTest {
    static final long PAGE = 64 << 10;
    static final int PAGES = 6;
    final Path pool = Path.of("/dev/shm", "orbitkv-readback-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
    final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    @TempDir
    Path ssdDir;
    Vertx vertx;

    @AfterEach
    void stop() throws Exception {
        if (vertx != null) {
            vertx.close().await(30, TimeUnit.SECONDS);
        }
        assertThat(Files.exists(pool)).isFalse();
        assertThat(SsdStore.liveNativeBytes()).isZero();
    }

    @Test
    void anNPageReadBackIsOneCommandPerPhaseAndServesThePublishedBytes() throws Exception {
        assumeTrue(IoUringFileIo.isAvailable());
        vertx = Manager.newVertx(1);
        SsdSettings ssdSettings = new SsdSettings().directory(ssdDir).extentBytes(PAGE + 4096)
                .capacityBytes(32 * (PAGE + 4096)).writeStagingBuffers(2).queueDepth(8);
        vertx.deployVerticle(new SsdVerticle(ssdSettings, registry)).await(30, TimeUnit.SECONDS);
        vertx.deployVerticle(new StorageVerticle(new StorageSettings().pool(pool, 8 * PAGE).chunkBytes(PAGE)
                        .publishBudgetBytes(8 * PAGE).residencyCapacity(1024).incarnation(1)
                        .ssd(new SsdProxy(vertx), null), registry, Ticker.SYSTEM))
                .await(30, TimeUnit.SECONDS);
        StorageProxy storage = new StorageProxy(vertx);

        List<StateKey> keys = ImageStoreTest.keys(0, PAGES);
        long[] published = publish(storage, keys, 42);
        await().atMost(Duration.ofSeconds(20)).until(() -> storage.discover(keys).await(10, TimeUnit.SECONDS)
                .stream().allMatch(e -> e.ssdGeneration() >= 0));
        // Other pages push these out of the 8-page pool: they survive on SSD only.
        List<StateKey> others = ImageStoreTest.keys(100, 108);
        publish(storage, others, 7);
        // Once those are on SSD too, no SSD write is copying out of a slot the read-back evicts.
        await().atMost(Duration.ofSeconds(20)).until(() -> storage.discover(others).await(10, TimeUnit.SECONDS)
                .stream().allMatch(e -> e.ssdGeneration() >= 0));
        List<KeyEvidence> evidence = storage.discover(keys).await(10, TimeUnit.SECONDS);
        assertThat(evidence).allMatch(e -> e.dramGeneration() < 0 && e.ssdGeneration() >= 0);

        List<KeyGeneration> pages = new ArrayList<>();
        for (KeyEvidence e : evidence) {
            pages.add(new KeyGeneration(e.key(), e.ssdGeneration()));
        }
        StorageCommands.SsdHold hold = storage.acquireFromSsd(pages).await(10, TimeUnit.SECONDS);
        assertThat(hold.hold()).isPositive();
        List<ImageRef> pinned = storage.readFromSsd(hold.hold()).await(10, TimeUnit.SECONDS);

        assertThat(commands("acquire")).as("one lease command for %d pages", PAGES).isEqualTo(1);
        assertThat(commands("read")).as("one read command for %d pages", PAGES).isEqualTo(1);
        assertThat(commands("release")).as("one release command for %d pages", PAGES).isEqualTo(1);
        assertThat(pinned).extracting(ImageRef::key).containsExactlyElementsOf(keys);
        for (int i = 0; i < PAGES; i++) {
            assertThat(pinned.get(i).crc32c()).as("page %d", i).isEqualTo(published[i]);
        }
        assertThat(crcsInPool(pinned)).containsExactly(published);

        storage.unpinRefs(pinned, false).await(10, TimeUnit.SECONDS);
        StorageCommands.StorageStats stats = storage.stats().await(10, TimeUnit.SECONDS);
        assertThat(stats.pinnedImages()).isZero();
        assertThat(stats.materializingImages()).isZero();
        assertThat(new SsdProxy(vertx).stats().await(10, TimeUnit.SECONDS).activeLeases()).isZero();
    }

    private double commands(String command) {
        return registry.get("orbitkv.ssd.commands").tag("command", command).counter().count();
    }

    /** Publishes one page of random bytes per key (written through the pool file) and answers their CRC32C. */
    private long[] publish(StorageProxy storage, List<StateKey> keys, long seed) throws Exception {
        AllocateResult allocated = storage.allocate(1, keys, Collections.nCopies(keys.size(), PAGE))
                .await(10, TimeUnit.SECONDS);
        long[] crcs = new long[keys.size()];
        List<Integer> expected = new ArrayList<>();
        SplittableRandom random = new SplittableRandom(seed);
        try (FileChannel file = FileChannel.open(pool, StandardOpenOption.WRITE)) {
            for (int i = 0; i < keys.size(); i++) {
                byte[] bytes = new byte[(int) PAGE];
                random.nextBytes(bytes);
                file.write(ByteBuffer.wrap(bytes), allocated.slots().get(i).ref().offset());
                CRC32C crc = new CRC32C();
                crc.update(bytes);
                crcs[i] = crc.getValue();
                expected.add((int) crc.getValue());
            }
        }
        storage.seal(1, allocated.publishId(), expected, List.of()).await(10, TimeUnit.SECONDS);
        return crcs;
    }

    private long[] crcsInPool(List<ImageRef> refs) throws Exception {
        long[] crcs = new long[refs.size()];
        try (FileChannel file = FileChannel.open(pool, StandardOpenOption.READ)) {
            for (int i = 0; i < refs.size(); i++) {
                ByteBuffer bytes = ByteBuffer.allocate((int) refs.get(i).lengthBytes());
                file.read(bytes, refs.get(i).offset());
                CRC32C crc = new CRC32C();
                crc.update(bytes.flip());
                crcs[i] = crc.getValue();
            }
        }
        return crcs;
    }
}
