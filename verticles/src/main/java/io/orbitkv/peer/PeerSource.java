package io.orbitkv.peer;

import com.google.protobuf.ByteString;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.model.MemberRecord;
import io.orbitkv.common.Ticker;
import io.orbitkv.protocol.peer.PeerGrant;
import io.orbitkv.protocol.peer.PeerKey;
import io.orbitkv.protocol.peer.PeerPage;
import io.orbitkv.protocol.peer.PeerReject;
import io.orbitkv.protocol.peer.PeerRejection;
import io.orbitkv.protocol.peer.PeerReleaseReply;
import io.orbitkv.protocol.peer.PeerReleaseRequest;
import io.orbitkv.protocol.peer.PeerReserveReply;
import io.orbitkv.protocol.peer.PeerReserveRequest;
import io.orbitkv.model.StateKey;
import io.orbitkv.storage.StorageCommands;
import io.orbitkv.storage.StorageProxy;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.grpc.common.GrpcStatus;
import io.vertx.grpc.server.GrpcServerRequest;
import java.lang.foreign.MemorySegment;
import java.security.SecureRandom;
import java.security.cert.Certificate;
import java.security.cert.X509Certificate;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import java.util.zip.CRC32C;
import javax.net.ssl.SSLPeerUnverifiedException;
import io.orbitkv.model.AllocateResult;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.SlotGrant;
import io.orbitkv.model.KeyGeneration;
import io.orbitkv.model.MemberDirectory;

/**
 * The source role of the peer package: lends this Manager's DRAM images (and SSD pages staged into DRAM) to other
 * members, over gRPC Reserve/Release and the transport's transfer port.
 *
 * <p>Design note (ownership). A reserve is authorized by the requester's certificate (its member id) and current
 * incarnation. A lease owns exact-generation pins, taken in one storage command ({@code pinGenerations}: every key
 * sealed at exactly the requester's generation, or nothing pinned: CHANGED_GENERATION), or, for SSD evidence, what
 * {@link PeerSsdStaging} held for it; it is charged to its requester's credits ({@code peer.credit-bytes} per
 * requester). Exactly one of these ends a lease and releases its pins and credits: the requester's Release, the expiry
 * timer, the requester leaving membership (or restarting), or {@link #stop}. While the lease's transfer is still
 * writing from the slots the release is deferred until the transport's {@code finished}.
 *
 * <p>Checksums: a grant carries each page's CRC32C from the seal (or the storage role's background pass at that exact
 * slot generation); what is still unknown is computed on a worker while the pins hold the slots (counted).
 * Concurrency: all state lives on the peer role's context; the transport's callbacks arrive there.
 */
final class PeerSource {
    /** A probe lease lasts at most this long (its requester releases it as soon as its page arrived). */
    static final long PROBE_LEASE_MS = 5_000;
    /** The one page of a probe lease: a slot of this size, allocated for the probe and aborted when it ends. */
    static final int PROBE_PAGE_BYTES = 4096;
    /** The storage instance a probe page is allocated under (no engine is ever given it). */
    static final long PROBE_INSTANCE = Long.MAX_VALUE - 13;

    private static final class Lease {
        final long id;
        final String requester;
        final long requesterIncarnation;
        final byte[] token;
        final List<ImageRef> refs;
        final long bytes;
        /** SSD staging: what the staging owner holds for this lease (null: DRAM pins only, in {@code refs}). */
        final PeerSsdStaging.Held staged;
        long timer = -1;
        boolean sending;
        /** The transport's {@link GrantExtension} exposed this lease's pages (withdrawn when it ends). */
        boolean exposed;
        /** A probe's page: the publish its slot was allocated in (aborted when the lease ends); -1: none. */
        long probePublish = -1;

