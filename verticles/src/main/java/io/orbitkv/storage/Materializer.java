package io.orbitkv.storage;

import io.orbitkv.common.Ticker;
import io.orbitkv.ssd.SsdReadResult;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * Reads keys that survive on SSD only back into pool slots, for the storage role.
 *
 * <p>Design note (ownership): {@link ImageStore#materialize} reserves one WRITING slot per key; this class owns each
 * reservation until it settles, exactly once: sealed with the read's CRC32C when the verified read completed, freed in
 * every other case — the read failed, starting it threw, or its completion handler threw. While a read is in flight
 * the slot belongs to the SSD role, which writes into it through the pool mapping: {@link #inFlight} counts such reads
 * and {@link #drained} completes when none is left. Ordered shutdown stops starting reads ({@link #close}) and awaits
 * {@link #drained} before the SSD role closes and the pool is unmapped. Confined to the storage role's loop; the
 * filler's futures must complete on it.
 */
final class Materializer {
    /** Fills a slot from SSD: the exact generation's lease, the read into {@code slot}, the release. */
    @FunctionalInterface
    interface SlotFiller {
        Future<SsdReadResult> fill(StateKey key, long ssdGeneration, MemorySegment slot);
    }

    /** Told once per settled reservation (for metrics and observations); {@code result} is null on failure. */
    @FunctionalInterface
    interface Settled {
        void settled(ImageStore.ImageRef image, SsdReadResult result, long elapsedNanos);
    }

    private final ImageStore store;
    private final MemorySegment pool;
    private final SlotFiller filler;
    private final Settled settled;
    private final Ticker ticker;
    private final List<Promise<Void>> drainWaiters = new ArrayList<>();
    private int inFlight;
    private boolean closed;

    Materializer(ImageStore store, MemorySegment pool, SlotFiller filler, Settled settled, Ticker ticker) {
        this.store = store;
        this.pool = pool;
        this.filler = filler;
        this.settled = settled;
        this.ticker = ticker;
    }

    /** Reserves slots for the keys on SSD only and starts their reads; answers how many started (0 once closed). */
    int start(List<StateKey> keys) {
        if (closed) {
            return 0;
        }
        List<ImageStore.Materialization> started = store.materialize(keys);
        for (ImageStore.Materialization m : started) {
            read(m);
        }
        return started.size();
    }

    private void read(ImageStore.Materialization m) {
        ImageStore.ImageRef image = m.image();
        long startNanos = ticker.nanos();
        inFlight++;
        Future<SsdReadResult> read;
        try {
            long alignedLength = (image.lengthBytes() + 4095) / 4096 * 4096;
            read = filler.fill(image.key(), m.ssdGeneration(), pool.asSlice(image.offset(), alignedLength));
        } catch (RuntimeException e) {
            read = Future.failedFuture(e);
        }
        read.onComplete(ar -> {
            SsdReadResult result = ar.succeeded() ? ar.result() : null;
            try {
                store.finishMaterialization(image, result != null, result != null
                        ? Integer.toUnsignedLong(result.payloadCrc32c()) : ImageStore.ImageRef.CRC_UNKNOWN);
            } finally {
                inFlight--;
                try {
                    settled.settled(image, result, ticker.nanos() - startNanos);
                } finally {
                    if (inFlight == 0) {
                        List<Promise<Void>> waiters = List.copyOf(drainWaiters);
                        drainWaiters.clear();
                        waiters.forEach(Promise::tryComplete);
                    }
                }
            }
        });
    }

    /**
     * Counts a read the planning path submitted into a slot it reserved ({@link ImageStore#reserveFromSsd}) as in
     * flight until its future completes, so {@link #drained} waits for it too; refused once closed. The caller settles
     * the slot itself.
     */
    <T> Future<T> track(java.util.function.Supplier<Future<T>> read) {
        if (closed) {
            return Future.failedFuture(new IllegalStateException("the storage role is stopping"));
        }
        inFlight++;
        Future<T> started;
        try {
            started = read.get();
        } catch (RuntimeException e) {
            started = Future.failedFuture(e);
        }
        return started.andThen(ar -> {
            inFlight--;
            if (inFlight == 0) {
                List<Promise<Void>> waiters = List.copyOf(drainWaiters);
                drainWaiters.clear();
                waiters.forEach(Promise::tryComplete);
            }
        });
    }

    boolean closed() {
        return closed;
    }

    /** Reads submitted to the SSD role whose completion has not arrived. */
    int inFlight() {
        return inFlight;
    }

    /** Starts no more reads (ordered shutdown). */
    void close() {
        closed = true;
    }

    /** Completes once no read is in flight (at once when none is). */
    Future<Void> drained() {
        if (inFlight == 0) {
            return Future.succeededFuture();
        }
        Promise<Void> waiter = Promise.promise();
        drainWaiters.add(waiter);
        return waiter.future();
    }
}
