package io.orbitkv.peer;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.protocol.peer.PeerRejection;
import io.orbitkv.model.StateKey;
import io.orbitkv.storage.StorageProxy;
import io.vertx.core.Future;
import java.util.ArrayList;
import java.util.List;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.ExactPin;
import io.orbitkv.model.KeyEvidence;
import io.orbitkv.model.KeyGeneration;

/**
 * Peer SSD staging, source side: a reserve that names keys this Manager holds on its SSD (exact committed extent
 * generations, {@code PeerKey.from_ssd}) is served from bounded staging slots in this Manager's own pool, filled by a
 * verified io_uring read of its own extents, and then sent exactly like DRAM pages (same lease, same transfer, the
 * CRC32C of the verified read). An SSD extent is never exposed as readable memory: only the verified pool copy is.
 *
 * <p>Design note (ownership). The peer source's context owns this object (not thread-safe). One reserve acquires in a
 * fixed order, each step undone on a later failure: (1) metadata only ({@code discover}): every SSD key must still be
 * at exactly its advertised extent generation (else CHANGED_GENERATION, before anything is held); a key that is also
 * in DRAM here is served from its DRAM image (pinned at that exact generation), the others are staged; (2) the
 * requester's credits (all bytes of the lease) and this source's staging bound ({@code peer.staging-bytes}, allocator
 * -rounded footprint, all requesters together) are charged before any slot is allocated (beyond either: NO_CREDIT,
 * pinning nothing); (3) the DRAM keys are pinned at their exact generations; (4) the storage role reserves the staging
 * slots and takes exact-generation SSD extent leases ({@code acquireFromSsd}: a changed or evicted extent is
 * CHANGED_GENERATION, no room in the pool NO_CREDIT); (5) the storage role reads them back, verifying each extent's
 * CRC32C, and seals and pins them in one step ({@code readFromSsd}); a failed read (I/O or checksum) pins nothing and
 * serves nothing (SSD_READ_FAILED, counted in {@code orbitkv_peer_staging_failures_total}).
 *
 * <p>Release: the lease that received the staged pages owns them and their staging charge; whoever ends the lease
 * (the requester's Release, the lease expiry, the requester leaving membership, the role's stop: see
 * {@link PeerSource}) calls {@link #release}, which unpins the DRAM pages and asks the storage role to unpin and free
 * the staged ones ({@code releaseStaged}: a staged page someone else pinned meanwhile stays as an ordinary verified
 * cached image). The staging charge returns at once; the slots are free once the storage role ran the command.
 *
 * <p>Cancel and crash: a read already submitted is not cancelled; its hold completes in the storage role (which keeps
 * the slots and extent leases until every read is terminal), and the peer role then releases what it got if the lease
 * is no longer wanted (the role is stopping, or the requester left). A requester that crashes leaves the lease to its
 * expiry or to its departure from membership; a source that crashes loses its pool and staging with its process.
 *
 * <p>Staged pages pass through the storage role's ordinary materialization, so while a lease holds them they are
 * sealed DRAM images here (the residency stream advertises them, and freeing them advertises the surviving SSD
 * extent again).
 */
final class PeerSsdStaging {
    /** The requester's credits: charge all or nothing, refund what was charged. */
    interface Credits {
        boolean charge(long bytes);

        void refund(long bytes);
    }

    /** What one reserve got: every page in request order (pinned), the staged subset, and its charges. */
    record Held(List<ImageRef> refs, List<ImageRef> dram, List<ImageRef> staged,
                long bytes, long stagingFootprint) {}

    /** A reserve's outcome: held pages, or a rejection (key index -1 when none) with nothing held. */
    record Outcome(Held held, PeerRejection rejection, int keyIndex) {
        static Outcome rejected(PeerRejection reason, int index) {
            return new Outcome(null, reason, index);
        }
    }

    private final StorageProxy storage;
    private final long boundBytes;
    private final Counter stagedPages;
    private final Counter failures;
    private long inUseBytes;

    PeerSsdStaging(StorageProxy storage, long boundBytes, MeterRegistry registry) {
        this.storage = storage;
        this.boundBytes = boundBytes;
        stagedPages = Counter.builder("orbitkv_peer_staged_pages_total")
                .description("Pages this source read back from its SSD into staging for peer leases").register(registry);
        failures = Counter.builder("orbitkv_peer_staging_failures_total")
                .description("Peer reserves refused because this source's SSD read-back failed (I/O or CRC32C)")
                .register(registry);
        Gauge.builder("orbitkv_peer_staging_bytes", this, s -> s.inUseBytes).baseUnit("bytes")
                .description("Pool bytes (allocator-rounded) staged from SSD for peer leases now").register(registry);
    }

    long inUseBytes() {
        return inUseBytes;
    }

