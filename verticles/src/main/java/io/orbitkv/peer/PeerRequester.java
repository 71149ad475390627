package io.orbitkv.peer;

import com.google.protobuf.ByteString;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.model.MemberRecord;
import io.orbitkv.common.RateLimitedLog;
import io.orbitkv.common.Ticker;
import io.orbitkv.model.cost.CostPath;
import io.orbitkv.cost.CostProxy;
import io.orbitkv.model.cost.ObservationOutcome;
import io.orbitkv.model.cost.ObservationRecord;
import io.orbitkv.model.cost.ObservedBytes;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.protocol.peer.PeerGrant;
import io.orbitkv.protocol.peer.PeerKey;
import io.orbitkv.protocol.peer.PeerPage;
import io.orbitkv.protocol.peer.PeerRejection;
import io.orbitkv.protocol.peer.PeerReleaseRequest;
import io.orbitkv.protocol.peer.PeerReserveRequest;
import io.orbitkv.protocol.peer.PeerTransferGrpcClient;
import io.orbitkv.model.StateKey;
import io.orbitkv.storage.StorageCommands;
import io.orbitkv.storage.StorageProxy;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.net.SocketAddress;
import io.vertx.grpc.client.GrpcClient;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.SlotGrant;
import io.orbitkv.model.MemberDirectory;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The requester role of the peer package: fetches a peer's pages into local slots (acquire, then submit, or abandon).
 *
 * <p>Design note (ownership). An acquired fetch ({@link PeerCommands.Acquired}) owns the source's lease and an unsealed
 * publish in the local store whose slots were allocated after the lease was granted. Submit moves the payload, then
 * one storage command seals (verifying the source's CRC32C: a mismatch aborts the publish, is counted and never
 * served) and, when asked, pins the pages in the same step, so nothing can evict them between seal and pin. A transfer
 * that failed after submission is fenced (the transport writes nothing more and its verifiers read no slot) before
 * the slots are aborted. Submit, abandon or a failure releases the source lease (best effort: the source's expiry
 * releases it otherwise).
 *
 * <p>Time: one budget spans CANDIDATE → RESERVED → RESIDENT → READY, on the injected clock; each stage gets what is
 * left. Concurrency: every method runs on the peer role's context (the transport answers there too).
 */
final class PeerRequester {
    private static final Logger LOG = LoggerFactory.getLogger(PeerRequester.class);
    /** The storage instance id under which fetched pages are published locally. */
    static final long PEER_INSTANCE = Long.MAX_VALUE - 12;
    static final String PEER_ENDPOINT = "peer";

    private final Context context;
    private final MemberDirectory membership;
    private final GrpcClient grpc;
    private final StorageProxy storage;
    private final PeerTransport transport;
    private final Supplier<MemorySegment> pool;
    private final CostProxy cost;
    private final Ticker ticker;
    private final Counter mismatches;
    private final Counter fetchedPages;
    /** Fetches that failed, by {@link PeerException.Kind} (a bounded label). */
    private final Map<PeerException.Kind, Counter> failures = new EnumMap<>(PeerException.Kind.class);
    private final RateLimitedLog failureLog;
    private volatile PeerVerticle.ReserveGate reserveGate = PeerVerticle.ReserveGate.OPEN;

    PeerRequester(Context context, MemberDirectory membership, GrpcClient grpc, StorageProxy storage,
                  PeerTransport transport, Supplier<MemorySegment> pool, CostProxy cost, MeterRegistry registry,
                  Ticker ticker) {
        this.context = context;
        this.membership = membership;
        this.grpc = grpc;
        this.storage = storage;
        this.transport = transport;
        this.pool = pool;
        this.cost = cost;
        this.ticker = ticker;
        this.failureLog = new RateLimitedLog(LOG, ticker, RateLimitedLog.INTERVAL_DEFAULT);
        mismatches = Counter.builder("orbitkv_peer_checksum_mismatches_total")
                .description("Fetched peer pages whose bytes did not match the source's CRC32C (never served)").register(registry);
        fetchedPages = Counter.builder("orbitkv_peer_fetched_pages_total")
                .description("Pages fetched from peers and sealed here").register(registry);
        for (PeerException.Kind kind : PeerException.Kind.values()) {
            failures.put(kind, Counter.builder("orbitkv_peer_fetch_failures_total")
                    .tag("kind", kind.name().toLowerCase(Locale.ROOT))
                    .description("Peer fetches this requester gave up, by kind (timeout: the attempt's bound passed, "
                            + "the transfer was fenced)").register(registry));
        }
    }

