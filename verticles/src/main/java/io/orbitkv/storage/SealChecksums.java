package io.orbitkv.storage;

import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.SealResult;

/**
 * The storage role's seals and the CRC32C they check, on the loop or on a worker.
 *
 * <p>Design note (ownership): checking a seal's checksums reads every byte of its slots. A large publish (at least
 * {@value #CHECKSUM_OFFLOAD_BYTES} bytes with checksums) is checked on a worker while the loop goes on, then sealed
 * back on the loop; a publish aborted or ended meanwhile is not sealed (UNKNOWN_PUBLISH). After a seal without
 * checksums (with background checksums on), a worker computes the sealed images' CRC32C and the loop remembers each
 * at the exact slot generation it was read at ({@link ImageStore#rememberChecksum}), so a peer source grants them
 * without reading the pages again; an image evicted (and its slot reused) meanwhile was read at a generation that no
 * longer holds, so its value is dropped, never attached to the new bytes. Workers only read slots; {@link #drained}
 * (the ordered stop) starts no more of them and completes once none is reading, before the pool is unmapped.
 * Confined to the storage role's loop.
 */
final class SealChecksums {
    /** Seals whose checksums together cover at least this many bytes are verified on a worker, not on the loop. */
    static final long CHECKSUM_OFFLOAD_BYTES = 1 << 20;

    private final Vertx vertx;
    private final ImageStore store;
    private final MemorySegment pool;
    private final boolean background;
    private final StorageMetrics metrics;
    private final List<Promise<Void>> drainWaiters = new ArrayList<>();
    private int inFlight;
    private boolean closing;

    SealChecksums(Vertx vertx, ImageStore store, MemorySegment pool, boolean background, StorageMetrics metrics) {
        this.vertx = vertx;
        this.store = store;
        this.pool = pool;
        this.background = background;
        this.metrics = metrics;
    }

    /** Seals a publish (see the class note); {@code c.received()} are the writer's checksums: compared, not recomputed. */
    Future<SealResult> seal(StorageCommands.Seal c) {
        List<MemorySegment> slots = store.slotsToVerify(c.instance(), c.publishId(), c.crc32c(), c.written());
        if (c.received() != null) {
            if (c.crc32c().isEmpty() || c.received().size() != c.crc32c().size()) {
                return Future.failedFuture(new IllegalArgumentException("a received-checksum seal needs one expected and"
                        + " one received CRC32C per slot"));
            }
            metrics.checksumsReceived.increment();
            return sealVerified(c, c.received());
        }
        long bytes = 0;
        for (MemorySegment slot : slots) {
            bytes += slot.byteSize();
        }
        if (bytes < CHECKSUM_OFFLOAD_BYTES || closing) {
            return sealVerified(c, ImageStore.checksums(slots));
        }
        inFlight++;
        metrics.checksumsOffloaded.increment();
        return vertx.executeBlocking(() -> ImageStore.checksums(slots), false)
                .transform(ar -> {
                    inFlight--;
                    signalDrained();
                    if (ar.failed()) {
                        return Future.failedFuture(ar.cause());
                    }
                    return sealVerified(c, ar.result());
                });
    }

    /** The last step of a seal; a mismatch aborted the publish, which the gauges show at once too. */
    private Future<SealResult> sealVerified(StorageCommands.Seal c, List<Integer> actual) {
        List<ImageRef> sealed = c.crc32c().isEmpty() && background
                ? store.publishRefs(c.instance(), c.publishId()) : List.of();
        try {
            SealResult result = store.sealVerified(c.instance(), c.publishId(), c.crc32c(), actual);
            metrics.refresh();
            checksumInBackground(sealed);
            return Future.succeededFuture(result);
        } catch (RuntimeException e) {
            metrics.refresh();
            return Future.failedFuture(e);
        }
    }

    private void checksumInBackground(List<ImageRef> refs) {
        if (refs.isEmpty() || closing) {
            return;
        }
        List<MemorySegment> slots = new ArrayList<>(refs.size());
        for (ImageRef ref : refs) {
            slots.add(pool.asSlice(ref.offset(), ref.lengthBytes()));
        }
        inFlight++;
        vertx.executeBlocking(() -> ImageStore.checksums(slots), false).onComplete(ar -> {
            inFlight--;
            signalDrained();
            if (ar.succeeded()) {
                List<Long> crcs = ar.result().stream().map(Integer::toUnsignedLong).toList();
                metrics.backgroundChecksums.increment(remember(refs, crcs));
            }
        });
    }

    private int remember(List<ImageRef> refs, List<Long> crcs) {
        if (refs.size() != crcs.size()) {
            throw new IllegalArgumentException(refs.size() + " refs, " + crcs.size() + " checksums");
        }
        int taken = 0;
        for (int i = 0; i < refs.size(); i++) {
            if (store.rememberChecksum(refs.get(i), crcs.get(i))) {
                taken++;
            }
        }
        return taken;
    }

    /** Starts no more work on workers and completes once no worker reads slots (at once when none does). */
    Future<Void> drained() {
        closing = true;
        if (inFlight == 0) {
            return Future.succeededFuture();
        }
        Promise<Void> drained = Promise.promise();
        drainWaiters.add(drained);
        return drained.future();
    }

    private void signalDrained() {
        if (inFlight == 0 && !drainWaiters.isEmpty()) {
            List<Promise<Void>> waiters = List.copyOf(drainWaiters);
            drainWaiters.clear();
            waiters.forEach(Promise::tryComplete);
        }
    }
}
