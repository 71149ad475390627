package io.orbitkv.storage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.manager.Manager;
import io.vertx.core.Vertx;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import io.orbitkv.model.StateKey;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.SlotGrant;
import io.orbitkv.model.AllocateResult;

/**
 * The seal-and-pin command (a peer requester keeping what it fetched): the seal verifies the CRC32C (here on a worker:
 * the publish is over the offload size), and the same step pins every named key, so the caller owns the pins; a
 * mismatch aborts the publish and pins nothing.
 */
class StorageSealAndPinTest {
    static final long PAGE = 1 << 20;
    final Path pool = Path.of("/dev/shm", "orbitkv-sealpin-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
    Vertx vertx;
    StorageProxy storage;

    @BeforeEach
    void start() throws Exception {
        vertx = Manager.newVertx(2);
        vertx.deployVerticle(new StorageVerticle(new StorageSettings().pool(pool, 8 * PAGE).chunkBytes(PAGE)
                .residencyCapacity(1024).incarnation(1), new SimpleMeterRegistry(), io.orbitkv.common.Ticker.SYSTEM)).await(30, TimeUnit.SECONDS);
        storage = new StorageProxy(vertx);
    }

    @AfterEach
    void stop() throws Exception {
        if (vertx != null) {
            vertx.close().await(30, TimeUnit.SECONDS);
        }
        assertThat(Files.exists(pool)).isFalse();
    }

    /** Allocates {@code keys}, fills their slots with seeded bytes, answers the publish and each slot's CRC32C. */
    private Published publish(List<StateKey> keys, long seed) throws Exception {
        AllocateResult allocated = storage.allocate(1, keys, keys.stream().map(k -> PAGE).toList())
                .await(10, TimeUnit.SECONDS);
        List<Integer> crcs = new ArrayList<>();
        List<ImageRef> written = new ArrayList<>();
        try (FileChannel file = FileChannel.open(pool, StandardOpenOption.WRITE)) {
            SplittableRandom random = new SplittableRandom(seed);
            for (SlotGrant slot : allocated.slots()) {
                byte[] bytes = new byte[(int) PAGE];
                random.nextBytes(bytes);
                file.write(ByteBuffer.wrap(bytes), slot.ref().offset());
                CRC32C crc = new CRC32C();
                crc.update(bytes);
                crcs.add((int) crc.getValue());
                written.add(slot.ref());
            }
        }
        return new Published(allocated.publishId(), crcs, written);
    }

    private record Published(long publishId, List<Integer> crcs, List<ImageRef> written) {}

    @Test
    void aVerifiedSealPinsEveryNamedKeyInTheSameStep() throws Exception {
        List<StateKey> keys = ImageStoreTest.keys(0, 2);
        Published p = publish(keys, 7);
        StorageCommands.SealedAndPinned result = storage.sealAndPin(
                new StorageCommands.Seal(1, p.publishId(), p.crcs(), p.written()), keys).await(10, TimeUnit.SECONDS);
        assertThat(result.pin().complete()).isTrue();
        assertThat(result.pin().pinned().getFirst()).extracting(ImageRef::offset)
                .containsExactlyElementsOf(p.written().stream().map(ImageRef::offset).toList());
        assertThat(storage.stats().await(5, TimeUnit.SECONDS).pinnedImages()).isEqualTo(2);
        storage.unpin(result.pin().pinned()).await(10, TimeUnit.SECONDS);
        assertThat(storage.stats().await(5, TimeUnit.SECONDS).pinnedImages()).isZero();
    }

    @Test
    void withoutKeysItIsAPlainSeal() throws Exception {
        List<StateKey> keys = ImageStoreTest.keys(10, 11);
        Published p = publish(keys, 8);
        StorageCommands.SealedAndPinned result = storage.sealAndPin(
                new StorageCommands.Seal(1, p.publishId(), p.crcs(), p.written()), List.of()).await(10, TimeUnit.SECONDS);
        assertThat(result.pin()).isNull();
        StorageCommands.StorageStats stats = storage.stats().await(5, TimeUnit.SECONDS);
        assertThat(stats.pinnedImages()).isZero();
        assertThat(stats.residentImages()).isEqualTo(1);
    }

    @Test
    void aChecksumMismatchAbortsThePublishAndPinsNothing() throws Exception {
        List<StateKey> keys = ImageStoreTest.keys(20, 22);
        Published p = publish(keys, 9);
        List<Integer> wrong = List.of(p.crcs().get(0), p.crcs().get(1) ^ 1);
        assertThrows(Exception.class, () -> storage.sealAndPin(
                new StorageCommands.Seal(1, p.publishId(), wrong, p.written()), keys).await(10, TimeUnit.SECONDS));
        StorageCommands.StorageStats stats = storage.stats().await(5, TimeUnit.SECONDS);
        assertThat(stats.pinnedImages()).isZero();
        assertThat(stats.residentImages()).isZero();
        assertThat(stats.openPublishes()).isZero();
    }
}