    void reserveGate(PeerVerticle.ReserveGate gate) {
        this.reserveGate = gate;
    }

    Future<PeerCommands.Fetched> fetch(PeerCommands.Pages pages) {
        return acquire(pages).compose(a -> submit(a, false));
    }

    /** CANDIDATE → RESERVED: the source lease, then the local slots; no payload moves. All or nothing. */
    Future<PeerCommands.Acquired> acquire(PeerCommands.Pages p) {
        if (!p.fromSsd().isEmpty() && p.fromSsd().size() != p.keys().size()) {
            return Future.failedFuture(new IllegalArgumentException("one fromSsd flag per key, or none"));
        }
        long started = ticker.nanos();
        long budget = p.budget().toNanos();
        return reserve(p, started + budget).compose(r -> slots(r.client, r.grant, p, started, budget))
                .onFailure(failure -> countFailure(p.owner(), failure));
    }

    private record Reserved(PeerTransferGrpcClient client, PeerGrant grant) {}

    private Future<Reserved> reserve(PeerCommands.Pages p, long deadline) {
        PeerOwner owner = p.owner();
        MemberRecord record = membership.members().get(owner.memberId());
        if (record == null || record.incarnation() != owner.incarnation()) {
            return Future.failedFuture(new PeerException(PeerException.Kind.REJECTED, PeerRejection.STALE_INCARNATION,
                    "the owner is not a current member at that incarnation"));
        }
        String endpoint = record.endpoints().get(PEER_ENDPOINT);
        if (endpoint == null) {
            return Future.failedFuture(new PeerException(PeerException.Kind.UNREACHABLE, "the owner serves no peer port"));
        }
        PeerReserveRequest.Builder request = PeerReserveRequest.newBuilder()
                .setNamespace(ByteString.copyFrom(p.namespace())).setSourceIncarnation(owner.incarnation())
                .setRequesterIncarnation(membership.incarnation());
        for (int i = 0; i < p.keys().size(); i++) {
            StateKey key = p.keys().get(i);
            request.addKeys(PeerKey.newBuilder().setGroupId(key.groupId()).setBlockHash(ByteString.copyFrom(key.blockHash()))
                    .setGeneration(p.generations().get(i)).setFromSsd(!p.fromSsd().isEmpty() && p.fromSsd().get(i)));
        }
        int colon = endpoint.lastIndexOf(':');
        PeerTransferGrpcClient client = PeerTransferGrpcClient.create(grpc, SocketAddress.inetSocketAddress(
                Integer.parseInt(endpoint.substring(colon + 1)), endpoint.substring(0, colon)));
        return gate(owner).compose(v -> client.reserve(request.setLeaseMs(remainingMillis(deadline)).build()))
                .timeout(remainingMillis(deadline), TimeUnit.MILLISECONDS)
                .recover(e -> Future.failedFuture(e instanceof PeerException ? e
                        : new PeerException(PeerException.Kind.UNREACHABLE, "reserve failed: " + e.getMessage())))
                .compose(reply -> reply.hasReject()
                        ? Future.failedFuture(new PeerException(PeerException.Kind.REJECTED, reply.getReject().getReason(),
                                "the source refused: " + reply.getReject().getReason()))
                        : Future.succeededFuture(new Reserved(client, reply.getGrant())));
    }

    /** The {@link PeerVerticle.ReserveGate}'s answer for {@code owner}, completed back on this role's context. */
    private Future<Void> gate(PeerOwner owner) {
        PeerVerticle.ReserveGate gate = reserveGate;
        if (gate == PeerVerticle.ReserveGate.OPEN) {
            return Future.succeededFuture();
        }
        Promise<Void> passed = Promise.promise();
        gate.beforeReserve(owner).onComplete(ar -> context.runOnContext(v -> passed.handle(ar)));
        return passed.future();
    }