        Lease(long id, String requester, long requesterIncarnation, byte[] token, List<ImageRef> refs,
              long bytes, PeerSsdStaging.Held staged) {
            this.id = id;
            this.requester = requester;
            this.requesterIncarnation = requesterIncarnation;
            this.token = token;
            this.refs = refs;
            this.bytes = bytes;
            this.staged = staged;
        }
    }

    private final Vertx vertx;
    private final PeerSettings settings;
    private final String transferEndpoint;
    private final MemberDirectory membership;
    private final StorageProxy storage;
    private final PeerSsdStaging staging;
    private final Supplier<MemorySegment> pool;
    private final Ticker ticker;
    private final SecureRandom random = new SecureRandom();
    private final Map<Long, Lease> leases = new HashMap<>();
    /** Leases released while their transfer was still writing: unpinned at the transport's {@code finished}. */
    private final Map<Long, Lease> deferred = new HashMap<>();
    private final Map<String, Long> creditsInUse = new HashMap<>();
    private final Counter rejections;
    private final Counter expired;
    private final Counter departed;
    private final Counter sourceChecksums;
    private final Counter probes;
    private long nextLease = 1;
    /**
     * Names each probe page's key: a probe never meets the page of an earlier one of the same requester that is still
     * held (a requester whose round timed out retries before that lease expires), which would leave it without a page.
     */
    private long nextProbe = 1;
    private boolean stopping;
    private GrantExtension grantExtension;

    /**
     * What a transport adds to each grant and exposes for its lease (the Transfer Engine's segment and each page's
     * address, registered for the lease's life): {@link #expose} when the grant is answered, {@link #withdraw} exactly
     * once when that lease ends.
     */
    interface GrantExtension {
        void expose(PeerGrant.Builder grant, List<ImageRef> refs);

        void withdraw(List<ImageRef> refs);
    }

    /** Grants carry what {@code extension} adds (null: only the transfer port's endpoint). */
    void grantExtension(GrantExtension extension) {
        this.grantExtension = extension;
    }

    PeerSource(Vertx vertx, PeerSettings settings, String host, MemberDirectory membership, StorageProxy storage,
               Supplier<MemorySegment> pool, MeterRegistry registry, Ticker ticker) {
        this.vertx = vertx;
        this.settings = settings;
        this.transferEndpoint = host + ":" + settings.transferPort();
        this.membership = membership;
        this.storage = storage;
        this.staging = new PeerSsdStaging(storage, settings.stagingBytes(), registry);
        this.pool = pool;
        this.ticker = ticker;
        rejections = Counter.builder("orbitkv_peer_rejections_total")
                .description("Peer reserves this source refused").register(registry);
        expired = Counter.builder("orbitkv_peer_leases_expired_total")
                .description("Source leases whose pins were released at expiry").register(registry);
        departed = Counter.builder("orbitkv_peer_leases_departed_total")
                .description("Source leases released because their requester left membership").register(registry);
        probes = Counter.builder("orbitkv_peer_source_probe_leases_total")
                .description("Probe leases (one page allocated for the probe, or none) granted to requesters warming "
                        + "their path to this source")
                .register(registry);
        sourceChecksums = Counter.builder("orbitkv_peer_source_checksums_total")
                .description("Pages whose CRC32C this source computed at reserve (not known from the seal or remembered)")
                .register(registry);
        Gauge.builder("orbitkv_peer_source_leases", leases, Map::size)
                .description("Source leases holding pins now").register(registry);
    }

    // ---------------------------------------------------------------- gRPC

    private static String memberOf(GrpcServerRequest<?, ?> request) {
        try {
            List<Certificate> chain = request.connection().peerCertificates();
            if (chain == null || chain.isEmpty() || !(chain.getFirst() instanceof X509Certificate x509)) {
                return null;
            }
            return TcpPeerTransport.commonName(x509);
        } catch (SSLPeerUnverifiedException e) {
            return null;
        }
    }

