package io.orbitkv.perf.ssd;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.codecs.extent.Crc32c;
import io.orbitkv.perf.BenchArgs;
import io.orbitkv.perf.ssd.SsdBench.Step;
import io.orbitkv.ssd.RoleLoop;
import io.orbitkv.model.SsdEntry;
import io.orbitkv.ssd.SsdException;
import io.orbitkv.ssd.SsdFailure;
import io.orbitkv.model.SsdLease;
import io.orbitkv.ssd.SsdListener;
import io.orbitkv.ssd.SsdSettings;
import io.orbitkv.ssd.SsdStore;
import io.orbitkv.ssd.SsdWriteOutcome;
import io.orbitkv.model.StateKey;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The parts of {@code bench ssd} that a test can catch without a measurement: order, payloads, options. */
class SsdBenchTest {

    static final long PAGE = 64 << 10;
    static final byte[] NAMESPACE = "orbitkv-ssdbtest".getBytes(StandardCharsets.US_ASCII);

    @ParameterizedTest
    @ValueSource(ints = {0, 1, 2, 3, 4, 5, 6})
    void everyFioStepIncludingTheLayoutReadAlternatesWhoGoesFirst(int round) {
        List<Step> writes = SsdBench.writeOrder(round);
        assertThat(writes).containsExactlyInAnyOrder(Step.STORE_WRITE, Step.FIO_WRITE);
        assertThat(writes.getFirst() == Step.STORE_WRITE).isEqualTo(round % 2 == 0);
        int storeFirst = 0;
        for (int segment = 0; segment < 8; segment++) {
            List<Step> reads = SsdBench.readOrder(round, segment);
            assertThat(reads).containsExactlyInAnyOrder(Step.STORE_READ, Step.FIO_READ, Step.FIO_LAYOUT_READ);
            boolean ours = reads.indexOf(Step.STORE_READ) < reads.indexOf(Step.FIO_READ);
            assertThat(reads.indexOf(Step.STORE_READ) < reads.indexOf(Step.FIO_LAYOUT_READ))
                    .as("the layout-matched read alternates with the others").isEqualTo(ours);
            assertThat(SsdBench.readOrder(round + 1, segment).indexOf(Step.STORE_READ) == 0)
                    .as("and flips from round to round").isEqualTo(!ours);
            storeFirst += ours ? 1 : 0;
        }
        assertThat(storeFirst).as("each side reads first in half of the segments").isEqualTo(4);
    }

    @Test
    void payloadsDependOnTheirKey() {
        try (Arena arena = Arena.ofConfined()) {
            KeyedPayload payload = new KeyedPayload(arena.allocate(PAGE, 4096), 42);
            Set<Integer> crcs = new HashSet<>();
            MemorySegment copy = arena.allocate(PAGE, 4096);
            for (long key = 0; key < 64; key++) {
                MemorySegment stamped = payload.stamp(key);
                crcs.add(Crc32c.of(stamped));
                assertThat(KeyedPayload.carries(stamped, PAGE, key)).isTrue();
                assertThat(KeyedPayload.spotCheck(stamped, PAGE, key)).isTrue();
                if (key > 0) {
                    assertThat(KeyedPayload.carries(copy, PAGE, key)).as("previous key's bytes").isFalse();
                    assertThat(KeyedPayload.spotCheck(copy, PAGE, key)).isFalse();
                }
                MemorySegment.copy(stamped, 0, copy, 0, PAGE);
            }
            assertThat(crcs).as("a distinct CRC32C per key").hasSize(64);
        }
    }