    private Future<PeerCommands.Acquired> slots(PeerTransferGrpcClient client, PeerGrant grant, PeerCommands.Pages p,
                                               long started, long budget) {
        List<Long> lengths = grant.getPagesList().stream().map(PeerPage::getLengthBytes).toList();
        return storage.allocate(PEER_INSTANCE, p.keys(), lengths).recover(e -> {
            release(client, grant);
            return Future.failedFuture(new PeerException(PeerException.Kind.REJECTED, "no local slots: " + e.getMessage()));
        }).map(allocated -> {
            MemorySegment local = pool.get();
            List<PeerTransport.Destination> destinations = new ArrayList<>();
            List<ImageRef> written = new ArrayList<>();
            List<Integer> crcs = new ArrayList<>();
            List<Integer> slotDestinations = new ArrayList<>();
            for (int i = 0; i < allocated.slots().size(); i++) {
                SlotGrant slot = allocated.slots().get(i);
                if (slot.allocated()) {
                    destinations.add(new PeerTransport.Destination(local.asSlice(slot.ref().offset(), lengths.get(i))));
                    written.add(slot.ref());
                    crcs.add(grant.getPages(i).getCrc32C());
                    slotDestinations.add(i);
                } else {
                    // already resident here: its bytes are received into scratch and dropped
                    destinations.add(new PeerTransport.Destination(Arena.ofAuto().allocate(lengths.get(i), 4096)));
                }
            }
            PeerCommands.Acquired acquired = new PeerCommands.Acquired(client, grant, allocated.publishId(),
                    destinations, written, crcs, lengths, p.keys(), started + budget, budget,
                    new ArrayList<>(List.of(PeerCommands.Stage.CANDIDATE, PeerCommands.Stage.RESERVED)), p.owner(),
                    started);
            acquired.slotDestinations.addAll(slotDestinations);
            return acquired;
        });
    }

    /** Ends an acquired fetch that will not be submitted: its local slots and the source lease go. */
    Future<Void> abandon(PeerCommands.Acquired acquired) {
        release(acquired.client, acquired.grant);
        return storage.abort(PEER_INSTANCE, acquired.publishId).<Void>mapEmpty().otherwiseEmpty();
    }

    /**
     * RESERVED → RESIDENT → READY: the payload into the slots, then the seal (and with {@code pin} the pins) in one
     * storage command. A failure after submission fences the transfer before the slots are aborted.
     */
    Future<PeerCommands.Fetched> submit(PeerCommands.Acquired a, boolean pin) {
        PeerGrant grant = a.grant;
        long submitted = ticker.nanos();
        PeerTransport.Receive receive = transport.receive(grant, a.destinations,
                Duration.ofMillis(remainingMillis(a.deadlineNanos)));
        return receive.completion().transform(ar -> {
            observe(a, CostPath.PEER_FETCH, ar.succeeded(), ticker.nanos() - submitted);
            if (ar.failed()) {
                // fenced first (nothing more lands in the slots), then the slots go
                Future<PeerCommands.Fetched> freed = receive.fence().compose(v -> storage.abort(PEER_INSTANCE, a.publishId))
                        .transform(x -> {
                            release(a.client, grant);
                            return Future.<PeerCommands.Fetched>failedFuture(ar.cause());
                        });
                // a fence that waits on the source (stopped mid-batch) must not hold the caller past its budget
                return receive.fenceWaitsOnPeer() ? Future.failedFuture(ar.cause()) : freed;
            }
            a.stages.add(PeerCommands.Stage.RESIDENT);
            StorageCommands.Seal seal = new StorageCommands.Seal(PEER_INSTANCE, a.publishId, a.crcs, a.written,
                    slotChecksums(receive.receivedChecksums(), a));
            return storage.sealAndPin(seal, pin ? a.keys : List.of()).transform(sealed -> {
                release(a.client, grant);
                return sealed.succeeded() ? ready(a, sealed.result())
                        : Future.failedFuture(mismatch(sealed.cause()));
            });
        }).onFailure(failure -> countFailure(a.owner, failure));
    }

