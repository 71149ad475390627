package io.orbitkv.storage;

import static org.assertj.core.api.Assertions.assertThat;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import io.orbitkv.model.StateKey;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.AllocateResult;
import io.orbitkv.model.ExactPin;

/** {@link ImageStore#rememberChecksum}: a CRC32C remembered for one slot generation, never for its successor. */
class ImageStoreChecksumMemoTest {
    static final long PAGE = 1 << 20;
    final Arena arena = Arena.ofConfined();
    final MemorySegment pool = arena.allocate(4 * PAGE, 4096);
    final ImageStore store = new ImageStore(new PoolAllocator(4 * PAGE, 2 * PAGE), pool, 4 * PAGE,
            new ResidencyStream(7, 1024), new ImageStore.Listener() {});

    @AfterEach
    void close() {
        arena.close();
    }

    void publish(int from, int to) {
        List<StateKey> keys = ImageStoreTest.keys(from, to);
        AllocateResult r = store.allocate(1, keys, Collections.nCopies(keys.size(), PAGE));
        store.seal(1, r.publishId(), List.of(), List.of());
    }

    ImageRef pinned(int i) {
        ExactPin pin = store.pinExact(List.of(List.of(ImageStoreTest.key(i))));
        assertThat(pin.complete()).isTrue();
        store.unpin(pin.pinned());
        return pin.pinned().getFirst().getFirst();
    }

    @Test
    void aRememberedChecksumIsServedForItsGenerationOnlyAndNeverInheritedByTheSlotsNextImage() {
        publish(0, 1);
        ImageRef first = pinned(0);
        assertThat(first.crcKnown()).as("sealed without a checksum").isFalse();
        assertThat(store.rememberChecksum(first, 0xCAFEBABEL)).isTrue();
        assertThat(pinned(0).crc32c()).isEqualTo(0xCAFEBABEL);
        assertThat(store.rememberChecksum(first, 0x12345678L)).as("a known checksum is not replaced").isFalse();
        assertThat(pinned(0).crc32c()).isEqualTo(0xCAFEBABEL);

        // Fill the pool: key 0 (the eldest) is evicted, and its slot goes to another key at a new generation.
        publish(1, 5);
        assertThat(store.stateOf(ImageStoreTest.key(0))).isNull();
        ImageRef successor = null;
        for (int i = 1; i < 5; i++) {
            ImageRef r = pinned(i);
            if (r.offset() == first.offset()) {
                successor = r;
            }
        }
        assertThat(successor).as("the evicted slot was reused").isNotNull();
        assertThat(successor.generation()).isNotEqualTo(first.generation());
        assertThat(successor.crcKnown()).as("the reused slot does not inherit the memo").isFalse();
        // A late memo for the old generation (a worker that read before the eviction) is dropped.
        assertThat(store.rememberChecksum(new ImageRef(successor.key(), first.offset(), PAGE,
                first.generation()), 0xCAFEBABEL)).isFalse();
        assertThat(store.rememberChecksum(first, 0xCAFEBABEL)).isFalse();
        assertThat(pinned(successor.key().blockHash()[0]).crcKnown()).isFalse();

        // The key published again lands at a new generation: it starts unknown too.
        publish(0, 1);
        ImageRef again = pinned(0);
        assertThat(again.crcKnown()).isFalse();
        assertThat(again.generation()).isNotEqualTo(first.generation());
    }

    @Test
    void anImageBeingWrittenTakesNoMemo() {
        AllocateResult r = store.allocate(1, List.of(ImageStoreTest.key(0)), List.of(PAGE));
        ImageRef writing = r.slots().getFirst().ref();
        assertThat(store.rememberChecksum(writing, 1)).isFalse();
        store.seal(1, r.publishId(), List.of(), List.of());
        assertThat(pinned(0).crcKnown()).isFalse();
    }
}
