package io.orbitkv.peer;

import com.google.protobuf.ByteString;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.cluster.ClusterSettings;
import io.orbitkv.cluster.MemberRecord;
import io.orbitkv.cluster.MemberTable;
import io.orbitkv.cluster.MembershipRole;
import io.orbitkv.cost.CompletionTarget;
import io.orbitkv.cost.CostEstimateKey;
import io.orbitkv.cost.CostPath;
import io.orbitkv.cost.CostProxy;
import io.orbitkv.cost.ObservationOutcome;
import io.orbitkv.cost.ObservationRecord;
import io.orbitkv.cost.ObservedBytes;
import io.orbitkv.cost.RepresentationFamily;
import io.orbitkv.cost.ResourceId;
import io.orbitkv.cost.ResourceKind;
import io.orbitkv.cost.SizeBucket;
import io.orbitkv.nativeio.shm.SharedMemoryFile;
import io.orbitkv.planning.PeerOwner;
import io.orbitkv.protocol.peer.PeerGrant;
import io.orbitkv.protocol.peer.PeerKey;
import io.orbitkv.protocol.peer.PeerPage;
import io.orbitkv.protocol.peer.PeerReject;
import io.orbitkv.protocol.peer.PeerRejection;
import io.orbitkv.protocol.peer.PeerReleaseReply;
import io.orbitkv.protocol.peer.PeerReleaseRequest;
import io.orbitkv.protocol.peer.PeerReserveReply;
import io.orbitkv.protocol.peer.PeerReserveRequest;
import io.orbitkv.protocol.peer.PeerTransferGrpcClient;
import io.orbitkv.protocol.peer.PeerTransferGrpcService;
import io.orbitkv.storage.ImageStore;
import io.orbitkv.storage.StateKey;
import io.orbitkv.storage.StorageProxy;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.VerticleBase;
import io.vertx.core.http.ClientAuth;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpVersion;
import io.vertx.core.net.PemKeyCertOptions;
import io.vertx.core.net.PemTrustOptions;
import io.vertx.core.net.SocketAddress;
import io.vertx.grpc.client.GrpcClient;
import io.vertx.grpc.server.GrpcServer;
import io.vertx.grpc.server.GrpcServerRequest;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.security.cert.Certificate;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;
import javax.net.ssl.SSLPeerUnverifiedException;

/**
 * The peer role of one Manager (with {@code cluster.enabled} and {@code peer.port}): the source side that lends this
 * Manager's DRAM images to other members, and the requester side that fetches a peer's pages into local slots.
 *
 * <p>Design note (ownership). Source: a lease owns exact-generation pins on this Manager's sealed images (storage
 * {@code pinExact}, generations compared with the requester's evidence; any difference rejects and unpins) and is
 * charged to its requester's credits (bytes pinned per requester at most {@code peer.credit-bytes}). A lease's pins
 * are released by exactly one of: the requester's Release, the lease expiry timer, the requester leaving membership
 * (or restarting: another incarnation), or this role's stop. A release while the lease's transfer is still writing is
 * deferred until netty finished reading the slots ({@link TcpPeerTransport.Source#finished}). Requester: a fetch owns
 * an unsealed publish in the local store (slots allocated after the source lease is held); the slots are sealed (the
 * storage role verifies the source's CRC32C: a mismatch aborts the publish, is counted and never served) or aborted —
 * and a transfer that failed after submission is fenced (the transport writes nothing more) before the slots are
 * aborted, so the segment never moves to another medium while bytes may still land in it.
 *
 * <p>Peer SSD (design note): a reserve naming SSD evidence ({@code PeerKey.from_ssd}) is served from staging in this
 * Manager's own pool: {@link PeerSsdStaging} owns the order (exact extent generations checked, credits and the
 * {@code peer.staging-bytes} bound charged before any slot is allocated, then a verified io_uring read through the
 * storage role) and the lease that receives the staged pages owns them until it ends by the same four causes as any
 * lease; its end frees the staged slots. The transfer sends them like DRAM pages, with the verified read's CRC32C,
 * and the grant marks them ({@code PeerPage.staged}). A read that fails verification serves nothing (SSD_READ_FAILED).
 *
 * <p>Budget: one waiting budget spans CANDIDATE → RESERVED → RESIDENT → READY; each stage gets what is left of it.
 *
 * <p>Crash: a requester that dies leaves its leases to expire (or to membership departure, sooner with the lease ttl);
 * a source that dies closes or stalls the transfer: the requester fences at its budget and aborts its slots.
 *
 * <p>Checksums (design note): a source grants each page's CRC32C from the seal, or from the storage role's background
 * pass after a seal without checksums (remembered for that exact slot generation only); what is still unknown at
 * reserve is computed on a worker (the pins keep the slots stable meanwhile; counted). A requester's transport computes
 * each received page's CRC32C over the bytes its slot holds (inline as they land, or whole pages on its verifier
 * threads, {@code peer.verify-threads}; see {@link TcpPeerTransport}), its receive completes only once every value is
 * in, and the seal compares those with the grant's (a mismatch aborts the publish, is counted and never served); a
 * transport that computes none leaves the seal to read the slots. A failed receive is fenced before its slots are
 * aborted, and the fence waits for the receive's outstanding checks, so no verifier reads a slot after its abort.
 *
 * <p>Concurrency: all lease and fetch state lives on this verticle's context. The payload moves on the transport's own
 * loops ({@code peer.transfer-loops}), and everything the transport calls back (a source lease's begin and finished,
 * a receive's completion and fence) arrives on this context ({@link TcpPeerTransport}'s design note). At start a
 * worker prefaults this role's pool mapping ({@link #startPrefault}); {@link #stop} waits for it before unmapping.
 */
