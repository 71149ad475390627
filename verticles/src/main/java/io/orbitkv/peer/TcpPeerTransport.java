package io.orbitkv.peer;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.common.RateLimitedLog;
import io.orbitkv.common.Ticker;
import io.orbitkv.protocol.peer.TransferHeader;
import com.google.protobuf.ByteString;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.internal.ContextInternal;
import io.vertx.core.internal.VertxInternal;
import io.vertx.core.internal.net.NetSocketInternal;
import io.vertx.core.net.JdkSSLEngineOptions;
import io.vertx.core.net.NetClient;
import io.vertx.core.net.NetClientOptions;
import io.vertx.core.net.OpenSSLEngineOptions;
import io.vertx.core.net.PemKeyCertOptions;
import io.vertx.core.net.PemTrustOptions;
import io.vertx.core.net.SSLEngineOptions;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

/**
 * The built-in transport: TCP transfer connections, mutual TLS with the cluster's certificates by default (OpenSSL
 * through netty-tcnative when it loads, else the JDK's engine), plaintext only by explicit configuration. Its parts:
 * {@link TransferLoops} (its own event loops), {@link TransferServer} (the source's transfer port),
 * {@link IdleConnections} (the requester's reusable connections, which {@link #warm} fills ahead of need, one set
 * per loop), {@link TcpReceive} (one receive into slots) and {@link ReceiveVerifiers} (the received pages' CRC32C).
 *
 * <p>Design note (concurrency). With {@code peer.transfer-loops} = N &gt; 0 each receive gets the next of the
 * transport's loops (its connection, reads, checksums and fence run there) and the source listens once per loop on the
 * same port; with 0 everything runs on the owner's context. Whatever crosses back to the owner (the peer role, on the
 * context that called {@link #serve} or {@link #receive}) hops to the owner's context: {@link Source#begin} and
 * {@link Source#finished} run there, and a receive's completion and fence complete their listeners there, so the
 * owner's state never sees a transfer thread. {@link #close} closes servers and connections, stops the verifiers, and
 * only then shuts down the loops (joining their threads).
 *
 * <p>Crash: a source that dies closes the connection (or stops answering: the requester's timeout fences); a
 * requester that dies closes the connection, and the source's owner keeps the pins until its lease ends.
 */
public final class TcpPeerTransport implements PeerTransport {
    /** What the transfer server asks its owner (the peer source role), on the owner's context. */
    public interface Source {
        /** The pages of a lease to send, or null to refuse (unknown lease, bad token, another member's lease). */
        List<PageSlice> begin(long leaseId, byte[] token, String peerMemberId);

        /** Every write of the lease completed (or failed): the pins may go. */
        void finished(long leaseId, boolean sent);
    }

    /** A page of the source's pool. */
    public record PageSlice(long offset, long length) {}

    /**
     * The source's send buffer. Only the send side is sized: a receive buffer size in Vert.x's options also installs
     * a fixed read allocator of that size on every connection (4 MiB per read, above what netty's allocator pools, so
     * each TLS read and each header read mapped and zeroed fresh memory), and a fixed size turns off the kernel's
     * receive autotuning, which grows the window further (up to {@code tcp_rmem}'s maximum) on its own.
     */
    static final int SEND_BUFFER_BYTES = 4 << 20;
    private static final AtomicInteger TRANSPORTS = new AtomicInteger();

    private final Vertx vertx;
    private final PeerSettings settings;
    private final NetClient client;
    private final String tlsEngine;
    private final TransferLoops loops;
    private final TransferServer server;
    private final IdleConnections idle = new IdleConnections();
    private final ReceiveVerifiers verifiers;
    private final AtomicLong connectionsOpened = new AtomicLong();
    private final AtomicLong connectionsWarmed = new AtomicLong();
    private final AtomicLong warmFailures = new AtomicLong();
    private final AtomicLong receivedBytes = new AtomicLong();
    private final AtomicLong receivedInPlaceBytes = new AtomicLong();
    private final AtomicLong recordBuffersCreated = new AtomicLong();
    private final AtomicLong recordBuffersReused = new AtomicLong();
    private volatile boolean plaintextInPlace = true;