    private PeerException mismatch(Throwable cause) {
        mismatches.increment();
        // the storage role aborted the publish on the mismatch (its slots are free again)
        return new PeerException(PeerException.Kind.CHECKSUM_MISMATCH,
                "the fetched bytes do not match the source's checksum: " + cause.getMessage());
    }

    private Future<PeerCommands.Fetched> ready(PeerCommands.Acquired a, StorageCommands.SealedAndPinned sealed) {
        List<ImageRef> pinned = List.of();
        if (sealed.pin() != null) {
            if (!sealed.pin().complete()) {
                return Future.failedFuture(new PeerException(PeerException.Kind.TRANSFER_FAILED,
                        "a page resident here before the fetch left the pool before it was pinned"));
            }
            pinned = sealed.pin().pinned().getFirst();
        }
        a.stages.add(PeerCommands.Stage.READY);
        observe(a, a.stagedPages() > 0 ? CostPath.PEER_SSD_HOST_READY_ROUTE : CostPath.PEER_HOST_READY_ROUTE,
                true, ticker.nanos() - a.startedNanos);
        fetchedPages.increment(a.written.size());
        return Future.succeededFuture(new PeerCommands.Fetched(List.copyOf(a.written), a.bytes(),
                List.copyOf(a.stages), pinned));
    }

    /**
     * The transport's received checksums of the local slots only (grant order), or null when it computed none or no
     * slot was allocated (the seal then reads the slots, or has nothing to verify).
     */
    private static List<Integer> slotChecksums(List<Integer> received, PeerCommands.Acquired a) {
        if (received == null || a.written.isEmpty() || received.size() != a.destinations.size()) {
            return null;
        }
        List<Integer> slots = new ArrayList<>(a.slotDestinations.size());
        for (int i : a.slotDestinations) {
            slots.add(received.get(i));
        }
        return slots;
    }

    /** Counts a failed attempt and logs it (rate-limited per kind and member; no key, lease or namespace named). */
    private void countFailure(PeerOwner owner, Throwable failure) {
        PeerException.Kind kind = failure instanceof PeerException e ? e.kind() : PeerException.Kind.TRANSFER_FAILED;
        failures.get(kind).increment();
        failureLog.warn("peer fetch " + kind.name().toLowerCase(Locale.ROOT), owner.memberId(), reason(failure, kind));
    }

    /** A fixed description of a failure: the kind's meaning, the rejection's name, or the exception's type. */
    static String reason(Throwable failure, PeerException.Kind kind) {
        if (!(failure instanceof PeerException e)) {
            return "the attempt failed (" + failure.getClass().getSimpleName() + ")";
        }
        return switch (kind) {
            case REJECTED -> "the source refused the reserve (" + e.rejection().name().toLowerCase(Locale.ROOT) + ")";
            case UNREACHABLE -> "the source or its endpoint did not answer before payload";
            case TRANSFER_FAILED -> "the transfer failed after submission (fenced, its slots freed)";
            case TIMEOUT -> "the attempt's waiting budget ran out";
            case CHECKSUM_MISMATCH -> "the fetched bytes did not match the source's checksum (never served)";
        };
    }

    private void observe(PeerCommands.Acquired a, CostPath path, boolean succeeded, long nanos) {
        if (cost == null || !cost.observationsEnabled()) {
            return;
        }
        long bytes = a.bytes();
        cost.report(ObservationRecord.of(PeerCommands.costKey(path, a.owner, bytes, a.lengths.size()),
                succeeded ? ObservationOutcome.SUCCEEDED : ObservationOutcome.FAILED, nanos, ObservedBytes.of(bytes, bytes)));
    }

    private static void release(PeerTransferGrpcClient client, PeerGrant grant) {
        client.release(PeerReleaseRequest.newBuilder().setLeaseId(grant.getLeaseId()).build())
                .timeout(5, TimeUnit.SECONDS); // best effort: the source's lease expiry releases otherwise
    }

    private long remainingMillis(long deadline) {
        return Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - ticker.nanos()));
    }
}
