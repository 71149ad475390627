package io.orbitkv.storage;

import io.orbitkv.common.Ticker;
import io.orbitkv.ssd.SsdCommands;
import io.orbitkv.model.SsdLease;
import io.orbitkv.model.SsdPageOutcome;
import io.orbitkv.model.SsdReadResult;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import io.orbitkv.model.StateKey;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.Materialization;
import io.orbitkv.model.KeyGeneration;
import io.orbitkv.model.SsdReservation;

/**
 * Reads pages that survive on SSD only back into pool slots, for the storage role: the fire-and-forget read-back of
 * {@link #start}, and the planning role's two steps ({@link #acquire} a hold, then {@link #read} or {@link #release}).
 *
 * <p>Design note (ownership): a read-back is three commands to the SSD role whatever its page count: lease every
 * page's exact generation, read every leased page into its slot, release the leases. Each slot reserved in the
 * {@link ImageStore} (WRITING, invisible to queries) is owned here until it settles, exactly once: sealed with the
 * read's CRC32C when its verified read completed, freed in every other case (no lease, a failed read, a command that
 * failed or threw). A hold owns its slots and leases until it is read or released; it is never read twice. While a
 * read command is in flight its slots belong to the SSD role, which writes into them through the pool mapping and
 * answers only when every read of the command is terminal: {@link #inFlight} counts those pages and {@link #drained}
 * completes when none is left. The ordered stop starts no more reads ({@link #close}) and awaits {@link #drained}
 * before the SSD role closes and the pool is unmapped. Confined to the storage role's loop; the SSD commands' futures
 * complete on it.
 */
final class Materializer {
    /** The SSD role's batched read-back commands (those of {@link io.orbitkv.ssd.SsdProxy}). */
    interface SsdReadBack {
        Future<List<SsdPageOutcome<SsdLease>>> acquireLeases(List<SsdCommands.AcquireLease> pages);

        Future<List<SsdPageOutcome<SsdReadResult>>> readInto(List<SsdCommands.ReadInto> reads);

        Future<Integer> release(List<SsdLease> leases);
    }

    /** Told once per read-back, with one outcome per page in order (metrics and cost observations). */
    @FunctionalInterface
    interface Settled {
        void settled(List<ImageRef> images, List<SsdPageOutcome<SsdReadResult>> outcomes, long elapsedNanos);
    }

    /** Reserved slots and the exact-generation leases taken for them, one per slot, in order. */
    private record Hold(List<Materialization> slots, List<SsdLease> leases) {}

    private final ImageStore store;
    private final MemorySegment pool;
    private final SsdReadBack ssd;
    private final Settled settled;
    private final Ticker ticker;
    private final List<Promise<Void>> drainWaiters = new ArrayList<>();
    private final Map<Long, Hold> holds = new HashMap<>();
    private long nextHold = 1;
    private int inFlight;
    private boolean closed;

    Materializer(ImageStore store, MemorySegment pool, SsdReadBack ssd, Settled settled, Ticker ticker) {
        this.store = store;
        this.pool = pool;
        this.ssd = ssd;
        this.settled = settled;
        this.ticker = ticker;
    }

    /** Reserves slots for the keys on SSD only and starts reading them back; answers how many (0 once closed). */
    int start(List<StateKey> keys) {
        if (closed) {
            return 0;
        }
        List<Materialization> reserved = store.materialize(keys);
        if (reserved.isEmpty()) {
            return 0;
        }
        int pages = reserved.size();
        List<ImageRef> images = imagesOf(reserved);
        inFlight += pages;
        long startNanos = ticker.nanos();
        leaseAll(reserved).compose(leases -> {
            // Pages without a lease are misses now; the leased ones are read, then every lease is released.
            List<ImageRef> leasedImages = new ArrayList<>(pages);
            List<SsdLease> taken = new ArrayList<>(pages);
            for (int i = 0; i < pages; i++) {
                if (leases.get(i).succeeded()) {
                    leasedImages.add(images.get(i));
                    taken.add(leases.get(i).value());
                }
            }
            return readSlots(leasedImages, taken).compose(reads -> {
                List<SsdPageOutcome<SsdReadResult>> outcomes = new ArrayList<>(pages);
                int next = 0;
                for (SsdPageOutcome<SsdLease> lease : leases) {
                    outcomes.add(lease.succeeded() ? reads.get(next++) : SsdPageOutcome.failed(lease.failure()));
                }
                return releaseQuietly(taken).map(outcomes);
            });
        }).onComplete(ar -> {
            List<SsdPageOutcome<SsdReadResult>> outcomes = ar.succeeded() ? ar.result()
                    : Collections.nCopies(pages, SsdPageOutcome.failed(ar.cause()));
            try {
                for (int i = 0; i < pages; i++) {
                    SsdPageOutcome<SsdReadResult> outcome = outcomes.get(i);
                    store.finishMaterialization(images.get(i), outcome.succeeded(), crcOf(outcome));
                }
            } finally {
                inFlight -= pages;
                try {
                    settled.settled(images, outcomes, ticker.nanos() - startNanos);
                } finally {
                    signalDrained();
                }
            }
        });
        return pages;
    }