    void onReserve(GrpcServerRequest<PeerReserveRequest, PeerReserveReply> request) {
        String member = memberOf(request);
        long received = ticker.nanos();
        request.handler(msg -> reserve(member, msg, received).onComplete(ar -> {
            if (ar.succeeded()) {
                request.response().end(ar.result());
            } else {
                request.response().status(GrpcStatus.INTERNAL).end();
            }
        }));
    }

    void onRelease(GrpcServerRequest<PeerReleaseRequest, PeerReleaseReply> request) {
        String member = memberOf(request);
        request.handler(msg -> {
            Lease lease = leases.get(msg.getLeaseId());
            boolean ok = lease != null && lease.requester.equals(member);
            if (ok) {
                drop(lease);
            }
            request.response().end(PeerReleaseReply.newBuilder().setReleased(ok).build());
        });
    }

    // ---------------------------------------------------------------- reserve

    private PeerReserveReply reject(PeerRejection reason, int index) {
        rejections.increment();
        return PeerReserveReply.newBuilder().setReject(PeerReject.newBuilder().setReason(reason).setKeyIndex(index)).build();
    }

    /** Validates, pins the exact generations, charges credits, computes missing checksums, grants a lease. */
    private Future<PeerReserveReply> reserve(String member, PeerReserveRequest r, long receivedNanos) {
        boolean probe = r.getKeysCount() == 0;
        MemberRecord record = member == null ? null : membership.members().get(member);
        if (record == null || record.incarnation() != r.getRequesterIncarnation() || member.equals(membership.memberId())) {
            return Future.succeededFuture(probe ? refusedProbe() : reject(PeerRejection.NOT_A_MEMBER, -1));
        }
        if (r.getSourceIncarnation() != membership.incarnation()) {
            return Future.succeededFuture(probe ? refusedProbe() : reject(PeerRejection.STALE_INCARNATION, -1));
        }
        if (probe) {
            return probeLease(member, record);
        }
        if (r.getNamespace().size() != StateKey.NAMESPACE_BYTES || r.getKeysCount() > settings.maxKeys()) {
            return Future.succeededFuture(reject(PeerRejection.BAD_PEER_REQUEST, -1));
        }
        byte[] ns = r.getNamespace().toByteArray();
        List<StateKey> keys = new ArrayList<>(r.getKeysCount());
        for (int i = 0; i < r.getKeysCount(); i++) {
            PeerKey k = r.getKeys(i);
            if (k.getBlockHash().isEmpty() || k.getBlockHash().size() > StateKey.MAX_BLOCK_HASH_BYTES) {
                return Future.succeededFuture(reject(PeerRejection.BAD_PEER_REQUEST, i));
            }
            keys.add(StateKey.of(ns, k.getGroupId(), k.getBlockHash().toByteArray()));
        }
        long leaseMs = Math.max(1, Math.min(r.getLeaseMs() <= 0 ? settings.maxLeaseMillis() : r.getLeaseMs(),
                settings.maxLeaseMillis()));
        List<Long> generations = r.getKeysList().stream().map(PeerKey::getGeneration).toList();
        if (r.getKeysList().stream().anyMatch(PeerKey::getFromSsd)) {
            return reserveStaged(member, record, keys, generations, r.getKeysList().stream().map(PeerKey::getFromSsd)
                    .toList(), leaseMs, receivedNanos);
        }
        List<KeyGeneration> exact = new ArrayList<>(keys.size());
        for (int i = 0; i < keys.size(); i++) {
            exact.add(new KeyGeneration(keys.get(i), generations.get(i)));
        }
        return storage.pinGenerations(exact).compose(pin -> {
            if (!pin.complete()) {
                return unpinnable(keys, pin.missing());
            }
            List<ImageRef> refs = pin.pinned().getFirst();
            if (!charge(member, pin.pinnedBytes())) {
                return storage.unpin(pin.pinned()).map(n -> reject(PeerRejection.NO_CREDIT, -1));
            }
            return grant(new Lease(nextLease++, member, record.incarnation(), token(), refs, pin.pinnedBytes(), null),
                    leaseMs, leaseMs, Set.of());
        });
    }

