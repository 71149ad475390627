package io.orbitkv.ssd;

import io.orbitkv.common.BoundedHandoff;
import io.orbitkv.common.RoleProxies;
import io.orbitkv.model.StateKey;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Handler;
import io.vertx.core.Vertx;
import io.vertx.core.eventbus.DeliveryOptions;
import io.vertx.core.eventbus.EventBus;
import io.vertx.core.eventbus.ReplyException;
import io.vertx.core.eventbus.ReplyFailure;
import java.util.List;
import java.util.concurrent.TimeUnit;
import io.orbitkv.model.SsdEntry;
import io.orbitkv.model.SsdLease;
import io.orbitkv.model.SsdPageOutcome;
import io.orbitkv.model.SsdReadResult;
import io.orbitkv.model.SsdResidencyChange;
import io.orbitkv.model.WeakImageSource;
import io.orbitkv.model.SsdWritePolicy;

/**
 * Typed proxy of the SSD role: one method per command; callers never see event-bus addresses. Failures come back as
 * {@link SsdException} with the role's {@link SsdFailure}.
 *
 * <p>Integration: the storage role calls {@link #offerWrite} when a publish is sealed (holding only a weak source)
 * and, under the reuse-aware policy ({@link #writePolicy}), {@link #noteReuse} when a resident image is seen again,
 * subscribes to {@link #residencyChanges} (seeded by {@link #committedEntries}) for its residency stream; the query
 * path calls {@link #lookup} (metadata only), then, one command each for all the pages of a read-back,
 * {@link #acquireLeases} for the exact generations it selected, {@link #readInto} their pool slots, and
 * {@link #release} once the slots hold the bytes (or when it gives up before reading).
 */
public final class SsdProxy {
    static final String OFFER_WRITE = "orbitkv.ssd.offer-write";
    static final String NOTE_REUSE = "orbitkv.ssd.note-reuse";
    static final String WRITE_POLICY = "orbitkv.ssd.write-policy";
    static final String LOOKUP = "orbitkv.ssd.lookup";
    static final String ACQUIRE_LEASES = "orbitkv.ssd.acquire-leases";
    static final String READ_INTO = "orbitkv.ssd.read-into";
    static final String RELEASE = "orbitkv.ssd.release";
    static final String STATS = "orbitkv.ssd.stats";
    static final String COMMITTED_ENTRIES = "orbitkv.ssd.committed-entries";
    static final String RESIDENCY = "orbitkv.ssd.residency";

    private final Vertx vertx;
    private final EventBus bus;
    private final DeliveryOptions options = new DeliveryOptions().setSendTimeout(30_000).setLocalOnly(true);
    /**
     * A read's slots belong to the SSD role until it answers (the caller frees them only then), so a read command
     * does not time out at the caller (a year stands for never; the bus needs a positive timeout): a timeout that freed
     * slots while their I/O still runs would serve wrong bytes.
     */
    private final DeliveryOptions readOptions = new DeliveryOptions().setSendTimeout(TimeUnit.DAYS.toMillis(365))
            .setLocalOnly(true);

    public SsdProxy(Vertx vertx) {
        this.vertx = vertx;
        this.bus = vertx.eventBus();
    }

    /**
     * Fire-and-forget through the SSD role's bounded hand-off ({@link BoundedHandoff}): the role queues the write or
     * drops and counts it; a full hand-off refuses it (counted); never blocks, never replies.
     */
    public void offerWrite(StateKey key, WeakImageSource source, long lengthBytes) {
        handOff(new SsdCommands.OfferWrite(key, source, lengthBytes));
    }

    private void handOff(Object offer) {
        BoundedHandoff<Object> offers = BoundedHandoff.find(vertx, OFFER_WRITE);
        if (offers != null) {
            offers.offer(offer);
        }
    }

    /**
     * Fire-and-forget: sealed DRAM images seen again (a query hit, a publish naming a resident key), for the
     * reuse-aware write policy; each entry carries the weak source to write from. See {@link SsdStore#noteReuse}.
     */
    public void noteReuse(List<SsdCommands.OfferWrite> images) {
        handOff(new SsdCommands.NoteReuse(images));
    }