    /**
     * Planning's step one: reserves a slot per page and leases each page's extent at exactly its generation, all or
     * nothing. Answers a hold id, or none with the first key whose evidence was stale (or null: the pool had no room).
     */
    Future<StorageCommands.SsdHold> acquire(List<KeyGeneration> pages) {
        if (closed) {
            return Future.failedFuture(new IllegalStateException("the storage role is stopping"));
        }
        SsdReservation reservation = store.reserveFromSsd(pages);
        if (!reservation.complete()) {
            return Future.succeededFuture(new StorageCommands.SsdHold(0, reservation.missing()));
        }
        List<Materialization> reserved = reservation.reserved();
        return leaseAll(reserved).compose(leases -> {
            List<SsdLease> taken = new ArrayList<>(leases.size());
            StateKey stale = null;
            for (int i = 0; i < leases.size(); i++) {
                if (leases.get(i).succeeded()) {
                    taken.add(leases.get(i).value());
                } else if (stale == null) {
                    stale = reserved.get(i).image().key();
                }
            }
            if (stale == null) {
                long id = nextHold++;
                holds.put(id, new Hold(reserved, List.copyOf(taken)));
                return Future.succeededFuture(new StorageCommands.SsdHold(id, null));
            }
            for (Materialization m : reserved) {
                store.finishMaterialization(m.image(), false, ImageRef.CRC_UNKNOWN);
            }
            StateKey staleKey = stale;
            return releaseQuietly(taken).map(new StorageCommands.SsdHold(0, staleKey));
        });
    }

    /**
     * Step two: reads every page of the hold into its slot (verified); when every read is terminal, seals and pins
     * them all in one step, or, if any failed, seals the good ones unpinned (they are real bytes), frees the rest and
     * fails: a wrong byte is never served, and a failed read-back leaves nothing pinned. The leases end either way.
     */
    Future<List<ImageRef>> read(long id) {
        Hold hold = holds.remove(id);
        if (hold == null) {
            return Future.failedFuture(new IllegalStateException("no unread SSD hold " + id));
        }
        List<ImageRef> images = imagesOf(hold.slots());
        int pages = images.size();
        Future<List<SsdPageOutcome<SsdReadResult>>> reads;
        if (closed) {
            reads = Future.succeededFuture(Collections.nCopies(pages,
                    SsdPageOutcome.failed(new IllegalStateException("the storage role is stopping"))));
        } else {
            inFlight += pages;
            long startNanos = ticker.nanos();
            reads = readSlots(images, hold.leases()).andThen(ar -> {
                inFlight -= pages;
                try {
                    settled.settled(images, ar.result(), ticker.nanos() - startNanos);
                } finally {
                    signalDrained();
                }
            });
        }
        return reads.compose(outcomes -> {
            boolean all = outcomes.stream().allMatch(SsdPageOutcome::succeeded);
            List<ImageRef> pinned = new ArrayList<>(pages);
            Throwable cause = null;
            for (int i = 0; i < pages; i++) {
                SsdPageOutcome<SsdReadResult> outcome = outcomes.get(i);
                if (all) {
                    pinned.add(store.finishMaterializationPinned(images.get(i), crcOf(outcome)));
                } else {
                    store.finishMaterialization(images.get(i), outcome.succeeded(), crcOf(outcome));
                    cause = cause == null ? outcome.failure() : cause;
                }
            }
            Throwable failure = cause;
            return releaseQuietly(hold.leases()).compose(v -> all ? Future.succeededFuture(List.copyOf(pinned))
                    : Future.failedFuture(failure));
        });
    }