    /** With its meters in a registry of its own (tests of the transport alone). */
    public TcpPeerTransport(Vertx vertx, PeerSettings settings, Path ca, Path cert, Path key) {
        this(vertx, settings, new SimpleMeterRegistry(), ca, cert, key);
    }

    public TcpPeerTransport(Vertx vertx, PeerSettings settings, MeterRegistry registry, Path ca, Path cert, Path key) {
        this(vertx, settings, registry, ca, cert, key, "t" + TRANSPORTS.incrementAndGet(), Ticker.SYSTEM);
    }

    /**
     * @param name names this transport's threads ({@code orbitkv-transfer-<name>-<n>}, {@code orbitkv-peer-verify-
     *             <name>-<n>}): the Manager's member id
     */
    public TcpPeerTransport(Vertx vertx, PeerSettings settings, MeterRegistry registry, Path ca, Path cert, Path key,
                            String name, Ticker ticker) {
        this.vertx = vertx;
        this.settings = settings;
        this.verifiers = new ReceiveVerifiers(settings.verifyThreads(), name, registry, ticker);
        PemKeyCertOptions tls = new PemKeyCertOptions().setCertPath(cert.toString()).setKeyPath(key.toString());
        PemTrustOptions trust = new PemTrustOptions().addCertPath(ca.toString());
        SSLEngineOptions engine = OpenSSLEngineOptions.isAvailable() ? new OpenSSLEngineOptions() : new JdkSSLEngineOptions();
        this.tlsEngine = settings.plaintext() ? "none" : engine instanceof OpenSSLEngineOptions ? "openssl" : "jdk";
        // no socket buffer sizes: the requester sends headers only and its receive buffer autotunes
        // (SEND_BUFFER_BYTES); plaintext reads land in the slots (TransferConnection), TLS reads in pooled buffers
        NetClientOptions options = new NetClientOptions().setConnectTimeout(5_000).setTcpNoDelay(true)
                .setIdleTimeout(IdleConnections.IDLE_SECONDS).setIdleTimeoutUnit(TimeUnit.SECONDS);
        if (!settings.plaintext()) {
            options.setSsl(true).setHostnameVerificationAlgorithm("HTTPS").setSslEngineOptions(engine)
                    .setKeyCertOptions(tls).setTrustOptions(trust);
        }
        this.client = vertx.createNetClient(options);
        this.loops = new TransferLoops(vertx, settings.transferLoops(), name);
        this.server = new TransferServer(this, vertx, settings, loops, tls, trust, tlsEngine);
    }

    /** The transport's own loops ({@code peer.transfer-loops}); 0: transfers run on their owner's context. */
    public int transferLoops() {
        return loops.size();
    }

    /** {@code openssl} (netty-tcnative), {@code jdk}, or {@code none} (plaintext). */
    public String tlsEngine() {
        return tlsEngine;
    }

    /**
     * Transfer connections this transport opened as a requester for a receive that found no idle one (reused ones
     * count once; those {@link #warm} opened ahead of need count in {@link #connectionsWarmed}).
     */
    public long connectionsOpened() {
        return connectionsOpened.get();
    }

    /** Transfer connections {@link #warm} opened and verified ahead of need. */
    public long connectionsWarmed() {
        return connectionsWarmed.get();
    }

    /** Connections {@link #warm} tried and could not open or verify. */
    public long warmFailures() {
        return warmFailures.get();
    }

    /** Payload bytes this transport's receives placed into destinations (tests await a transfer in progress). */
    public long receivedBytes() {
        return receivedBytes.get();
    }

    /** Of {@link #receivedBytes}, those the socket wrote straight into their slots (plaintext: no copy at all). */
    public long receivedInPlaceBytes() {
        return receivedInPlaceBytes.get();
    }

    /** TLS record buffers this transport's connections allocated ({@link RecordBuffers}; tests, benches). */
    public long recordBuffersCreated() {
        return recordBuffersCreated.get();
    }