    /**
     * The store's read of key 0 is served the payload of key 1 (its bytes copied over key 0's extent, as a misdirected
     * read would see them): with keyed payloads the CRC32C catches it; with one payload for every key, as the bench
     * had before, the wrong extent's bytes passed.
     */
    @ParameterizedTest
    @ValueSource(booleans = {true, false})
    void aMisdirectedReadFailsItsChecksumOnlyWithKeyedPayloads(boolean keyed, @TempDir Path dir) throws Exception {
        long extentBytes = PAGE + 4096;
        SsdSettings settings = new SsdSettings().directory(dir).extentBytes(extentBytes).capacityBytes(4 * extentBytes)
                .writeStagingBuffers(2).queueDepth(4).bounceBuffers(0);
        try (RoleLoop.Dedicated loop = RoleLoop.dedicated("ssdbench-test"); Arena arena = Arena.ofShared()) {
            KeyedPayload payload = new KeyedPayload(arena.allocate(PAGE, 4096), 7);
            SsdStore store = SsdStore.open(settings, loop, SsdListener.NONE, new SimpleMeterRegistry())
                    .get(20, TimeUnit.SECONDS);
            for (long key = 0; key < 2; key++) {
                long k = key;
                SsdWriteOutcome outcome = await(loop, () -> store.offerWrite(key(k),
                        () -> keyed ? payload.stamp(k) : payload.stamp(0), PAGE));
                assertThat(outcome.committed()).isTrue();
            }
            store.close().get(20, TimeUnit.SECONDS);
            // Ring positions 0 and 1 of the one shard: copy extent 1's payload over extent 0's.
            try (FileChannel shard = FileChannel.open(dir.resolve("shard-000.okv"), StandardOpenOption.READ,
                    StandardOpenOption.WRITE)) {
                ByteBuffer other = ByteBuffer.allocate((int) PAGE);
                shard.read(other, extentBytes + 4096);
                shard.write(other.flip(), 4096);
            }
            SsdStore reopened = SsdStore.open(settings, loop, SsdListener.NONE, new SimpleMeterRegistry())
                    .get(20, TimeUnit.SECONDS);
            try {
                MemorySegment destination = arena.allocate(PAGE, 4096);
                SsdEntry entry = call(loop, () -> reopened.lookup(key(0)));
                SsdLease lease = call(loop, () -> reopened.acquireLease(key(0), entry.generation()));
                CompletableFuture<?> read = call(loop, () -> reopened.readInto(lease, destination));
                if (keyed) {
                    assertThatThrownBy(() -> read.get(20, TimeUnit.SECONDS)).isInstanceOf(ExecutionException.class)
                            .cause().isInstanceOfSatisfying(SsdException.class,
                                    e -> assertThat(e.failure()).isEqualTo(SsdFailure.CHECKSUM_MISMATCH));
                } else {
                    read.get(20, TimeUnit.SECONDS); // the old bench's identical payloads cannot tell
                    call(loop, () -> {
                        reopened.release(lease);
                        return null;
                    });
                }
            } finally {
                reopened.close().get(20, TimeUnit.SECONDS);
            }
        }
    }

    @Test
    void optionsAreCheckedBeforeAnythingIsMeasured() {
        assertThatThrownBy(() -> SsdBench.run(BenchArgs.parse("--rounds", "1")))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("--rounds");
        assertThatThrownBy(() -> SsdBench.run(BenchArgs.parse("--size-gib", "0")))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("--size-gib");
        assertThatThrownBy(() -> SsdBench.run(BenchArgs.parse("--no-such-option", "1")))
                .isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void theReportNamesTheFileSystemAndDevice(@TempDir Path dir) {
        assertThat(StorageInfo.of(dir).getString("filesystem")).isNotBlank();
        assertThat(StorageInfo.of(dir).getString("device")).isNotBlank();
    }

    static StateKey key(long index) {
        return StateKey.of(NAMESPACE, 0, ByteBuffer.allocate(8).putLong(index).array());
    }

    static <T> T call(RoleLoop loop, Supplier<T> action) throws Exception {
        CompletableFuture<T> result = new CompletableFuture<>();
        loop.execute(() -> {
            try {
                result.complete(action.get());
            } catch (Throwable t) {
                result.completeExceptionally(t);
            }
        });
        return result.get(20, TimeUnit.SECONDS);
    }

    static <T> T await(RoleLoop loop, Supplier<CompletableFuture<T>> action) throws Exception {
        return call(loop, action).get(20, TimeUnit.SECONDS);
    }
}