    /** Ends a hold that was never read: frees its slots and ends its leases; false when there is no such hold. */
    Future<Boolean> release(long id) {
        Hold hold = holds.remove(id);
        if (hold == null) {
            return Future.succeededFuture(false);
        }
        for (Materialization m : hold.slots()) {
            store.finishMaterialization(m.image(), false, ImageRef.CRC_UNKNOWN);
        }
        return releaseQuietly(hold.leases()).map(true);
    }

    /** One lease command for every slot; never fails: a failed command is a failed outcome for each page. */
    private Future<List<SsdPageOutcome<SsdLease>>> leaseAll(List<Materialization> slots) {
        List<SsdCommands.AcquireLease> pages = new ArrayList<>(slots.size());
        for (Materialization m : slots) {
            pages.add(new SsdCommands.AcquireLease(m.image().key(), m.ssdGeneration()));
        }
        return answered(() -> ssd.acquireLeases(pages), pages.size());
    }

    /** One read command for every slot under its lease, in order; never fails (as {@link #leaseAll}). */
    private Future<List<SsdPageOutcome<SsdReadResult>>> readSlots(List<ImageRef> images,
                                                                   List<SsdLease> leases) {
        if (images.isEmpty()) {
            return Future.succeededFuture(List.of());
        }
        List<SsdCommands.ReadInto> reads = new ArrayList<>(images.size());
        for (int i = 0; i < images.size(); i++) {
            ImageRef image = images.get(i);
            long alignedLength = (image.lengthBytes() + 4095) / 4096 * 4096;
            reads.add(new SsdCommands.ReadInto(leases.get(i), pool.asSlice(image.offset(), alignedLength)));
        }
        return answered(() -> ssd.readInto(reads), reads.size());
    }

    /** Releases leases in one command (none: no command); a failure is ignored: the SSD role's close ends them. */
    private Future<Void> releaseQuietly(List<SsdLease> leases) {
        if (leases.isEmpty()) {
            return Future.succeededFuture();
        }
        try {
            return ssd.release(leases).<Void>mapEmpty().otherwiseEmpty();
        } catch (RuntimeException e) {
            return Future.succeededFuture();
        }
    }

    /** A command's per-page answer, checked for its length; a failed or throwing command fails every page. */
    private static <T> Future<List<SsdPageOutcome<T>>> answered(Supplier<Future<List<SsdPageOutcome<T>>>> command,
                                                                int pages) {
        Future<List<SsdPageOutcome<T>>> sent;
        try {
            sent = command.get();
        } catch (RuntimeException e) {
            sent = Future.failedFuture(e);
        }
        return sent.transform(ar -> {
            if (ar.succeeded() && ar.result().size() == pages) {
                return Future.succeededFuture(ar.result());
            }
            Throwable cause = ar.failed() ? ar.cause()
                    : new IllegalStateException(ar.result().size() + " outcomes for " + pages + " pages");
            return Future.succeededFuture(Collections.nCopies(pages, SsdPageOutcome.failed(cause)));
        });
    }

    private static List<ImageRef> imagesOf(List<Materialization> slots) {
        List<ImageRef> images = new ArrayList<>(slots.size());
        for (Materialization m : slots) {
            images.add(m.image());
        }
        return images;
    }

    private static long crcOf(SsdPageOutcome<SsdReadResult> outcome) {
        return outcome.succeeded() ? Integer.toUnsignedLong(outcome.value().payloadCrc32c())
                : ImageRef.CRC_UNKNOWN;
    }

    private void signalDrained() {
        if (inFlight == 0 && !drainWaiters.isEmpty()) {
            List<Promise<Void>> waiters = List.copyOf(drainWaiters);
            drainWaiters.clear();
            waiters.forEach(Promise::tryComplete);
        }
    }

    boolean closed() {
        return closed;
    }

    /** Pages of read-backs submitted to the SSD role whose answer has not arrived. */
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
