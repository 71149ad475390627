package io.orbitkv.storage;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.common.Ticker;
import io.orbitkv.manager.Manager;
import io.vertx.core.Vertx;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import io.orbitkv.model.StateKey;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.AllocateResult;
import io.orbitkv.model.ExactPin;

/**
 * The storage role's background checksums: a seal without checksums is followed by a worker's CRC32C of the sealed
 * bytes, remembered at the image's slot generation (what a peer source then grants without reading the pages).
 */
class BackgroundChecksumsTest {
    static final long PAGE = 1 << 20;
    final Path pool = Path.of("/dev/shm", "orbitkv-bgcrc-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
    final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    Vertx vertx;

    @AfterEach
    void stop() throws Exception {
        if (vertx != null) {
            vertx.close().await(30, TimeUnit.SECONDS);
        }
        assertThat(Files.exists(pool)).isFalse();
    }

    @Test
    void aSealWithoutChecksumsGetsTheBytesCrcRememberedInTheBackground() throws Exception {
        vertx = Manager.newVertx(2);
        vertx.deployVerticle(new StorageVerticle(new StorageSettings().pool(pool, 8 * PAGE).chunkBytes(PAGE)
                .residencyCapacity(1024).incarnation(1).backgroundChecksums(true), registry, Ticker.SYSTEM)).await(30, TimeUnit.SECONDS);
        StorageProxy storage = new StorageProxy(vertx);
        List<StateKey> keys = ImageStoreTest.keys(0, 2);
        AllocateResult allocated = storage.allocate(1, keys, List.of(PAGE, PAGE)).await(10, TimeUnit.SECONDS);
        long[] expected = new long[2];
        try (FileChannel file = FileChannel.open(pool, StandardOpenOption.WRITE)) {
            SplittableRandom random = new SplittableRandom(42);
            for (int i = 0; i < 2; i++) {
                byte[] bytes = new byte[(int) PAGE];
                random.nextBytes(bytes);
                file.write(ByteBuffer.wrap(bytes), allocated.slots().get(i).ref().offset());
                CRC32C crc = new CRC32C();
                crc.update(bytes);
                expected[i] = crc.getValue();
            }
        }
        storage.seal(1, allocated.publishId(), List.of(), List.of()).await(10, TimeUnit.SECONDS);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        List<ImageRef> refs;
        while (true) {
            ExactPin pin = storage.pinExact(List.of(keys)).await(10, TimeUnit.SECONDS);
            assertThat(pin.complete()).isTrue();
            storage.unpin(pin.pinned()).await(10, TimeUnit.SECONDS);
            refs = pin.pinned().getFirst();
            if (refs.stream().allMatch(ImageRef::crcKnown) || System.nanoTime() > deadline) {
                break;
            }
            Thread.sleep(10); // polling the condition, bounded by the deadline
        }
        assertThat(refs).extracting(ImageRef::crc32c).containsExactly(expected[0], expected[1]);
        assertThat(registry.get("orbitkv.seal.checksums.background").counter().count()).isEqualTo(2.0);
    }
}