    /**
     * Acquires {@code keys} at {@code generations}; {@code fromSsd.get(i)}: generation i is an SSD extent generation,
     * else a DRAM slot generation. Nothing is held when the outcome is a rejection.
     */
    Future<Outcome> acquire(List<StateKey> keys, List<Long> generations, List<Boolean> fromSsd, Credits credits) {
        return storage.discover(keys).compose(evidence -> {
            boolean any = false;
            List<KeyGeneration> dram = new ArrayList<>();
            List<KeyGeneration> ssd = new ArrayList<>();
            boolean[] staged = new boolean[keys.size()];
            long bytes = 0;
            long footprint = 0;
            for (int i = 0; i < keys.size(); i++) {
                KeyEvidence e = evidence.get(i);
                any |= e.dramGeneration() >= 0 || e.ssdGeneration() >= 0;
                if (fromSsd.get(i)) {
                    if (e.ssdGeneration() != generations.get(i)) {
                        continue; // judged below, once UNKNOWN_NAMESPACE is ruled out
                    }
                    if (e.dramGeneration() >= 0) {
                        dram.add(new KeyGeneration(keys.get(i), e.dramGeneration()));
                        bytes += e.dramBytes();
                    } else {
                        staged[i] = true;
                        ssd.add(new KeyGeneration(keys.get(i), e.ssdGeneration()));
                        bytes += e.ssdBytes();
                        footprint += StorageProxy.slotBytesOf(e.ssdBytes());
                    }
                } else if (e.dramGeneration() == generations.get(i)) {
                    dram.add(new KeyGeneration(keys.get(i), e.dramGeneration()));
                    bytes += e.dramBytes();
                }
            }
            if (!any) {
                return Future.succeededFuture(Outcome.rejected(PeerRejection.UNKNOWN_NAMESPACE, -1));
            }
            for (int i = 0; i < keys.size(); i++) {
                KeyEvidence e = evidence.get(i);
                boolean current = fromSsd.get(i) ? e.ssdGeneration() == generations.get(i)
                        : e.dramGeneration() == generations.get(i);
                if (!current || (staged[i] && e.writing())) {
                    return Future.succeededFuture(Outcome.rejected(PeerRejection.CHANGED_GENERATION, i));
                }
            }
            if (footprint > 0 && inUseBytes + footprint > boundBytes) {
                return Future.succeededFuture(Outcome.rejected(PeerRejection.NO_CREDIT, -1));
            }
            if (!credits.charge(bytes)) {
                return Future.succeededFuture(Outcome.rejected(PeerRejection.NO_CREDIT, -1));
            }
            inUseBytes += footprint;
            long charged = bytes;
            long stagedFootprint = footprint;
            return pinAndStage(keys, dram, ssd, staged).transform(ar -> {
                Outcome outcome = ar.succeeded() ? ar.result() : Outcome.rejected(PeerRejection.SSD_READ_FAILED, -1);
                if (outcome.held() == null) {
                    credits.refund(charged);
                    inUseBytes -= stagedFootprint;
                    return Future.succeededFuture(outcome);
                }
                Held h = outcome.held();
                return Future.succeededFuture(new Outcome(new Held(h.refs(), h.dram(), h.staged(), charged,
                        stagedFootprint), null, -1));
            });
        });
    }

    private Future<Outcome> pinAndStage(List<StateKey> keys, List<KeyGeneration> dram,
                                        List<KeyGeneration> ssd, boolean[] staged) {
        Future<ExactPin> pinned = dram.isEmpty()
                ? Future.succeededFuture(new ExactPin(true, List.of(List.of()), 0, null))
                : storage.pinGenerations(dram);
        return pinned.compose(pin -> {
            if (!pin.complete()) {
                return Future.succeededFuture(Outcome.rejected(PeerRejection.CHANGED_GENERATION, keys.indexOf(pin.missing())));
            }
            List<ImageRef> dramRefs = pin.pinned().getFirst();
            if (ssd.isEmpty()) {
                return Future.succeededFuture(new Outcome(new Held(dramRefs, dramRefs, List.of(), 0, 0), null, -1));
            }
            return storage.acquireFromSsd(ssd).compose(hold -> {
                if (hold.hold() <= 0) {
                    PeerRejection reason = hold.staleKey() == null ? PeerRejection.NO_CREDIT : PeerRejection.CHANGED_GENERATION;
                    int index = hold.staleKey() == null ? -1 : keys.indexOf(hold.staleKey());
                    return unpinDram(dramRefs).map(v -> Outcome.rejected(reason, index));
                }
                return storage.readFromSsd(hold.hold()).transform(read -> {
                    if (read.failed()) {
                        failures.increment();
                        return unpinDram(dramRefs).map(v -> Outcome.rejected(PeerRejection.SSD_READ_FAILED, -1));
                    }
                    List<ImageRef> stagedRefs = read.result();
                    stagedPages.increment(stagedRefs.size());
                    List<ImageRef> ordered = new ArrayList<>(keys.size());
                    int d = 0;
                    int s = 0;
                    for (int i = 0; i < keys.size(); i++) {
                        ordered.add(staged[i] ? stagedRefs.get(s++) : dramRefs.get(d++));
                    }
                    return Future.succeededFuture(new Outcome(new Held(ordered, dramRefs, stagedRefs, 0, 0), null, -1));
                });
            }, failure -> unpinDram(dramRefs).map(v -> Outcome.rejected(PeerRejection.SSD_READ_FAILED, -1)));
        });
    }

    private Future<Void> unpinDram(List<ImageRef> refs) {
        return refs.isEmpty() ? Future.succeededFuture() : storage.unpinRefs(refs, false).<Void>mapEmpty().otherwiseEmpty();
    }

    /** Ends what {@link #acquire} held: DRAM pins dropped, staged pages unpinned and freed, the staging charge back. */
    Future<Void> release(Held held) {
        inUseBytes -= held.stagingFootprint();
        Future<Void> dram = unpinDram(held.dram());
        Future<Void> staged = held.staged().isEmpty() ? Future.succeededFuture()
                : storage.releaseStaged(held.staged()).<Void>mapEmpty().otherwiseEmpty();
        return Future.join(dram, staged).mapEmpty();
    }
}