    /**
     * A probe (a requester warming its path here, {@code keys} empty, from a current member): a lease of one
     * {@value #PROBE_PAGE_BYTES}-byte page that runs the code of a real lease (the storage role's commands, the grant's
     * checksum, the transfer's send, the release) and charges nothing. The page is a slot allocated for the probe
     * (filled here, never sealed, so no key of it is ever resident or advertised) and aborted when the lease ends,
     * like any lease: at the requester's release, at expiry, or at {@link #stop}. Without ample free room in the pool
     * ({@link #roomForProbe}: a probe never evicts, nor makes a real allocation evict) or over a transport that exposes
     * pages itself, the lease has no page.
     */
    private Future<PeerReserveReply> probeLease(String member, MemberRecord record) {
        probes.increment();
        long leaseMs = Math.min(PROBE_LEASE_MS, settings.maxLeaseMillis());
        Future<AllocateResult> page = grantExtension != null ? Future.succeededFuture() : storage.stats()
                .compose(stats -> !roomForProbe(stats) ? Future.succeededFuture()
                        : storage.allocate(PROBE_INSTANCE, List.of(probeKey(member + ":" + nextProbe++)),
                                List.of((long) PROBE_PAGE_BYTES)));
        return page.otherwiseEmpty().compose(allocated -> {
            SlotGrant slot = allocated == null ? null : allocated.slots().getFirst();
            if (slot != null && (!slot.allocated() || stopping)) {
                storage.abort(PROBE_INSTANCE, allocated.publishId());
                slot = null;
            }
            Lease lease = new Lease(nextLease++, member, record.incarnation(), token(),
                    slot == null ? List.of() : List.of(slot.ref()), 0, null);
            if (slot != null) {
                pool.get().asSlice(slot.ref().offset(), PROBE_PAGE_BYTES).fill((byte) lease.id);
                lease.probePublish = allocated.publishId();
            }
            return grant(lease, leaseMs, leaseMs, Set.of());
        });
    }

    /**
     * Whether a probe page may take a slot: only while a quarter of the pool is one free run. A small slot holds a
     * whole chunk of the allocator for its span while it lives, so in a fuller pool it could take the room a real
     * allocation needs at that moment and make it evict; a Manager with a full pool has run its storage commands for
     * its own engines anyway. (The free run is measured once a second: stale by that much at most.)
     */
    static boolean roomForProbe(StorageCommands.StorageStats stats) {
        return stats.largestFreeRunBytes() >= Math.max(PROBE_PAGE_BYTES, stats.poolBytes() / 4);
    }

    /** The key a probe page named {@code name} is allocated under: in the zero namespace, never an engine's. */
    static StateKey probeKey(String name) {
        byte[] hash = ("orbitkv-warm-probe:" + name).getBytes(java.nio.charset.StandardCharsets.UTF_8);
        return StateKey.of(new byte[StateKey.NAMESPACE_BYTES], 0,
                java.util.Arrays.copyOf(hash, Math.min(hash.length, StateKey.MAX_BLOCK_HASH_BYTES)));
    }

    /** A refused probe: not counted among the rejections (a requester may probe before membership here shows it). */
    private static PeerReserveReply refusedProbe() {
        return PeerReserveReply.newBuilder().setReject(PeerReject.newBuilder().setReason(PeerRejection.NOT_A_MEMBER)
                .setKeyIndex(-1)).build();
    }

    /**
     * A reserve whose pins failed: UNKNOWN_NAMESPACE when no key is sealed here at all, else CHANGED_GENERATION naming
     * the first key that is not at its generation. Metadata only (this path pins nothing).
     */
    private Future<PeerReserveReply> unpinnable(List<StateKey> keys, StateKey missing) {
        return storage.discover(keys).map(evidence -> evidence.stream().allMatch(e -> e.dramGeneration() < 0)
                ? reject(PeerRejection.UNKNOWN_NAMESPACE, -1)
                : reject(PeerRejection.CHANGED_GENERATION, keys.indexOf(missing)));
    }

