package io.orbitkv.peer;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.orbitkv.model.ImageRef;
import io.orbitkv.nativeio.mooncake.MemoryRegistration;
import io.orbitkv.nativeio.mooncake.MooncakeTransferEngine;
import io.orbitkv.nativeio.mooncake.RemoteSegment;
import io.orbitkv.nativeio.mooncake.TransferBatch;
import io.orbitkv.nativeio.mooncake.TransferRequest;
import io.orbitkv.nativeio.mooncake.TransferState;
import io.orbitkv.nativeio.shm.SharedMemoryFile;
import io.orbitkv.protocol.peer.PeerGrant;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.internal.ContextInternal;
import io.vertx.core.internal.VertxInternal;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code peer.transport: mooncake-te}: the payload of a granted lease moves over Mooncake's Transfer Engine (TE) as
 * one-sided reads; the lease, its token, credits, generations and checksums stay on the mutual-TLS reserve channel.
 *
 * <p>Design note (registered memory). At {@link #start} this transport maps the pool file a second time (its own
 * mapping, not the peer role's) and starts one TE engine; it never registers the whole pool. A source registers each
 * page a grant names, for as long as a lease exposes it (counted per page, since two leases may share one;
 * {@link #grantExtension}: the peer source calls {@code withdraw} when the lease ends), and the grant names the
 * engine's segment and each page's address in this mapping. A requester registers the fresh slots of one batch when it
 * submits it and unregisters them once TE reports the batch terminal. So what TE can reach at any moment is the pages
 * of live leases and the slots of batches in flight (TE's TCP transport lets any caller read and write any registered
 * range). Owning the mapping lets the transport keep it mapped for as long as TE may write into it, whatever the peer
 * role does with its own. Pages already resident on the requester (scratch destinations) are not read at all.
 *
 * <p>Design note (batches and the poller). A receive submits one batch of reads per lease from a single submitter
 * thread (the first read to a peer blocks on TE's handshake), then hands the batch to {@link TePoller}, the one thread
 * that polls every batch with bounded back-off and frees it once TE reports every task terminal. A receive's states:
 * SUBMITTING (on the submitter), IN_FLIGHT (the poller owns the batch), ENDED (the batch freed, or nothing was
 * submitted). The requester's completion hops to the owner's context (the peer role); {@link Receive#fence} completes
 * only at ENDED, so slots are freed only after TE wrote its last byte. A fence before submission stops it from
 * submitting.
 *
 * <p>Cancel and crash. A timeout fails the completion at once (the requester reports the miss within its budget:
 * {@link Receive#fenceWaitsOnPeer}) while the batch stays with the poller; a source stopped mid-batch keeps it
 * IN_FLIGHT until it resumes or dies, and its death fails the reads (TE sees the sockets close), so the slots are then
 * aborted and nothing is left on the requester. The source keeps no per-transfer state: its lease ends by Release,
 * expiry or departure as with any transport and unregisters its pages, so a later read is refused by TE's range
 * check, and one racing the page's reuse is caught by the requester's CRC32C check. Registration runs where its caller
 * runs (the source's grants on the peer role's loop): a metadata update for TE's TCP transport, but an
 * {@code ibv_reg_mr} per page for RDMA, which would belong on a worker there.
 * {@link #close} stops new receives, waits a bounded time for the poller to end, then destroys the engine (joining
 * TE's threads) and unmaps; a batch still live then leaves the engine and the mapping in place (logged) rather than
 * unmap memory TE may still write.
 */
public final class MooncakePeerTransport implements PeerTransport {
    private static final Logger LOG = LoggerFactory.getLogger(MooncakePeerTransport.class);
    static final long CLOSE_BOUND_MILLIS = 30_000;

    private final Vertx vertx;
    private final PeerSettings settings;
    private final TePoller poller;
    private final ExecutorService submitter;
    private final Counter bytesRead;
    private final AtomicLong receivedBytes = new AtomicLong();
    private final AtomicLong pagesGranted = new AtomicLong();
    private final AtomicInteger exposedCount = new AtomicInteger();
    private final AtomicInteger slotsRegistered = new AtomicInteger();
    /** Time spent registering and unregistering pages with TE (per grant, lease end, and batch). */
    private final Timer registrations;
    /** Set once by {@link #start}, on a worker; read by receives and grants that start after it. */
    private volatile Started started;
    private volatile boolean closing;

    private record Started(MooncakeTransferEngine engine, SharedMemoryFile mapping, MemorySegment rolePool) {}

    /** A source page registered for the leases that expose it (the peer role's context only). */
    private static final class Exposed {
        final MemoryRegistration registration;
        int leases;

        Exposed(MemoryRegistration registration) {
            this.registration = registration;
        }
    }

    /** Source pages registered now, by pool offset (the peer role's context only). */
    private final Map<Long, Exposed> exposed = new HashMap<>();

    /** Pages the source's flip hook corrupted: registered copies, freed with the engine. */
    private final Arena faultArena = Arena.ofShared();

    public MooncakePeerTransport(Vertx vertx, PeerSettings settings, MeterRegistry registry, String name) {
        if (settings.mooncakeTe() == null) {
            throw new IllegalArgumentException("peer.transport is not " + PeerSettings.MOONCAKE_TE);
        }
        this.vertx = vertx;
        this.settings = settings;
        this.poller = new TePoller(name);
        this.submitter = Executors.newSingleThreadExecutor(Thread.ofPlatform().daemon()
                .name("orbitkv-te-submit-" + name).factory());
        bytesRead = Counter.builder("orbitkv_peer_te_read_bytes_total")
                .description("Payload bytes this requester read from peers over the Transfer Engine").register(registry);
        registrations = Timer.builder("orbitkv_peer_te_registration_seconds")
                .description("Time spent registering or unregistering with the Transfer Engine the pages a lease exposes"
                        + " (source) or the slots a batch fills (requester), per grant, lease end or batch").register(registry);
        Gauge.builder("orbitkv_peer_te_exposed_pages", exposedCount, AtomicInteger::get)
                .description("Source pages registered with the Transfer Engine now (those of live leases)").register(registry);
        Gauge.builder("orbitkv_peer_te_registered_slots", slotsRegistered, AtomicInteger::get)
                .description("Requester slots registered with the Transfer Engine now (those of batches in flight)")
                .register(registry);
        Gauge.builder("orbitkv_peer_te_batches", poller, TePoller::watching)
                .description("Transfer Engine batches submitted and not yet terminal").register(registry);
    }

    /**
     * Starts the engine on {@code host} (an IP literal inside the trusted network), maps the pool file at
     * {@code poolPath} and registers it. {@code rolePool} is the peer role's own mapping of the same file: requester
     * destinations are slices of it. Blocks (TE starts threads and listeners): call it from a worker. Answers the
     * engine's segment name.
     */
    public String start(String host, Path poolPath, long poolBytes, MemorySegment rolePool) throws Exception {
        if (!settings.mooncakeTe().trustedNetwork().contains(host)) {
            throw new IllegalArgumentException("the Transfer Engine address " + host + " is not inside the trusted network "
                    + settings.mooncakeTe().trustedNetwork());
        }
        MooncakeTransferEngine engine = settings.mooncakeTe().discover() ? MooncakeTransferEngine.startDiscovered(host)
                : MooncakeTransferEngine.startTcp(host);
        SharedMemoryFile mapping = null;
        try {
            mapping = SharedMemoryFile.map(poolPath, poolBytes);
            started = new Started(engine, mapping, rolePool);
            return engine.segmentName();
        } catch (Exception | Error e) {
            engine.close();
            if (mapping != null) {
                mapping.close();
            }
            throw e;
        }
    }

    /** The engine's segment name ({@code ip:port} of its handshake port); null before {@link #start}. */
    public String segmentName() {
        Started s = started;
        return s == null ? null : s.engine.segmentName();
    }

    /** Payload bytes this transport's receives read into slots. */
    public long receivedBytes() {
        return receivedBytes.get();
    }

    /** Requester slots registered with TE now (those of batches not yet terminal). */
    public int slotsRegistered() {
        return slotsRegistered.get();
    }

    /** Batches submitted and not yet terminal (freed). */
    public int batchesInFlight() {
        return poller.watching();
    }

    // ---------------------------------------------------------------- source

    /**
     * What the source adds to each grant: this engine's segment and each page's address in this transport's mapping,
     * each page registered with TE for as long as a lease exposes it (counted per page: two leases may share one).
     */
    PeerSource.GrantExtension grantExtension() {
        return new PeerSource.GrantExtension() {
            @Override
            public void expose(PeerGrant.Builder grant, List<ImageRef> refs) {
                Started s = started;
                grant.setTeSegment(s.engine.segmentName());
                long begun = System.nanoTime();
                for (int i = 0; i < refs.size(); i++) {
                    ImageRef ref = refs.get(i);
                    exposed.computeIfAbsent(ref.offset(), offset -> {
                        exposedCount.incrementAndGet();
                        return new Exposed(s.engine.register(s.mapping.segment().asSlice(offset, ref.lengthBytes())));
                    }).leases++;
                    long address = s.mapping.segment().address() + ref.offset();
                    long n = pagesGranted.incrementAndGet();
                    if (settings.testFlipPage() > 0 && n == settings.testFlipPage()) {
                        address = corruptedCopy(s, ref);
                    }
                    grant.getPagesBuilder(i).setTeAddress(address);
                }
                registrations.record(System.nanoTime() - begun, TimeUnit.NANOSECONDS);
            }

            @Override
            public void withdraw(List<ImageRef> refs) {
                long begun = System.nanoTime();
                for (ImageRef ref : refs) {
                    Exposed e = exposed.get(ref.offset());
                    if (e != null && --e.leases == 0) {
                        exposed.remove(ref.offset());
                        exposedCount.decrementAndGet();
                        e.registration.close(); // a read still in flight now fails TE's range check: a miss there
                    }
                }
                registrations.record(System.nanoTime() - begun, TimeUnit.NANOSECONDS);
            }
        };
    }

    /** Source pages registered with TE now (exposed by at least one live lease). */
    public int exposedPages() {
        return exposedCount.get();
    }

    /** Test hook ({@code fault-injection.peer.flip-page}): the page's bytes, one flipped, in registered memory. */
    private long corruptedCopy(Started s, ImageRef ref) {
        MemorySegment copy = faultArena.allocate(ref.lengthBytes(), 4096);
        copy.copyFrom(s.mapping.segment().asSlice(ref.offset(), ref.lengthBytes()));
        long at = ref.lengthBytes() / 2;
        copy.set(ValueLayout.JAVA_BYTE, at, (byte) (copy.get(ValueLayout.JAVA_BYTE, at) ^ 0x5a));
        s.engine.register(copy);
        return copy.address();
    }

    // ---------------------------------------------------------------- requester

    @Override
    public Receive receive(String endpoint, long leaseId, byte[] token, List<Destination> destinations, Duration timeout) {
        TeReceive refused = new TeReceive(currentContext());
        refused.refuse(new PeerException(PeerException.Kind.TRANSFER_FAILED,
                "the Transfer Engine transport reads a lease from its grant (segment and page addresses)"));
        return refused;
    }

    @Override
    public Receive receive(PeerGrant grant, List<Destination> destinations, Duration timeout) {
        TeReceive receive = new TeReceive(currentContext());
        Started s = started;
        String problem = s == null || closing ? "the Transfer Engine transport is not running" : check(grant, destinations);
        if (problem != null) {
            receive.refuse(new PeerException(PeerException.Kind.TRANSFER_FAILED, problem));
            return receive;
        }
        List<Long> remote = new ArrayList<>();
        long rolePool = s.rolePool.address();
        long bytes = 0;
        for (int i = 0; i < destinations.size(); i++) {
            MemorySegment slot = destinations.get(i).slot();
            long offset = slot.address() - rolePool;
            if (offset < 0 || offset + slot.byteSize() > s.rolePool.byteSize()) {
                continue; // scratch for a page already resident here: not read at all
            }
            remote.add(grant.getPages(i).getTeAddress());
            bytes += slot.byteSize();
        }
        if (remote.isEmpty()) {
            receive.succeedEmpty();
            return receive;
        }
        long timer = vertx.setTimer(Math.max(1, timeout.toMillis()), t -> receive.timeOut());
        receive.result.future().onComplete(ar -> vertx.cancelTimer(timer));
        long total = bytes;
        String segmentName = grant.getTeSegment();
        submitter.execute(() -> receive.submit(s, segmentName, destinations, remote, total));
        return receive;
    }

    /** Why {@code grant} cannot be read over TE here, or null. */
    private String check(PeerGrant grant, List<Destination> destinations) {
        String segment = grant.getTeSegment();
        if (segment.isEmpty()) {
            return "the source does not serve this lease over the Transfer Engine (check peer.transport on both sides)";
        }
        int colon = segment.lastIndexOf(':');
        if (colon <= 0 || !settings.mooncakeTe().trustedNetwork().contains(segment.substring(0, colon))) {
            return "the source's Transfer Engine segment " + segment + " is outside the trusted network "
                    + settings.mooncakeTe().trustedNetwork();
        }
        if (grant.getPagesCount() != destinations.size()) {
            return "the grant names " + grant.getPagesCount() + " pages for " + destinations.size() + " destinations";
        }
        for (int i = 0; i < destinations.size(); i++) {
            if (grant.getPages(i).getTeAddress() == 0 || grant.getPages(i).getLengthBytes() != destinations.get(i).slot().byteSize()) {
                return "page " + i + " of the grant has no Transfer Engine address or another length";
            }
        }
        return null;
    }

    /** One lease's reads: see the class's design note for its states. */
    private final class TeReceive implements Receive {
        private enum State { SUBMITTING, IN_FLIGHT, ENDED }

        private final ContextInternal owner;
        final Promise<Void> result;
        private final Promise<Void> ended;
        private volatile State state = State.SUBMITTING;
        private volatile boolean fenced;

        TeReceive(ContextInternal owner) {
            this.owner = owner;
            this.result = owner.promise();
            this.ended = owner.promise();
        }

        void refuse(PeerException failure) {
            state = State.ENDED;
            result.tryFail(failure);
            ended.tryComplete();
        }

        void succeedEmpty() {
            state = State.ENDED;
            result.tryComplete();
            ended.tryComplete();
        }

        void timeOut() {
            result.tryFail(new PeerException(PeerException.Kind.TIMEOUT, "the transfer did not complete within its budget"));
        }

        /** On the submitter thread: open the segment, allocate and submit the batch, hand it to the poller. */
        void submit(Started s, String segmentName, List<Destination> destinations, List<Long> remote, long bytes) {
            TransferBatch batch = null;
            List<MemoryRegistration> slots = new ArrayList<>(remote.size());
            try {
                if (fenced || closing) {
                    throw new PeerException(PeerException.Kind.TRANSFER_FAILED, "fenced before submission");
                }
                RemoteSegment peer = s.engine.openSegment(segmentName);
                List<TransferRequest> reads = new ArrayList<>(remote.size());
                long rolePool = s.rolePool.address();
                long begun = System.nanoTime();
                int r = 0;
                for (Destination d : destinations) {
                    long offset = d.slot().address() - rolePool;
                    if (offset >= 0 && offset + d.slot().byteSize() <= s.rolePool.byteSize()) {
                        // only the fresh slots are registered, and only while the batch may write them
                        MemorySegment local = s.mapping.segment().asSlice(offset, d.slot().byteSize());
                        slots.add(s.engine.register(local));
                        slotsRegistered.incrementAndGet();
                        reads.add(TransferRequest.read(local, peer, remote.get(r++)));
                    }
                }
                registrations.record(System.nanoTime() - begun, TimeUnit.NANOSECONDS);
                batch = s.engine.allocateBatch(reads.size());
                batch.submit(reads);
            } catch (RuntimeException e) {
                PeerException failure = e instanceof PeerException p ? p
                        : new PeerException(PeerException.Kind.TRANSFER_FAILED, "the Transfer Engine read was not submitted: " + e.getMessage());
                if (batch == null || batch.submitted() == 0) {
                    if (batch != null) {
                        batch.free();
                    }
                    unregister(slots);
                    owner.runOnContext(v -> refuse(failure));
                    return;
                }
                owner.runOnContext(v -> result.tryFail(failure)); // part of it was queued: polled to its end all the same
            }
            state = State.IN_FLIGHT;
            poller.watch(batch, (states, failure) -> {
                if (states != null) {
                    unregister(slots); // terminal: TE writes no more into them
                }
                owner.runOnContext(v -> end(states, failure, bytes));
            });
        }

        private void unregister(List<MemoryRegistration> slots) {
            long begun = System.nanoTime();
            for (MemoryRegistration slot : slots) {
                slot.close();
                slotsRegistered.decrementAndGet();
            }
            registrations.record(System.nanoTime() - begun, TimeUnit.NANOSECONDS);
        }

        /** On the owner's context: the batch is freed (or polling it failed and it stays live). */
        private void end(List<TransferState> states, Throwable failure, long bytes) {
            if (failure != null) {
                result.tryFail(new PeerException(PeerException.Kind.TRANSFER_FAILED, "polling the Transfer Engine batch failed: "
                        + failure.getMessage()));
                return; // still live: ended never completes, the slots are never freed under TE
            }
            state = State.ENDED;
            if (states.stream().allMatch(st -> st == TransferState.COMPLETED)) {
                receivedBytes.addAndGet(bytes);
                bytesRead.increment(bytes);
                result.tryComplete();
            } else {
                result.tryFail(new PeerException(PeerException.Kind.TRANSFER_FAILED, "Transfer Engine reads ended " + states));
            }
            ended.tryComplete();
        }

        @Override
        public Future<Void> completion() {
            return result.future();
        }

        @Override
        public Future<Void> fence() {
            fenced = true;
            return ended.future();
        }

        @Override
        public boolean fenceWaitsOnPeer() {
            return state != State.ENDED;
        }
    }

    // ---------------------------------------------------------------- lifecycle

    @Override
    public Future<Void> close() {
        closing = true;
        ContextInternal caller = currentContext();
        Promise<Void> closed = caller.promise();
        poller.stop(vertx, CLOSE_BOUND_MILLIS).onComplete(drained -> vertx.<Void>executeBlocking(() -> {
            submitter.shutdown();
            submitter.awaitTermination(CLOSE_BOUND_MILLIS, TimeUnit.MILLISECONDS);
            Started s = started;
            if (drained.failed()) {
                LOG.warn("peer Transfer Engine: {}; its engine and pool mapping are kept until the process exits",
                        drained.cause().getMessage());
                return null;
            }
            if (s != null) {
                s.engine.close(); // unregisters, then joins TE's threads
                s.mapping.close();
            }
            faultArena.close();
            return null;
        }, false).onComplete(closed));
        return closed.future();
    }

    private ContextInternal currentContext() {
        return ((VertxInternal) vertx).getOrCreateContext();
    }
}