    /** TLS record buffer requests served from a connection's own free buffers. */
    public long recordBuffersReused() {
        return recordBuffersReused.get();
    }

    /** Checks handed to the verifiers that have not ended (queued or running; 0 when none; tests). */
    public int verificationsPending() {
        return verifiers.pending();
    }

    /** Fences that wait for their receive's outstanding checks before completing (tests). */
    public int fencesWaitingForVerification() {
        return verifiers.fencesWaiting.get();
    }

    /** Test seam: {@code hook} runs on the verifier thread before each page's check (and may block it). */
    public void beforeVerify(Runnable hook) {
        verifiers.beforeVerify = hook;
    }

    /** The one-line-per-interval log of connections this Manager's peer ports refused. */
    RateLimitedLog refusals() {
        return server.refusals;
    }

    /**
     * Whether plaintext receives land straight in the slots (recv(2) into the pool mapping; the default) or go
     * through the connection's read buffers and are copied in. The peer role turns it off for a pool on 4 KiB pages:
     * there the kernel's copy into shared-memory pages costs about 3.5 times the CPU per byte of a copy into a reused
     * read buffer plus a copy into the slot (measured under a paravirtualised MMU, perf/README.md); on huge pages the
     * copy in place is the cheaper. Applies to connections opened after the call.
     */
    public TcpPeerTransport plaintextInPlace(boolean inPlace) {
        this.plaintextInPlace = inPlace;
        return this;
    }

    /** Starts the transfer server (source side) on {@code host:port}, serving from the pool file at {@code poolPath}. */
    public Future<Integer> serve(String host, int port, Path poolPath, MemorySegment pool, Source source) {
        return server.serve(host, port, poolPath, pool, source);
    }

    @Override
    public Receive receive(String endpoint, long leaseId, byte[] token, List<Destination> destinations, Duration timeout) {
        ContextInternal owner = currentContext();
        ContextInternal loop = loops.next(owner);
        TcpReceive receive = new TcpReceive(this, loop, owner.promise(), endpoint, TransferHeader.newBuilder()
                .setLeaseId(leaseId).setTransferToken(ByteString.copyFrom(token)).build(), destinations);
        long timer = vertx.setTimer(Math.max(1, timeout.toMillis()), t -> loop.runOnContext(v -> receive.fail(
                new PeerException(PeerException.Kind.TIMEOUT, "the transfer did not complete within its budget"))));
        receive.result.future().onComplete(ar -> vertx.cancelTimer(timer));
        if (loop == owner) {
            receive.start(true);
        } else {
            loop.runOnContext(v -> receive.start(true));
        }
        return receive;
    }

    /**
     * Tops the idle connections to {@code endpoint} up to {@code connections}, spread over the transfer loops (each
     * loop's receives take only that loop's connections), each opened on its loop and verified: with TLS the
     * handshake completed both ways and the source's certificate names {@code memberId}. Answers the idle connections
     * to {@code endpoint} once every open ended (each is bounded by the client's connect timeout).
     */
    @Override
    public Future<Integer> warm(String endpoint, String memberId, int connections) {
        ContextInternal caller = currentContext();
        List<ContextInternal> on = loops.size() == 0 ? List.of(caller) : loops.contexts();
        List<Future<Integer>> parts = new java.util.ArrayList<>();
        for (int i = 0; i < on.size(); i++) {
            int want = connections / on.size() + (i < connections % on.size() ? 1 : 0);
            if (want > 0) {
                ContextInternal loop = on.get(i);
                Promise<Integer> ready = caller.promise();
                loop.runOnContext(v -> warmOn(loop, endpoint, memberId, want).onComplete(ready));
                parts.add(ready.future());
            }
        }
        return Future.join(parts).map(all -> parts.stream().mapToInt(Future::result).sum());
    }