public final class PeerVerticle extends VerticleBase {
    /** The storage instance id under which fetched pages are published locally. */
    public static final long PEER_INSTANCE = Long.MAX_VALUE - 12;
    static final String PEER_ENDPOINT = "peer";

    /** The stages of a fetch (the answer's states), in order. */
    public enum Stage { CANDIDATE, RESERVED, RESIDENT, READY }

    /**
     * Test seam (requester side): consulted before each reserve this role sends, after its own membership check of the
     * owner passed; the reserve goes out when the answered future completes. A test holds it to restart the source
     * between that check and the reserve (the source then judges the evidence's incarnation itself).
     */
    @FunctionalInterface
    public interface ReserveGate {
        ReserveGate OPEN = owner -> Future.succeededFuture();

        Future<Void> beforeReserve(PeerOwner owner);
    }

    /** A completed fetch: the local references (sealed, unpinned) and the bytes moved. */
    public record Fetched(List<ImageStore.ImageRef> local, long bytes, List<Stage> stages) {}

    private final PeerSettings settings;
    private final CostProxy cost;
    private final ClusterSettings cluster;
    private final MembershipRole membership;
    private final Path poolPath;
    private final long poolBytes;
    private final MeterRegistry registry;
    private final SecureRandom random = new SecureRandom();
    private final Map<Long, Lease> leases = new HashMap<>();
    private final Map<String, Long> creditsInUse = new HashMap<>();

    private Context context;
    private StorageProxy storage;
    private PeerSsdStaging staging;
    private boolean stopping;
    private SharedMemoryFile pool;
    private TcpPeerTransport transport;
    private HttpServer grpcServer;
    private GrpcClient grpcClient;
    private long nextLease = 1;
    private Counter mismatches;
    private Counter sourceChecksums;
    /** The start-up prefault of this role's pool mapping ({@link #startPrefault}): ended, how long, asked to stop. */
    private final Promise<Void> prefaulted = Promise.promise();
    private volatile long prefaultNanos = -1;
    private volatile boolean prefaultStop;
    /** One prefault write per this many bytes ({@link #poolPageBytes}); 4 KiB unless told the pool is on huge pages. */
    private long prefaultPageBytes = PoolPrefault.PAGE;
    private volatile ReserveGate reserveGate = ReserveGate.OPEN;
    private Counter rejections;
    private Counter fetchedPages;
    private Counter expired;
    private Counter departed;
    /** Requester fetches that failed, by {@link PeerException.Kind} (a bounded label). */
    private final Map<PeerException.Kind, Counter> fetchFailures = new EnumMap<>(PeerException.Kind.class);

    public PeerVerticle(PeerSettings settings, ClusterSettings cluster, MembershipRole membership, Path poolPath,
                        long poolBytes, MeterRegistry registry) {
        this(settings, cluster, membership, poolPath, poolBytes, registry, null);
    }

    /** With the cost role's proxy: peer fetch operation and complete-route samples keyed by the peer's incarnation. */
    public PeerVerticle(PeerSettings settings, ClusterSettings cluster, MembershipRole membership, Path poolPath,
                        long poolBytes, MeterRegistry registry, CostProxy cost) {
        this.cost = cost;
        this.settings = settings;
        this.cluster = cluster;
        this.membership = membership;
        this.poolPath = poolPath;
        this.poolBytes = poolBytes;
        this.registry = registry;
    }

    /**
     * The pool's page size for the start-up prefault ({@link PoolPrefault#pageBytes}: the Manager asks the mount once
     * and tells this role before deploying it). Answers this.
     */
    public PeerVerticle poolPageBytes(long pageBytes) {
        this.prefaultPageBytes = pageBytes;
        return this;
    }

    private static final class Lease {
        final long id;
        final String requester;
        final long requesterIncarnation;
        final byte[] token;
        final List<ImageStore.ImageRef> refs;
        final long bytes;
        /** Peer SSD staging: what the staging owner holds for this lease (null: DRAM pins only, in {@code refs}). */
        final PeerSsdStaging.Held staged;
        long timer = -1;
        boolean sending;
        boolean released;

        Lease(long id, String requester, long requesterIncarnation, byte[] token, List<ImageStore.ImageRef> refs, long bytes) {
            this(id, requester, requesterIncarnation, token, refs, bytes, null);
        }

        Lease(long id, String requester, long requesterIncarnation, byte[] token, List<ImageStore.ImageRef> refs, long bytes,
              PeerSsdStaging.Held staged) {
            this.id = id;
            this.requester = requester;
            this.requesterIncarnation = requesterIncarnation;
            this.token = token;
            this.refs = refs;
            this.bytes = bytes;
            this.staged = staged;
        }
    }

