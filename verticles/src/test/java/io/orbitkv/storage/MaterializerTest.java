package io.orbitkv.storage;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.common.Ticker;
import io.orbitkv.ssd.SsdLease;
import io.orbitkv.ssd.SsdReadResult;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Reads back from SSD with injected failures: every reserved slot is returned, whether the read fails, starting it
 * throws, or the read completes after the others; the drain waits for the last read in flight.
 */
class MaterializerTest {
    static final long PAGE = 1 << 20;
    final Arena arena = Arena.ofConfined();
    final MemorySegment pool = arena.allocate(8 * PAGE, 4096);
    final PoolAllocator allocator = new PoolAllocator(8 * PAGE, 2 * PAGE);
    final ImageStore store = new ImageStore(allocator, pool, 6 * PAGE, new ResidencyStream(1, 1024),
            new ImageStore.Listener() {});
    final Map<StateKey, Promise<SsdReadResult>> reads = new HashMap<>();
    final List<SsdReadResult> settled = new ArrayList<>();
    final List<ImageStore.ImageRef> failed = new ArrayList<>();

    @AfterEach
    void close() {
        arena.close();
    }

    Materializer materializer(Materializer.SlotFiller filler) {
        return new Materializer(store, pool, filler, (image, result, nanos) -> {
            if (result == null) {
                failed.add(image);
            } else {
                settled.add(result);
            }
        }, Ticker.SYSTEM);
    }

    List<StateKey> onSsd(int n) {
        List<StateKey> keys = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            StateKey key = ImageStoreTest.key(i);
            store.ssdAdded(key, 100 + i, PAGE);
            keys.add(key);
        }
        return keys;
    }

    @Test
    void aFailedOrThrowingReadReturnsItsSlotAndTheOthersStillSeal() {
        List<StateKey> keys = onSsd(4);
        Materializer m = materializer((key, generation, slot) -> {
            if (key.equals(keys.get(1))) {
                throw new IllegalStateException("injected: the SSD proxy threw while starting the read");
            }
            Promise<SsdReadResult> read = Promise.promise();
            reads.put(key, read);
            return read.future();
        });
        assertThat(m.start(keys)).isEqualTo(4);
        assertThat(failed).as("the read that threw settled at once").hasSize(1);
        assertThat(m.inFlight()).isEqualTo(3);
        Future<Void> drained = m.drained();
        reads.get(keys.get(0)).complete(new SsdReadResult(new SsdLease(1, keys.get(0), 100, PAGE), PAGE,
                SsdReadResult.ReadPath.DIRECT, 7));
        reads.get(keys.get(2)).fail(new IllegalStateException("injected: checksum mismatch"));
        assertThat(drained.isComplete()).as("one read still in flight").isFalse();
        reads.get(keys.get(3)).fail(new IllegalStateException("injected: I/O error"));
        assertThat(drained.succeeded()).isTrue();
        assertThat(m.inFlight()).isZero();
        assertThat(store.materializingImages()).isZero();
        assertThat(settled).hasSize(1);
        assertThat(failed).hasSize(3);
        assertThat(store.stateOf(keys.get(0))).isEqualTo(ImageStore.ImageState.SEALED);
        for (int i = 1; i < 4; i++) {
            assertThat(store.stateOf(keys.get(i))).as("failed key %d holds no slot", i).isNull();
        }
        assertThat(allocator.requestedBytes()).as("only the sealed page holds a slot").isEqualTo(PAGE);
        // The keys whose reads failed can be read back again: nothing of them stayed reserved.
        assertThat(m.start(keys.subList(1, 4))).isEqualTo(3);
    }

    @Test
    void aClosedMaterializerStartsNothingAndDrainsWhatIsInFlight() {
        List<StateKey> keys = onSsd(2);
        Materializer m = materializer((key, generation, slot) -> {
            Promise<SsdReadResult> read = Promise.promise();
            reads.put(key, read);
            return read.future();
        });
        assertThat(m.start(keys.subList(0, 1))).isEqualTo(1);
        m.close();
        assertThat(m.start(keys.subList(1, 2))).as("closed: no new reservation").isZero();
        assertThat(store.stateOf(keys.get(1))).isNull();
        Future<Void> drained = m.drained();
        assertThat(drained.isComplete()).isFalse();
        reads.get(keys.get(0)).fail(new IllegalStateException("injected: store closed"));
        assertThat(drained.succeeded()).isTrue();
        assertThat(allocator.requestedBytes()).isZero();
    }
}