    /**
     * A reserve naming SSD evidence: {@link PeerSsdStaging} charges the credits and the staging bound, pins the DRAM
     * pages and stages the SSD ones; the lease then owns all of it. Its time counts from the receipt of the request.
     */
    private Future<PeerReserveReply> reserveStaged(String member, MemberRecord record, List<StateKey> keys,
                                                   List<Long> generations, List<Boolean> fromSsd, long leaseMs,
                                                   long receivedNanos) {
        PeerSsdStaging.Credits credits = new PeerSsdStaging.Credits() {
            @Override
            public boolean charge(long bytes) {
                return PeerSource.this.charge(member, bytes);
            }

            @Override
            public void refund(long bytes) {
                PeerSource.this.refund(member, bytes);
            }
        };
        return staging.acquire(keys, generations, fromSsd, credits).compose(outcome -> {
            if (outcome.held() == null) {
                return Future.succeededFuture(reject(outcome.rejection(), outcome.keyIndex()));
            }
            PeerSsdStaging.Held held = outcome.held();
            MemberRecord now = membership.members().get(member);
            if (stopping || now == null || now.incarnation() != record.incarnation()) {
                // the requester left (or this role stops) while the pages were staged: nobody will take them
                credits.refund(held.bytes());
                return staging.release(held).map(v -> reject(PeerRejection.NOT_A_MEMBER, -1));
            }
            long remainingMs = leaseMs - TimeUnit.NANOSECONDS.toMillis(ticker.nanos() - receivedNanos);
            return grant(new Lease(nextLease++, member, record.incarnation(), token(), held.refs(), held.bytes(), held),
                    leaseMs, Math.max(1, remainingMs), new HashSet<>(held.staged()));
        });
    }

    private byte[] token() {
        byte[] token = new byte[16];
        random.nextBytes(token);
        return token;
    }

    private boolean charge(String member, long bytes) {
        if (creditsInUse.getOrDefault(member, 0L) + bytes > settings.creditBytes()) {
            return false;
        }
        creditsInUse.merge(member, bytes, Long::sum);
        return true;
    }

    private void refund(String member, long bytes) {
        creditsInUse.computeIfPresent(member, (k, v) -> v - bytes <= 0 ? null : v - bytes);
    }

    /** Registers the lease with its expiry timer and answers its grant (checksums computed where unknown). */
    private Future<PeerReserveReply> grant(Lease lease, long leaseMs, long timerMs, Set<ImageRef> staged) {
        leases.put(lease.id, lease);
        lease.timer = vertx.setTimer(timerMs, t -> {
            if (leases.get(lease.id) == lease) {
                expired.increment();
                drop(lease);
            }
        });
        return checksums(lease.refs, lease.probePublish < 0).map(crcs -> {
            PeerGrant.Builder grant = PeerGrant.newBuilder().setLeaseId(lease.id).setLeaseMs(leaseMs)
                    .setTransferToken(ByteString.copyFrom(lease.token)).setPlaintext(settings.plaintext())
                    .setTransferEndpoint(transferEndpoint);
            for (int i = 0; i < lease.refs.size(); i++) {
                ImageRef ref = lease.refs.get(i);
                grant.addPages(PeerPage.newBuilder().setGeneration(ref.generation()).setLengthBytes(ref.lengthBytes())
                        .setCrc32C(crcs.get(i).intValue()).setStaged(staged.contains(ref)));
            }
            if (grantExtension != null && leases.get(lease.id) == lease) { // not ended while its checksums ran
                grantExtension.expose(grant, lease.refs);
                lease.exposed = true;
            }
            return PeerReserveReply.newBuilder().setGrant(grant).build();
        });
    }