    @Override
    public Future<?> start() {
        context = vertx.getOrCreateContext();
        storage = new StorageProxy(vertx);
        staging = new PeerSsdStaging(storage, settings.stagingBytes(), registry);
        mismatches = Counter.builder("orbitkv_peer_checksum_mismatches_total")
                .description("Fetched peer pages whose bytes did not match the source's CRC32C (never served)").register(registry);
        sourceChecksums = Counter.builder("orbitkv_peer_source_checksums_total")
                .description("Pages whose CRC32C this source computed at reserve (not known from the seal or remembered)")
                .register(registry);
        rejections = Counter.builder("orbitkv_peer_rejections_total")
                .description("Peer reserves this source refused").register(registry);
        fetchedPages = Counter.builder("orbitkv_peer_fetched_pages_total")
                .description("Pages fetched from peers and sealed here").register(registry);
        expired = Counter.builder("orbitkv_peer_leases_expired_total")
                .description("Source leases whose pins were released at expiry").register(registry);
        departed = Counter.builder("orbitkv_peer_leases_departed_total")
                .description("Source leases released because their requester left membership").register(registry);
        for (PeerException.Kind kind : PeerException.Kind.values()) {
            fetchFailures.put(kind, Counter.builder("orbitkv_peer_fetch_failures_total")
                    .tag("kind", kind.name().toLowerCase(Locale.ROOT))
                    .description("Peer fetches this requester gave up, by kind (timeout: the attempt's bound passed, "
                            + "the transfer was fenced)").register(registry));
        }
        io.micrometer.core.instrument.Gauge.builder("orbitkv_peer_source_leases", leases, Map::size)
                .description("Source leases holding pins now").register(registry);
        membership.addListener(new MembershipRole.Listener() {
            @Override
            public void onMembership(MemberTable.Change change) {
                context.runOnContext(v -> dropDeparted());
            }

            @Override
            public void onPeersUnknown() {}

            @Override
            public void onPeersKnown() {
                context.runOnContext(v -> dropDeparted());
            }
        });
        PemKeyCertOptions keyCert = new PemKeyCertOptions().setCertPath(cluster.tlsCert().toString())
                .setKeyPath(cluster.tlsKey().toString());
        PemTrustOptions trust = new PemTrustOptions().addCertPath(cluster.tlsCa().toString());
        grpcClient = GrpcClient.client(vertx, new HttpClientOptions().setSsl(true).setUseAlpn(true)
                .setProtocolVersion(HttpVersion.HTTP_2).setHttp2ClearTextUpgrade(false)
                .setVerifyHost(true).setKeyCertOptions(keyCert).setTrustOptions(trust).setConnectTimeout(5_000));
        transport = new TcpPeerTransport(vertx, settings, registry, cluster.tlsCa(), cluster.tlsCert(), cluster.tlsKey());
        GrpcServer grpc = GrpcServer.server(vertx);
        grpc.callHandler(PeerTransferGrpcService.Reserve, this::onReserve);
        grpc.callHandler(PeerTransferGrpcService.Release, this::onRelease);
        return vertx.executeBlocking(() -> SharedMemoryFile.map(poolPath, poolBytes))
                .compose(mapped -> {
                    pool = mapped;
                    startPrefault();
                    return transport.serve(cluster.host(), settings.transferPort(), poolPath, pool.segment(), transferSource());
                })
                .compose(port -> vertx.createHttpServer(new HttpServerOptions().setHost(cluster.host())
                        .setPort(settings.port()).setSsl(true).setUseAlpn(true).setClientAuth(ClientAuth.REQUIRED)
                        .setKeyCertOptions(keyCert).setTrustOptions(trust)).requestHandler(grpc).listen())
                .onSuccess(server -> grpcServer = server).mapEmpty();
    }

    @Override
    public Future<?> stop() {
        stopping = true;
        prefaultStop = true;
        if (pool == null) {
            prefaulted.tryComplete(); // never mapped: no prefault ran
        }
        for (Lease lease : List.copyOf(leases.values())) {
            drop(lease);
        }
        Future<Void> servers = grpcServer == null ? Future.succeededFuture() : grpcServer.close();
        return servers.compose(v -> transport.close()).compose(v -> grpcClient.close())
                .compose(v -> prefaulted.future().otherwiseEmpty()) // the worker stops at its next step
                .compose(v -> vertx.executeBlocking(() -> {
                    if (pool != null) {
                        pool.close();
                    }
                    return null;
                }));
    }

    /**
     * Prefault (design note): a fresh mapping of the pool costs a page fault per page (4 KiB, or 2 MiB on huge pages:
     * {@link #poolPageBytes}) at its first write, and on
     * a requester the first write is the receive's recv(2) or copy into a destination slot — on the event loop, in
     * the middle of a transfer. So at start a worker write-faults the first {@code peer.prefault-bytes} of this role's
     * mapping once ({@link PoolPrefault}: no value changes, safe while the pool is in use). It stops early when this
     * role stops ({@link #stop} waits for it before unmapping). Completes {@link #prefaulted()}.
     */
    private void startPrefault() {
        MemorySegment segment = pool.segment();
        long started = System.nanoTime();
        vertx.executeBlocking(() -> PoolPrefault.prefault(segment, settings.prefaultBytes(),
                        prefaultPageBytes, () -> prefaultStop), false)
                .onComplete(ar -> {
                    prefaultNanos = System.nanoTime() - started;
                    prefaulted.tryComplete();
                });
    }

    /** Completes once the start-up prefault of this role's pool mapping ended (see {@link #startPrefault}). */
    public Future<Void> prefaulted() {
        return prefaulted.future();
    }

    /** How long the prefault took (ns), -1 before it ended. */
    public long prefaultNanos() {
        return prefaultNanos;
    }

    // ---------------------------------------------------------------- source side

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