    /** The write policy the SSD role applies (callers skip reporting reuse when it is ALL). */
    public Future<SsdWritePolicy> writePolicy() {
        return request(WRITE_POLICY, new SsdCommands.GetWritePolicy());
    }

    /** Metadata only, one entry per key in order: present + exact generation + length, or absent. */
    public Future<List<SsdEntry>> lookup(List<StateKey> keys) {
        return this.<SsdCommands.Entries>request(LOOKUP, new SsdCommands.Lookup(keys)).map(SsdCommands.Entries::entries);
    }

    /**
     * Pins each page's extent at exactly its generation, in one command: one outcome per page, in order (a failed one
     * is NOT_FOUND, STALE_GENERATION or CLOSED); the caller owns the leases taken and releases them with
     * {@link #release}, also when it gives up because another page failed.
     */
    public Future<List<SsdPageOutcome<SsdLease>>> acquireLeases(List<SsdCommands.AcquireLease> pages) {
        return this.<SsdCommands.LeaseOutcomes>request(ACQUIRE_LEASES, new SsdCommands.AcquireLeases(pages))
                .map(SsdCommands.LeaseOutcomes::leases);
    }

    /**
     * Reads each leased page into its destination (a 4096-aligned pool slot, ideally holding the length rounded up to
     * 4096) and verifies it, in one command: one outcome per read, in order. Every destination belongs to the SSD role
     * until the future completes, which is only once every read of the batch is terminal.
     */
    public Future<List<SsdPageOutcome<SsdReadResult>>> readInto(List<SsdCommands.ReadInto> reads) {
        return this.<SsdCommands.ReadOutcomes>request(READ_INTO, new SsdCommands.ReadAll(reads), readOptions)
                .map(SsdCommands.ReadOutcomes::reads);
    }

    /** Ends these leases in one command; answers how many were held (an ended one is skipped). */
    public Future<Integer> release(List<SsdLease> leases) {
        return request(RELEASE, new SsdCommands.Release(leases));
    }

    public Future<SsdStats> stats() {
        return request(STATS, new SsdCommands.GetStats());
    }

    /** Every committed extent now: the seed for a residency stream that then follows {@link #residencyChanges}. */
    public Future<List<SsdEntry>> committedEntries() {
        return this.<SsdCommands.Entries>request(COMMITTED_ENTRIES, new SsdCommands.GetCommittedEntries())
                .map(SsdCommands.Entries::entries);
    }

    /**
     * SSD_ADDED / SSD_REMOVED notifications, in order, on the caller's context (or a new one outside Vert.x), through
     * the SSD role's bounded residency hand-off. When it was full, a change was lost: {@link BoundedHandoff#overflowed}
     * says so, and the follower resyncs from {@link #committedEntries}. Close the hand-off to stop.
     */
    public BoundedHandoff<SsdResidencyChange> residencyChanges(Handler<SsdResidencyChange> handler) {
        BoundedHandoff<SsdResidencyChange> changes = BoundedHandoff.find(vertx, RESIDENCY);
        if (changes == null) {
            throw new IllegalStateException("the SSD role is not running on this Vertx");
        }
        Context current = Vertx.currentContext();
        changes.open(current != null ? current : vertx.getOrCreateContext(), handler::handle);
        return changes;
    }

    private <R> Future<R> request(String address, Object command) {
        return request(address, command, options);
    }

    private <R> Future<R> request(String address, Object command, DeliveryOptions deliveryOptions) {
        return RoleProxies.<R>request(bus, address, command, deliveryOptions).recover(failure -> Future.failedFuture(
                toSsdException(failure)));
    }

    static Throwable toSsdException(Throwable failure) {
        if (failure instanceof ReplyException reply && reply.failureType() == ReplyFailure.RECIPIENT_FAILURE) {
            SsdFailure ssd = SsdFailure.forCode(reply.failureCode());
            if (ssd != null) {
                return new SsdException(ssd, reply.getMessage());
            }
        }
        return failure;
    }
}