    /** On {@code loop}: opens what is missing of {@code want} idle connections there; answers the idle ones. */
    private Future<Integer> warmOn(ContextInternal loop, String endpoint, String memberId, int want) {
        int missing = want - idle.idleOn(endpoint, loop);
        List<Future<Void>> opens = new java.util.ArrayList<>();
        for (int i = 0; i < missing; i++) {
            opens.add(open(endpoint).compose(socket -> {
                String named = settings.plaintext() ? memberId : TransferServer.memberOf(socket);
                if (!memberId.equals(named)) {
                    socket.close();
                    return Future.failedFuture("the transfer port at " + endpoint + " presented the certificate of "
                            + named + ", not of " + memberId);
                }
                connectionsWarmed.incrementAndGet();
                idle.offer(new TransferConnection(endpoint, loop, socket, settings.plaintext(), plaintextInPlace,
                        idle));
                return Future.<Void>succeededFuture();
            }).onFailure(e -> warmFailures.incrementAndGet()));
        }
        return Future.join(opens).transform(ar -> Future.succeededFuture(idle.idleOn(endpoint, loop)));
    }

    @Override
    public Future<Void> close() {
        idle.closeAll();
        ContextInternal caller = currentContext();
        return server.close().compose(v -> client.close()).compose(v -> verifiers.stop(vertx))
                .eventually(() -> loops.close(caller)); // the loops go last: nothing is left on them
    }

    // ---- for the transport's parts

    ReceiveVerifiers verifiers() {
        return verifiers;
    }

    IdleConnections idle() {
        return idle;
    }

    boolean plaintext() {
        return settings.plaintext();
    }

    /** {@link #plaintextInPlace(boolean)}: whether plaintext receives land straight in the slots. */
    public boolean plaintextInPlace() {
        return plaintextInPlace;
    }

    /** A new transfer connection to {@code endpoint} (host:port) for a receive, counted. */
    Future<NetSocketInternal> connect(String endpoint) {
        return open(endpoint).andThen(ar -> {
            if (ar.succeeded()) {
                connectionsOpened.incrementAndGet();
            }
        });
    }

    /** A new transfer connection to {@code endpoint}, on the calling context's loop (TLS: handshake done). */
    private Future<NetSocketInternal> open(String endpoint) {
        int colon = endpoint.lastIndexOf(':');
        return client.connect(Integer.parseInt(endpoint.substring(colon + 1)), endpoint.substring(0, colon))
                .map(socket -> {
                    NetSocketInternal connected = (NetSocketInternal) socket;
                    if (!settings.plaintext()) {
                        reuseRecordBuffers(connected);
                    }
                    return connected;
                });
    }

    /** A TLS connection (handshake done) writes and reads its records in buffers of its own ({@link RecordBuffers}). */
    void reuseRecordBuffers(NetSocketInternal socket) {
        RecordBuffers.install(socket.channelHandlerContext().channel(), recordBuffersCreated, recordBuffersReused);
    }

    void countReceived(long n, boolean inPlace) {
        receivedBytes.addAndGet(n);
        if (inPlace) {
            receivedInPlaceBytes.addAndGet(n);
        }
    }

    ContextInternal currentContext() {
        return ((VertxInternal) vertx).getOrCreateContext();
    }

    /** Runs {@code call} on {@code owner} (at once when already there); the future's listeners run on this context. */
    <T> Future<T> onOwner(ContextInternal owner, Supplier<T> call) {
        ContextInternal here = currentContext();
        if (here == owner) {
            return Future.succeededFuture(call.get());
        }
        Promise<T> answer = here.promise();
        owner.runOnContext(v -> {
            try {
                answer.complete(call.get());
            } catch (RuntimeException e) {
                answer.fail(e);
            }
        });
        return answer.future();
    }

    /** The member id (certificate CN) of a verified certificate; null when it names none. */
    static String commonName(X509Certificate certificate) {
        for (String part : certificate.getSubjectX500Principal().getName().split(",")) {
            if (part.startsWith("CN=")) {
                return part.substring(3);
            }
        }
        return null;
    }

    static boolean tokenEquals(byte[] a, byte[] b) {
        return MessageDigest.isEqual(a, b);
    }
}