    private void onReserve(GrpcServerRequest<PeerReserveRequest, PeerReserveReply> request) {
        String member = memberOf(request);
        request.handler(msg -> reserve(member, msg).onComplete(ar -> {
            if (ar.succeeded()) {
                request.response().end(ar.result());
            } else {
                request.response().status(io.vertx.grpc.common.GrpcStatus.INTERNAL).end();
            }
        }));
    }

    private static PeerReserveReply reject(PeerRejection reason, int index) {
        return PeerReserveReply.newBuilder().setReject(PeerReject.newBuilder().setReason(reason).setKeyIndex(index)).build();
    }

    /** Validates, pins the exact generations, charges credits, computes missing checksums, grants a lease. */
    Future<PeerReserveReply> reserve(String member, PeerReserveRequest r) {
        MemberRecord record = member == null ? null : membership.members().get(member);
        if (record == null || record.incarnation() != r.getRequesterIncarnation() || member.equals(membership.memberId())) {
            rejections.increment();
            return Future.succeededFuture(reject(PeerRejection.NOT_A_MEMBER, -1));
        }
        if (r.getSourceIncarnation() != membership.incarnation()) {
            rejections.increment();
            return Future.succeededFuture(reject(PeerRejection.STALE_INCARNATION, -1));
        }
        if (r.getNamespace().size() != StateKey.NAMESPACE_BYTES || r.getKeysCount() == 0
                || r.getKeysCount() > settings.maxKeys()) {
            rejections.increment();
            return Future.succeededFuture(reject(PeerRejection.BAD_PEER_REQUEST, -1));
        }
        byte[] ns = r.getNamespace().toByteArray();
        List<StateKey> keys = new ArrayList<>(r.getKeysCount());
        List<ImageStore.PositionedKey> probed = new ArrayList<>();
        for (int i = 0; i < r.getKeysCount(); i++) {
            PeerKey k = r.getKeys(i);
            if (k.getBlockHash().isEmpty() || k.getBlockHash().size() > StateKey.MAX_BLOCK_HASH_BYTES) {
                rejections.increment();
                return Future.succeededFuture(reject(PeerRejection.BAD_PEER_REQUEST, i));
            }
            StateKey key = StateKey.of(ns, k.getGroupId(), k.getBlockHash().toByteArray());
            keys.add(key);
            probed.add(new ImageStore.PositionedKey(i, key));
        }
        if (r.getKeysList().stream().anyMatch(PeerKey::getFromSsd)) {
            return reserveStaged(member, record, r, keys);
        }
        return storage.probe(List.of(new ImageStore.GroupProbe(0, probed))).compose(presence -> {
            if (presence.groups().getFirst().sealed().isEmpty()) {
                rejections.increment();
                return Future.succeededFuture(reject(PeerRejection.UNKNOWN_NAMESPACE, -1));
            }
            return storage.pinExact(List.of(keys)).compose(pin -> {
                if (!pin.complete()) {
                    rejections.increment();
                    return Future.succeededFuture(reject(PeerRejection.CHANGED_GENERATION, keys.indexOf(pin.missing())));
                }
                List<ImageStore.ImageRef> refs = pin.pinned().getFirst();
                for (int i = 0; i < refs.size(); i++) {
                    if (refs.get(i).generation() != r.getKeys(i).getGeneration()) {
                        rejections.increment();
                        return storage.unpin(pin.pinned()).map(n -> reject(PeerRejection.CHANGED_GENERATION, firstChanged(refs, r)));
                    }
                }
                long used = creditsInUse.getOrDefault(member, 0L);
                if (used + pin.pinnedBytes() > settings.creditBytes()) {
                    rejections.increment();
                    return storage.unpin(pin.pinned()).map(n -> reject(PeerRejection.NO_CREDIT, -1));
                }
                creditsInUse.merge(member, pin.pinnedBytes(), Long::sum);
                byte[] token = new byte[16];
                random.nextBytes(token);
                Lease lease = new Lease(nextLease++, member, record.incarnation(), token, refs, pin.pinnedBytes());
                leases.put(lease.id, lease);
                long leaseMs = Math.max(1, Math.min(r.getLeaseMs() <= 0 ? settings.maxLeaseMillis() : r.getLeaseMs(),
                        settings.maxLeaseMillis()));
                lease.timer = vertx.setTimer(leaseMs, t -> {
                    if (leases.get(lease.id) == lease) {
                        expired.increment();
                        drop(lease);
                    }
                });
                return checksums(refs).map(crcs -> {
                    PeerGrant.Builder grant = PeerGrant.newBuilder().setLeaseId(lease.id).setLeaseMs(leaseMs)
                            .setTransferToken(ByteString.copyFrom(token)).setPlaintext(settings.plaintext())
                            .setTransferEndpoint(cluster.host() + ":" + settings.transferPort());
                    for (int i = 0; i < refs.size(); i++) {
                        grant.addPages(PeerPage.newBuilder().setGeneration(refs.get(i).generation())
                                .setLengthBytes(refs.get(i).lengthBytes()).setCrc32C(crcs.get(i).intValue()));
                    }
                    return PeerReserveReply.newBuilder().setGrant(grant).build();
                });
            });
        });
    }