    /**
     * Each pinned image's CRC32C: known (seal or background pass), else computed now on a worker (pins hold it);
     * those computed are counted when {@code counted} (a probe's page is not).
     */
    private Future<List<Long>> checksums(List<ImageRef> refs, boolean counted) {
        if (refs.stream().allMatch(ImageRef::crcKnown)) {
            return Future.succeededFuture(refs.stream().map(ImageRef::crc32c).toList());
        }
        if (counted) {
            sourceChecksums.increment(refs.stream().filter(r -> !r.crcKnown()).count());
        }
        MemorySegment segment = pool.get();
        return vertx.executeBlocking(() -> {
            List<Long> crcs = new ArrayList<>(refs.size());
            for (ImageRef ref : refs) {
                if (ref.crcKnown()) {
                    crcs.add(ref.crc32c());
                } else {
                    CRC32C crc = new CRC32C();
                    crc.update(segment.asSlice(ref.offset(), ref.lengthBytes()).asByteBuffer());
                    crcs.add(crc.getValue());
                }
            }
            return crcs;
        }, false);
    }

    // ---------------------------------------------------------------- lease ends

    /** Releases a lease's pins and credits (deferred while its transfer is still writing from the slots). */
    private void drop(Lease lease) {
        if (leases.remove(lease.id) == null) {
            return;
        }
        vertx.cancelTimer(lease.timer);
        if (lease.sending) {
            deferred.put(lease.id, lease);
        } else {
            unpin(lease);
        }
    }

    private void unpin(Lease lease) {
        if (lease.exposed) {
            lease.exposed = false;
            grantExtension.withdraw(lease.refs);
        }
        refund(lease.requester, lease.bytes);
        if (lease.staged != null) {
            staging.release(lease.staged);
        } else if (lease.probePublish >= 0) {
            storage.abort(PROBE_INSTANCE, lease.probePublish);
        } else if (!lease.refs.isEmpty()) {
            storage.unpin(List.of(lease.refs));
        }
    }

    /** Ends the leases of requesters that left membership or restarted (another incarnation). */
    void dropDeparted() {
        Map<String, MemberRecord> members = membership.members();
        for (Lease lease : List.copyOf(leases.values())) {
            MemberRecord now = members.get(lease.requester);
            if (now == null || now.incarnation() != lease.requesterIncarnation) {
                departed.increment();
                drop(lease);
            }
        }
    }

    /** The role stops: every lease ends now (a transfer still writing keeps its pins until it finished). */
    void stop() {
        stopping = true;
        for (Lease lease : List.copyOf(leases.values())) {
            drop(lease);
        }
    }

    /** What the transfer server asks: a lease's pages for its token and requester, and the end of its writes. */
    TcpPeerTransport.Source transferSource() {
        return new TcpPeerTransport.Source() {
            @Override
            public List<TcpPeerTransport.PageSlice> begin(long leaseId, byte[] token, String peerMemberId) {
                Lease lease = leases.get(leaseId);
                if (lease == null || lease.sending || !TcpPeerTransport.tokenEquals(lease.token, token)
                        || (peerMemberId != null && !peerMemberId.equals(lease.requester))) {
                    return null;
                }
                if (lease.refs.isEmpty() && lease.staged == null) {
                    drop(lease); // a probe: used once, nothing to send
                    return List.of();
                }
                lease.sending = true;
                return lease.refs.stream().map(ref -> new TcpPeerTransport.PageSlice(ref.offset(), ref.lengthBytes()))
                        .toList();
            }

            @Override
            public void finished(long leaseId, boolean sent) {
                Lease lease = leases.get(leaseId);
                if (lease != null) {
                    lease.sending = false;
                } else {
                    Lease released = deferred.remove(leaseId); // released meanwhile: its unpin waited for this
                    if (released != null) {
                        unpin(released);
                    }
                }
            }
        };
    }
}
