package io.orbitkv.storage;

import io.orbitkv.model.AllocateResult;
import io.orbitkv.model.ExactPin;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.ImageState;
import io.orbitkv.model.KeyEvidence;
import io.orbitkv.model.KeyGeneration;
import io.orbitkv.model.SealResult;
import io.orbitkv.model.StateKey;
import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * A real {@link ImageStore} over a caller's segment, for tests of other roles that drive the store directly (without
 * the event bus): the store stays package-private, and these are the operations such tests call. The whole segment is
 * the pool and the publish budget; nothing listens to evictions.
 */
public final class ImageStoreFixture {
    private final ImageStore store;

    public ImageStoreFixture(MemorySegment pool, long chunkBytes) {
        long poolBytes = pool.byteSize();
        this.store = new ImageStore(new PoolAllocator(poolBytes, chunkBytes), pool, poolBytes,
                new ResidencyStream(1, 4096), new ImageStore.Listener() {});
    }

    public AllocateResult allocate(long instance, List<StateKey> keys, List<Long> lengths) {
        return store.allocate(instance, keys, lengths);
    }

    public SealResult seal(long instance, long publishId, List<Integer> crc32c, List<ImageRef> written) {
        return store.seal(instance, publishId, crc32c, written);
    }

    public List<KeyEvidence> discover(List<StateKey> keys) {
        return store.discover(keys);
    }

    public ExactPin pinExact(List<List<StateKey>> groups) {
        return store.pinExact(groups);
    }

    public ExactPin pinGenerations(List<KeyGeneration> pages) {
        return store.pinGenerations(pages);
    }

    public void unpin(List<List<ImageRef>> pinned) {
        store.unpin(pinned);
    }

    public int unpinIntoQuarantine(List<List<ImageRef>> pinned, long untilNanos) {
        return store.unpinIntoQuarantine(pinned, untilNanos);
    }

    public ImageState stateOf(StateKey key) {
        return store.stateOf(key);
    }

    public long pinnedImages() {
        return store.pinnedImages();
    }
}