    /**
     * A reserve naming SSD evidence ({@code PeerKey.from_ssd}): the staging owner ({@link PeerSsdStaging}) charges the
     * credits and the staging bound, pins the DRAM pages and stages the SSD ones (a verified read into this pool); the
     * lease then owns all of it. The lease time counts from the receipt of the request, staging included.
     */
    private Future<PeerReserveReply> reserveStaged(String member, MemberRecord record, PeerReserveRequest r,
                                                   List<StateKey> keys) {
        long receivedNanos = System.nanoTime();
        long leaseMs = Math.max(1, Math.min(r.getLeaseMs() <= 0 ? settings.maxLeaseMillis() : r.getLeaseMs(),
                settings.maxLeaseMillis()));
        List<Long> generations = r.getKeysList().stream().map(PeerKey::getGeneration).toList();
        List<Boolean> fromSsd = r.getKeysList().stream().map(PeerKey::getFromSsd).toList();
        PeerSsdStaging.Credits credits = new PeerSsdStaging.Credits() {
            @Override
            public boolean charge(long bytes) {
                long used = creditsInUse.getOrDefault(member, 0L);
                if (used + bytes > settings.creditBytes()) {
                    return false;
                }
                creditsInUse.merge(member, bytes, Long::sum);
                return true;
            }

            @Override
            public void refund(long bytes) {
                creditsInUse.computeIfPresent(member, (k, v) -> v - bytes <= 0 ? null : v - bytes);
            }
        };
        return staging.acquire(keys, generations, fromSsd, credits).compose(outcome -> {
            if (outcome.held() == null) {
                rejections.increment();
                return Future.succeededFuture(reject(outcome.rejection(), outcome.keyIndex()));
            }
            PeerSsdStaging.Held held = outcome.held();
            MemberRecord now = membership.members().get(member);
            if (stopping || now == null || now.incarnation() != record.incarnation()) {
                // the requester left (or this role stops) while the pages were staged: nobody will take them
                credits.refund(held.bytes());
                rejections.increment();
                return staging.release(held).map(v -> reject(PeerRejection.NOT_A_MEMBER, -1));
            }
            byte[] token = new byte[16];
            random.nextBytes(token);
            Lease lease = new Lease(nextLease++, member, record.incarnation(), token, held.refs(), held.bytes(), held);
            leases.put(lease.id, lease);
            long remainingMs = leaseMs - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - receivedNanos);
            lease.timer = vertx.setTimer(Math.max(1, remainingMs), t -> {
                if (leases.get(lease.id) == lease) {
                    expired.increment();
                    drop(lease);
                }
            });
            Set<ImageStore.ImageRef> stagedRefs = new HashSet<>(held.staged());
            return checksums(held.refs()).map(crcs -> {
                PeerGrant.Builder grant = PeerGrant.newBuilder().setLeaseId(lease.id).setLeaseMs(leaseMs)
                        .setTransferToken(ByteString.copyFrom(token)).setPlaintext(settings.plaintext())
                        .setTransferEndpoint(cluster.host() + ":" + settings.transferPort());
                for (int i = 0; i < held.refs().size(); i++) {
                    ImageStore.ImageRef ref = held.refs().get(i);
                    grant.addPages(PeerPage.newBuilder().setGeneration(ref.generation()).setLengthBytes(ref.lengthBytes())
                            .setCrc32C(crcs.get(i).intValue()).setStaged(stagedRefs.contains(ref)));
                }
                return PeerReserveReply.newBuilder().setGrant(grant).build();
            });
        });
    }

    private static int firstChanged(List<ImageStore.ImageRef> refs, PeerReserveRequest r) {
        for (int i = 0; i < refs.size(); i++) {
            if (refs.get(i).generation() != r.getKeys(i).getGeneration()) {
                return i;
            }
        }
        return -1;
    }

    /**
     * The source's CRC32C per pinned image: known from the seal (or remembered by the storage role's background pass
     * after a seal without checksums, at the image's exact slot generation), else computed now on a worker (pins hold
     * the slots; counted by {@code orbitkv_peer_source_checksums_total}).
     */
    private Future<List<Long>> checksums(List<ImageStore.ImageRef> refs) {
        if (refs.stream().allMatch(ImageStore.ImageRef::crcKnown)) {
            return Future.succeededFuture(refs.stream().map(ImageStore.ImageRef::crc32c).toList());
        }
        sourceChecksums.increment(refs.stream().filter(r -> !r.crcKnown()).count());
        MemorySegment segment = pool.segment();
        return vertx.executeBlocking(() -> {
            List<Long> crcs = new ArrayList<>(refs.size());
            for (ImageStore.ImageRef ref : refs) {
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

    private void onRelease(GrpcServerRequest<PeerReleaseRequest, PeerReleaseReply> request) {
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

    /** Releases a lease's pins and credits (deferred while its transfer is still writing from the slots). */
    private void drop(Lease lease) {
        if (leases.remove(lease.id) == null) {
            return;
        }
        vertx.cancelTimer(lease.timer);
        lease.released = true;
        if (lease.sending) {
            deferred.put(lease.id, lease);
        } else {
            unpin(lease);
        }
    }

    private void unpin(Lease lease) {
        creditsInUse.computeIfPresent(lease.requester, (k, v) -> v - lease.bytes <= 0 ? null : v - lease.bytes);
        if (lease.staged != null) {
            staging.release(lease.staged);
        } else {
            storage.unpin(List.of(lease.refs));
        }
    }

    private void dropDeparted() {
        Map<String, MemberRecord> members = membership.members();
        for (Lease lease : List.copyOf(leases.values())) {
            MemberRecord now = members.get(lease.requester);
            if (now == null || now.incarnation() != lease.requesterIncarnation) {
                departed.increment();
                drop(lease);
            }
        }
    }

    private TcpPeerTransport.Source transferSource() {
        return new TcpPeerTransport.Source() {
            @Override
            public List<TcpPeerTransport.PageSlice> begin(long leaseId, byte[] token, String peerMemberId) {
                Lease lease = leases.get(leaseId);
                if (lease == null || lease.sending || !TcpPeerTransport.tokenEquals(lease.token, token)
                        || (peerMemberId != null && !peerMemberId.equals(lease.requester))) {
                    return null;
                }
                lease.sending = true;
                return lease.refs.stream().map(ref -> new TcpPeerTransport.PageSlice(ref.offset(), ref.lengthBytes())).toList();
            }

            @Override
            public void finished(long leaseId, boolean sent) {
                context.runOnContext(v -> {
                    Lease lease = leases.get(leaseId);
                    if (lease != null) {
                        lease.sending = false;
                    } else {
                        // released meanwhile: its unpin was deferred until now
                        releasedWhileSending(leaseId);
                    }
                });
            }
        };
    }

    private final Map<Long, Lease> deferred = new HashMap<>();

    private void releasedWhileSending(long leaseId) {
        Lease lease = deferred.remove(leaseId);
        if (lease != null) {
            unpin(lease);
        }
    }

    /** Transfer connections this Manager opened as a requester (reused ones count once; tests). */
    public long transferConnectionsOpened() {
        return transport.connectionsOpened();
    }

    /** The requester's transport (tests: its verifier seam and counts). */
    public TcpPeerTransport transport() {
        return transport;
    }

    /** Source leases holding pins now (tests). */
    public Future<Integer> sourceLeases() {
        Promise<Integer> p = Promise.promise();
        context.runOnContext(v -> p.complete(leases.size() + deferred.size()));
        return p.future();
    }

    // ---------------------------------------------------------------- requester side

    /**
     * Fetches {@code keys} (at the owner's exact {@code generations}) from the peer {@code owner} into local slots,
     * within one waiting budget. Fails with a {@link PeerException}: {@link PeerException#beforePayload()} = nothing
     * moved, the caller may replan (another peer, local SSD) or answer MISS.
     */
    public Future<Fetched> fetch(PeerOwner owner, byte[] namespace, List<StateKey> keys, List<Long> generations,
                                 Duration budget) {
        return fetch(owner, namespace, keys, generations, List.of(), budget);
    }

    /**
     * As {@link #fetch(PeerOwner, byte[], List, List, Duration)}, where {@code fromSsd.get(i)} says that generation i
     * is the owner's committed SSD extent generation (peer SSD evidence): the owner stages that page from its SSD
     * before granting. An empty list: every generation is a DRAM slot generation.
     */
    public Future<Fetched> fetch(PeerOwner owner, byte[] namespace, List<StateKey> keys, List<Long> generations,
                                 List<Boolean> fromSsd, Duration budget) {
        long deadline = System.nanoTime() + budget.toNanos();
        return acquire(owner, namespace, keys, generations, fromSsd, deadline).compose(this::submit);
    }

    /**
     * What an acquired fetch holds: the source lease (grant) and the local publish whose slots will receive the pages.
     * Exactly one of {@link #submit} or {@link #abandon} ends it.
     */
    public static final class Acquired {
        final PeerTransferGrpcClient client;
        final PeerGrant grant;
        final long publishId;
        final List<PeerTransport.Destination> destinations;
        final List<ImageStore.ImageRef> written;
        final List<Integer> crcs;
        final List<Long> lengths;
        final List<StateKey> keys;
        final long deadline;
        final List<Stage> stages;
        /** Which destinations are local slots (the others: pages already resident here, received into scratch). */
        final List<Integer> slotDestinations = new ArrayList<>();
        PeerOwner owner;
        long startedNanos;

        Acquired(PeerTransferGrpcClient client, PeerGrant grant, long publishId, List<PeerTransport.Destination> destinations,
                 List<ImageStore.ImageRef> written, List<Integer> crcs, List<Long> lengths, List<StateKey> keys,
                 long deadline, List<Stage> stages) {
            this.client = client;
            this.grant = grant;
            this.publishId = publishId;
            this.destinations = destinations;
            this.written = written;
            this.crcs = crcs;
            this.lengths = lengths;
            this.keys = keys;
            this.deadline = deadline;
            this.stages = stages;
        }

        public List<StateKey> keys() {
            return keys;
        }

        /** Pages the source staged from its SSD for this lease (peer SSD evidence), as its grant says. */
        public int stagedPages() {
            return (int) grant.getPagesList().stream().filter(PeerPage::getStaged).count();
        }
    }

    /** CANDIDATE → RESERVED: the source lease, then the local slots; no payload moves. All or nothing. */
    public Future<Acquired> acquire(PeerOwner owner, byte[] namespace, List<StateKey> keys, List<Long> generations,
                                    long deadline) {
        return acquire(owner, namespace, keys, generations, List.of(), deadline);
    }

    /** As above; {@code fromSsd}: which generations are the owner's SSD extent generations (empty: none). */
    public Future<Acquired> acquire(PeerOwner owner, byte[] namespace, List<StateKey> keys, List<Long> generations,
                                    List<Boolean> fromSsd, long deadline) {
        if (!fromSsd.isEmpty() && fromSsd.size() != keys.size()) {
            return Future.failedFuture(new IllegalArgumentException("one fromSsd flag per key, or none"));
        }
        Promise<Acquired> answer = Promise.promise();
        context.runOnContext(v -> doAcquire(owner, namespace, keys, generations, fromSsd, deadline)
                .onFailure(this::countFailure).onComplete(answer));
        return answer.future();
    }

    private Future<Acquired> doAcquire(PeerOwner owner, byte[] namespace, List<StateKey> keys, List<Long> generations,
                                       List<Boolean> fromSsd, long deadline) {
        long started = System.nanoTime();
        return doAcquire0(owner, namespace, keys, generations, fromSsd, deadline).map(a -> {
            a.owner = owner;
            a.startedNanos = started;
            return a;
        });
    }

    private Future<Acquired> doAcquire0(PeerOwner owner, byte[] namespace, List<StateKey> keys, List<Long> generations,
                                        List<Boolean> fromSsd, long deadline) {
        List<Stage> stages = new ArrayList<>(List.of(Stage.CANDIDATE));
        MemberRecord record = membership.members().get(owner.memberId());
        if (record == null || record.incarnation() != owner.incarnation()) {
            return Future.failedFuture(new PeerException(PeerException.Kind.REJECTED, PeerRejection.STALE_INCARNATION,
                    "the owner is not a current member at that incarnation"));
        }
        String endpoint = record.endpoints().get(PEER_ENDPOINT);
        if (endpoint == null) {
            return Future.failedFuture(new PeerException(PeerException.Kind.UNREACHABLE, "the owner serves no peer port"));
        }
        PeerReserveRequest.Builder request = PeerReserveRequest.newBuilder().setNamespace(ByteString.copyFrom(namespace))
                .setSourceIncarnation(owner.incarnation()).setRequesterIncarnation(membership.incarnation());
        for (int i = 0; i < keys.size(); i++) {
            request.addKeys(PeerKey.newBuilder().setGroupId(keys.get(i).groupId())
                    .setBlockHash(ByteString.copyFrom(keys.get(i).blockHash())).setGeneration(generations.get(i))
                    .setFromSsd(!fromSsd.isEmpty() && fromSsd.get(i)));
        }
        int colon = endpoint.lastIndexOf(':');
        PeerTransferGrpcClient client = PeerTransferGrpcClient.create(grpcClient,
                SocketAddress.inetSocketAddress(Integer.parseInt(endpoint.substring(colon + 1)), endpoint.substring(0, colon)));
        return gate(owner).compose(v -> client.reserve(request.setLeaseMs(remainingMillis(deadline)).build()))
                .timeout(remainingMillis(deadline), TimeUnit.MILLISECONDS)
                .recover(e -> Future.failedFuture(e instanceof PeerException ? e
                        : new PeerException(PeerException.Kind.UNREACHABLE, "reserve failed: " + e.getMessage())))
                .compose(reply -> {
                    if (reply.hasReject()) {
                        return Future.failedFuture(new PeerException(PeerException.Kind.REJECTED, reply.getReject().getReason(),
                                "the source refused: " + reply.getReject().getReason()));
                    }
                    stages.add(Stage.RESERVED);
                    return slots(client, reply.getGrant(), keys, deadline, stages);
                });
    }

    /** The {@link ReserveGate}'s answer for {@code owner}, completed back on this role's context. */
    private Future<Void> gate(PeerOwner owner) {
        ReserveGate gate = reserveGate;
        if (gate == ReserveGate.OPEN) {
            return Future.succeededFuture();
        }
        Promise<Void> passed = Promise.promise();
        gate.beforeReserve(owner).onComplete(ar -> context.runOnContext(v -> passed.handle(ar)));
        return passed.future();
    }

    /** Test seam: installs {@code gate} (see {@link ReserveGate}); {@link ReserveGate#OPEN} removes it. */
    public void reserveGate(ReserveGate gate) {
        this.reserveGate = Objects.requireNonNull(gate, "gate");
    }

    private Future<Acquired> slots(PeerTransferGrpcClient client, PeerGrant grant, List<StateKey> keys, long deadline,
                                   List<Stage> stages) {
        List<Long> lengths = grant.getPagesList().stream().map(PeerPage::getLengthBytes).toList();
        return storage.allocate(PEER_INSTANCE, keys, lengths).recover(e -> {
            release(client, grant);
            return Future.failedFuture(new PeerException(PeerException.Kind.REJECTED, "no local slots: " + e.getMessage()));
        }).map(allocated -> {
            MemorySegment local = pool.segment();
            List<PeerTransport.Destination> destinations = new ArrayList<>();
            List<ImageStore.ImageRef> written = new ArrayList<>();
            List<Integer> crcs = new ArrayList<>();
            for (int i = 0; i < allocated.slots().size(); i++) {
                ImageStore.SlotGrant slot = allocated.slots().get(i);
                if (slot.allocated()) {
                    destinations.add(new PeerTransport.Destination(local.asSlice(slot.ref().offset(), lengths.get(i))));
                    written.add(slot.ref());
                    crcs.add(grant.getPages(i).getCrc32C());
                } else {
                    // already resident here: its bytes are received into scratch and dropped
                    destinations.add(new PeerTransport.Destination(Arena.ofAuto().allocate(lengths.get(i), 4096)));
                }
            }
            Acquired acquired = new Acquired(client, grant, allocated.publishId(), destinations, written, crcs, lengths,
                    keys, deadline, stages);
            for (int i = 0; i < allocated.slots().size(); i++) {
                if (allocated.slots().get(i).allocated()) {
                    acquired.slotDestinations.add(i);
                }
            }
            return acquired;
        });
    }

    /** Ends an acquired fetch that will not be submitted: its local slots and the source lease go. */
    public Future<Void> abandon(Acquired acquired) {
        Promise<Void> answer = Promise.promise();
        context.runOnContext(v -> {
            release(acquired.client, acquired.grant);
            storage.abort(PEER_INSTANCE, acquired.publishId).<Void>mapEmpty().otherwiseEmpty().onComplete(answer);
        });
        return answer.future();
    }

    /**
     * RESERVED → RESIDENT → READY: the payload into the slots, then the seal that verifies the source's CRC32C. A
     * failure after submission fences the transfer before the slots are aborted; either way the source lease goes.
     */
    public Future<Fetched> submit(Acquired acquired) {
        Promise<Fetched> answer = Promise.promise();
        context.runOnContext(v -> doSubmit(acquired).onFailure(this::countFailure).onComplete(answer));
        return answer.future();
    }

    private void countFailure(Throwable failure) {
        PeerException.Kind kind = failure instanceof PeerException e ? e.kind() : PeerException.Kind.TRANSFER_FAILED;
        fetchFailures.get(kind).increment();
    }

    private Future<Fetched> doSubmit(Acquired a) {
        PeerGrant grant = a.grant;
        long submitted = System.nanoTime();
        PeerTransport.Receive receive = transport.receive(grant.getTransferEndpoint(), grant.getLeaseId(),
                grant.getTransferToken().toByteArray(), a.destinations, Duration.ofMillis(remainingMillis(a.deadline)));
        return receive.completion().transform(ar -> {
            observe(a, CostPath.PEER_FETCH, ar.succeeded(), System.nanoTime() - submitted);
            if (ar.failed()) {
                // fenced first (nothing more lands in the slots), then the slots go
                return receive.fence().compose(v -> storage.abort(PEER_INSTANCE, a.publishId))
                        .transform(x -> {
                            release(a.client, grant);
                            return Future.failedFuture(ar.cause());
                        });
            }
            a.stages.add(Stage.RESIDENT);
            List<Integer> received = slotChecksums(receive.receivedChecksums(), a);
            Future<ImageStore.SealResult> seal = received == null
                    ? storage.seal(PEER_INSTANCE, a.publishId, a.crcs, a.written)
                    : storage.sealReceived(PEER_INSTANCE, a.publishId, a.crcs, a.written, received);
            return seal.transform(sealed -> {
                release(a.client, grant);
                if (sealed.failed()) {
                    mismatches.increment();
                    // the storage role aborted the publish on the mismatch (its slots are free again)
                    return Future.failedFuture(new PeerException(PeerException.Kind.CHECKSUM_MISMATCH,
                            "the fetched bytes do not match the source's checksum: " + sealed.cause().getMessage()));
                }
                a.stages.add(Stage.READY);
                observe(a, a.stagedPages() > 0 ? CostPath.PEER_SSD_HOST_READY_ROUTE : CostPath.PEER_HOST_READY_ROUTE,
                        true, System.nanoTime() - a.startedNanos);
                fetchedPages.increment(a.written.size());
                long bytes = a.lengths.stream().mapToLong(Long::longValue).sum();
                return Future.succeededFuture(new Fetched(List.copyOf(a.written), bytes, List.copyOf(a.stages)));
            });
        });
    }

    /**
     * The transport's received checksums of the local slots only (grant order), or null when it computed none or no
     * slot was allocated (the seal then verifies, or has nothing to verify, as before).
     */
    private static List<Integer> slotChecksums(List<Integer> received, Acquired a) {
        if (received == null || a.written.isEmpty() || received.size() != a.destinations.size()) {
            return null;
        }
        List<Integer> slots = new ArrayList<>(a.slotDestinations.size());
        for (int i : a.slotDestinations) {
            slots.add(received.get(i));
        }
        return slots;
    }

    /** The cost key of a peer sample: the peer Manager at its incarnation, the bytes and pages of the lease. */
    public static CostEstimateKey costKey(CostPath path, PeerOwner owner, long bytes, int pages) {
        ResourceId peer = new ResourceId(ResourceKind.PEER_MANAGER, owner.memberId(), owner.incarnation());
        return path == CostPath.PEER_FETCH
                ? CostEstimateKey.operation(path, peer, RepresentationFamily.RAW, SizeBucket.of(bytes), SizeBucket.of(pages))
                : CostEstimateKey.route(path, peer, RepresentationFamily.RAW, SizeBucket.of(bytes), SizeBucket.of(pages),
                        CompletionTarget.hostReady());
    }

    private void observe(Acquired a, CostPath path, boolean succeeded, long nanos) {
        if (cost == null || !cost.observationsEnabled() || a.owner == null) {
            return;
        }
        long bytes = a.lengths.stream().mapToLong(Long::longValue).sum();
        cost.report(ObservationRecord.of(costKey(path, a.owner, bytes, a.lengths.size()),
                succeeded ? ObservationOutcome.SUCCEEDED : ObservationOutcome.FAILED, nanos, ObservedBytes.of(bytes, bytes)));
    }

    /** The budget this role gives an execution-owner acquisition (the planner's port carries none). */
    long leaseMillis() {
        return settings.maxLeaseMillis();
    }

    private void release(PeerTransferGrpcClient client, PeerGrant grant) {
        client.release(PeerReleaseRequest.newBuilder().setLeaseId(grant.getLeaseId()).build())
                .timeout(5, TimeUnit.SECONDS); // best effort: the source's lease expiry releases otherwise
    }

    private static long remainingMillis(long deadline) {
        return Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime()));
    }
}
