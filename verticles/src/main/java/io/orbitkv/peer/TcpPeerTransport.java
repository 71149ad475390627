package io.orbitkv.peer;

import com.google.protobuf.ByteString;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.DefaultFileRegion;
import io.netty.channel.DefaultMaxMessagesRecvByteBufAllocator;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.protocol.peer.TransferHeader;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.ThreadingModel;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.ClientAuth;
import io.vertx.core.internal.ContextInternal;
import io.vertx.core.internal.VertxInternal;
import io.vertx.core.internal.net.NetSocketInternal;
import io.vertx.core.net.JdkSSLEngineOptions;
import io.vertx.core.net.NetClient;
import io.vertx.core.net.NetClientOptions;
import io.vertx.core.net.NetServer;
import io.vertx.core.net.NetServerOptions;
import io.vertx.core.net.NetSocket;
import io.vertx.core.net.OpenSSLEngineOptions;
import io.vertx.core.net.PemKeyCertOptions;
import io.vertx.core.net.PemTrustOptions;
import io.vertx.core.net.SSLEngineOptions;
import io.vertx.core.spi.transport.Transport;
import io.vertx.core.impl.VertxThread;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.security.cert.Certificate;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import java.util.zip.CRC32C;
import javax.net.ssl.SSLPeerUnverifiedException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The built-in transport: TCP transfer connections, mutual TLS with the cluster's certificates by default (OpenSSL
 * through netty-tcnative when it loads, else the JDK's engine), plaintext only by explicit configuration.
 *
 * <p>Wire protocol of a transfer connection: the requester sends a header (4-byte big-endian length, then a
 * {@link TransferHeader}: lease id and the lease's transfer token); the source checks it against the lease (token,
 * and with TLS the connection's certificate must name the lease's requester) and answers with the lease's pages' raw
 * bytes in grant order, or closes without sending a byte. The connection then stays open for the next header: the
 * requester keeps idle connections per source (at most {@value #MAX_IDLE_PER_ENDPOINT}, closed after
 * {@value #CLIENT_IDLE_SECONDS} s idle) so that a lease costs no connect or TLS handshake. Every transfer is proved by
 * its own lease token (and certificate), never by the connection having carried an earlier one.
 *
 * <p>Design note (zero copy, ownership). Source: the pinned pool slices go to the channel without a copy: with TLS
 * wrapped in netty buffers ({@link Unpooled#wrappedBuffer(ByteBuffer)}), encrypted straight from the pool; with
 * plaintext as {@link DefaultFileRegion}s of the shared-memory file (sendfile: the kernel moves file pages to the
 * socket), over one file channel opened by {@link #serve} and closed by {@link #close}. The source keeps its pins until
 * every write of the lease completed ({@link Source#finished}), so a release meanwhile is deferred by the owner, never
 * leaving netty reading a slot that was reused. Requester, plaintext: the connection's receive allocator hands the
 * socket reads buffers that wrap the destination slots themselves ({@link SlotAllocator}): recv(2) writes straight into
 * the pool slot, no intermediate buffer, no copy, no heap. Requester, TLS: the decrypted netty (pooled, direct) buffers
 * are copied once into the slots (direct → pool). Reads happen on the connection's event loop only (epoll or NIO: a
 * read is synchronous on that thread), which is also the receive's context; the straight-to-slot path is used only on
 * those transports.
 *
 * <p>Received checksums (design note). Each value {@link Receive#receivedChecksums} reports is the CRC32C of the bytes
 * the slot holds after the receive, read back from the slot, so the requester's seal compares it with the source's
 * without another pass over the pages, and a byte changed in flight still fails the seal (never served). Two ways,
 * by {@code peer.verify-threads}:
 * <ul>
 *   <li>0 (inline, the default): on the connection's context, right after each read landed bytes in a slot (recv
 *   into the slot, or the copy into it), the receive folds exactly that region, still in cache, into the page's
 *   running CRC32C. The loop thread then does recv + CRC, which caps a single transfer near 2/3 of a recv-only
 *   receiver; the transfer loops spread several transfers over cores.</li>
 *   <li>N &gt; 0 (off the loop, opt-in): the loop only receives. When a page's last byte has landed (the cursor
 *   moved past the page's end, on the context), the receive hands that whole page to the transport's verifiers
 *   ({@link #verifiers}: N named daemon threads, shared by every receive of this transport; each page is one task, so
 *   up to N pages, of one receive or several, are checksummed at once on N cores while the loop receives the next).
 *   The result comes back to the context ({@code runOnContext}), where the receive counts it; the receive completes
 *   only when every byte landed <em>and</em> every page's check reported back, so a seal never sees a page whose CRC
 *   was not computed. A read never writes into a page once it was handed over (the cursor is past it), so a verifier
 *   reads bytes nobody writes. The queue is unbounded but holds at most one task per destination of the receives in
 *   flight, which the requester's slots (and the source's credits) already bound.</li>
 * </ul>
 * Who owns a slot while a check runs: the receive, for as long as any check it handed over has not reported back
 * ({@code verifying} &gt; 0). A receive that ends badly (timeout, lost connection, fence) sets {@code abandoned}
 * (volatile): a check that has not started yet then skips the page without touching the slot; one that has started
 * finishes its pass. {@link Receive#fence} completes only when no check of the receive is outstanding (after the
 * connection is closed), so the requester's abort that follows the fence frees slots no verifier will read again. A
 * successful completion implies the same. {@link #close} stops the verifiers and waits for every queued check (each
 * skips or ends within one page's CRC), so the owner unmaps the pool only after no verifier can read it. Measured:
 * {@code orbitkv_peer_verify_seconds} and {@code orbitkv_peer_verified_bytes_total}, both labelled by the thread
 * that actually ran the CRC ({@code event_loop} or {@code verifier}), and {@code orbitkv_peer_verify_pending}.
 * Granularity: a whole page per check keeps the value a plain CRC32C (no combining) and the hand-over to one task per
 * page (2 MiB in the bench); the page is read back shortly after its last byte landed (mostly from the shared cache,
 * not the loop's). On a 2-core host the verifier competes with the loop and the source for the cores, so the gain is
 * for hosts with cores to spare (measured in perf/README and the branch notes).
 *
 * <p>Nothing else writes a destination while the receive is on it, and nothing after the fence.
 *
 * <p>Transfer loops (design note, concurrency). With {@code peer.transfer-loops} = N > 0 the transport owns N event
 * loops of its own (threads {@code orbitkv-transfer-*}, created here, shut down by {@link #close} after its servers
 * and connections closed). The requester gives each receive the next loop in turn (its connection, its reads, its
 * checksums and its fence run there); the source listens once per loop on the same port, and Vert.x hands accepted
 * connections to the loops in turn. So several transfers move on several cores, and a 64 MiB receive never holds the
 * roles' loop. What crosses between a loop and the owner (the peer role, on the context that called {@link #serve} or
 * {@link #receive}) always hops to the owner's context: the source's {@link Source#begin} and {@link Source#finished}
 * run on the owner's context, and a receive's completion and fence futures complete their listeners there, so the
 * peer role's state never sees a transfer thread. With N = 0 everything runs on the owner's context, as one loop.
 *
 * <p>Cancel and crash: a requester that gives up fences: on the receive's context the receive is marked fenced (the
 * allocator hands out scratch buffers from then on and nothing is copied into a slot) and the connection is closed,
 * never pooled again, before {@link Receive#fence} completes. A connection is pooled again only after a transfer that
 * received exactly its granted bytes. A pooled connection that turns out closed before any byte of a new transfer
 * arrived is replaced once by a fresh connection (the source may have closed it idle). A source that dies closes the
 * connection (or stops answering: the requester's timeout fences). The server closes a connection whose header is bad
 * without sending a byte, and closes idle connections after {@value #SERVER_IDLE_SECONDS} s.
 */
public final class TcpPeerTransport implements PeerTransport {
    private static final Logger LOG = LoggerFactory.getLogger(TcpPeerTransport.class);

    /** What the transfer server asks its owner (the peer source role), on the server's context. */
    public interface Source {
        /** The pages of a lease to send, or null to refuse (unknown lease, bad token, another member's lease). */
        List<PageSlice> begin(long leaseId, byte[] token, String peerMemberId);

        /** Every write of the lease completed (or failed): the pins may go. */
        void finished(long leaseId, boolean sent);
    }

    /** A page of the source's pool. */
    public record PageSlice(long offset, long length) {}

    static final int MAX_HEADER_BYTES = 256;
    static final int MAX_IDLE_PER_ENDPOINT = 4;
    static final int CLIENT_IDLE_SECONDS = 30;
    static final int SERVER_IDLE_SECONDS = 60;
    static final int SOCKET_BUFFER_BYTES = 4 << 20;
    private static final int SCRATCH_READ_BYTES = 64 << 10;

    private static final AtomicLong RECEIVED_BYTES = new AtomicLong();
    private static final AtomicLong RECEIVED_IN_PLACE_BYTES = new AtomicLong();

    private final Vertx vertx;
    private final PeerSettings settings;
    private final NetClient client;
    private final PemKeyCertOptions tls;
    private final PemTrustOptions trust;
    private final String tlsEngine;
    private final AtomicLong pagesSent = new AtomicLong();
    private final AtomicLong connectionsOpened = new AtomicLong();
    private final Map<String, ArrayDeque<Connection>> idle = new HashMap<>();
    /** The transport's own loops (null with {@code peer.transfer-loops} 0) and one context on each. */
    private final EventLoopGroup transferGroup;
    private final List<ContextInternal> transferContexts = new ArrayList<>();
    private final AtomicInteger nextLoop = new AtomicInteger();
    private final List<NetServer> servers = new CopyOnWriteArrayList<>();
    private FileChannel poolFile;
    /** The received pages' CRC32C off the loops ({@code peer.verify-threads}); null: inline on the loop. */
    private final ThreadPoolExecutor verifiers;
    /** Checks handed to {@link #verifiers} that have not ended yet (queued or running; tests, and a gauge). */
    private final AtomicInteger pendingChecks = new AtomicInteger();
    /** Fences waiting for their receive's outstanding checks (tests). */
    private final AtomicInteger fencesWaiting = new AtomicInteger();
    private final Meters onLoop;
    private final Meters offLoop;
    /** Test seam: runs on the verifier thread before each page's check (it may block). */
    private volatile Runnable beforeVerify = () -> {};

    /** A CRC pass's time and bytes, for the kind of thread that ran it. */
    private record Meters(Timer time, Counter bytes) {
        static Meters of(MeterRegistry registry, String thread) {
            return new Meters(Timer.builder("orbitkv.peer.verify").tag("thread", thread)
                    .description("Time computing received peer pages' CRC32C, by the thread that ran it (event_loop: "
                            + "inline as each read lands, peer.verify-threads=0; verifier: a whole page off the loop)")
                    .register(registry),
                    Counter.builder("orbitkv_peer_verified_bytes_total").tag("thread", thread)
                            .description("Received peer bytes whose CRC32C was computed, by the thread that ran it")
                            .register(registry));
        }

        void record(long nanos, long n) {
            time.record(nanos, TimeUnit.NANOSECONDS);
            bytes.increment(n);
        }
    }

    /** Payload bytes this JVM's receives placed into destinations (tests await a transfer in progress with it). */
    public static long receivedBytes() {
        return RECEIVED_BYTES.get();
    }

    /** Of {@link #receivedBytes}, those the socket wrote straight into their slots (plaintext: no copy at all). */
    public static long receivedInPlaceBytes() {
        return RECEIVED_IN_PLACE_BYTES.get();
    }

    /** With its meters in a registry of its own (tests of the transport alone). */
    public TcpPeerTransport(Vertx vertx, PeerSettings settings, Path ca, Path cert, Path key) {
        this(vertx, settings, new SimpleMeterRegistry(), ca, cert, key);
    }

    public TcpPeerTransport(Vertx vertx, PeerSettings settings, MeterRegistry registry, Path ca, Path cert, Path key) {
        this.vertx = vertx;
        this.settings = settings;
        this.onLoop = Meters.of(registry, "event_loop");
        this.offLoop = Meters.of(registry, "verifier");
        this.verifiers = settings.verifyThreads() == 0 ? null : newVerifiers(settings.verifyThreads());
        Gauge.builder("orbitkv_peer_verify_pending", pendingChecks, AtomicInteger::get)
                .description("Received peer pages handed to the verifiers whose check has not ended yet")
                .register(registry);
        this.tls = new PemKeyCertOptions().setCertPath(cert.toString()).setKeyPath(key.toString());
        this.trust = new PemTrustOptions().addCertPath(ca.toString());
        SSLEngineOptions engine = OpenSSLEngineOptions.isAvailable() ? new OpenSSLEngineOptions() : new JdkSSLEngineOptions();
        this.tlsEngine = settings.plaintext() ? "none" : engine instanceof OpenSSLEngineOptions ? "openssl" : "jdk";
        NetClientOptions options = new NetClientOptions().setConnectTimeout(5_000).setTcpNoDelay(true)
                .setReceiveBufferSize(SOCKET_BUFFER_BYTES).setSendBufferSize(SOCKET_BUFFER_BYTES)
                .setIdleTimeout(CLIENT_IDLE_SECONDS).setIdleTimeoutUnit(TimeUnit.SECONDS);
        if (!settings.plaintext()) {
            options.setSsl(true).setHostnameVerificationAlgorithm("HTTPS").setSslEngineOptions(engine)
                    .setKeyCertOptions(tls).setTrustOptions(trust);
        }
        this.client = vertx.createNetClient(options);
        int loops = settings.transferLoops();
        if (loops > 0) {
            VertxInternal internal = (VertxInternal) vertx;
            AtomicInteger threads = new AtomicInteger();
            this.transferGroup = internal.transport().eventLoopGroup(Transport.IO_EVENT_LOOP_GROUP, loops,
                    r -> new VertxThread(r, "orbitkv-transfer-" + threads.getAndIncrement(), false, 2, TimeUnit.SECONDS), 50);
            for (int i = 0; i < loops; i++) {
                transferContexts.add(internal.contextBuilder().withThreadingModel(ThreadingModel.EVENT_LOOP)
                        .withEventLoop(transferGroup.next()).build());
            }
        } else {
            this.transferGroup = null;
        }
    }

    /** The transport's own loops ({@code peer.transfer-loops}); 0: transfers run on their owner's context. */
    public int transferLoops() {
        return transferContexts.size();
    }

    /** The context of the next transfer: the transport's loops in turn, or {@code owner} without loops of its own. */
    private ContextInternal nextTransferContext(ContextInternal owner) {
        return transferContexts.isEmpty() ? owner
                : transferContexts.get(Math.floorMod(nextLoop.getAndIncrement(), transferContexts.size()));
    }

    private ContextInternal currentContext() {
        return ((VertxInternal) vertx).getOrCreateContext();
    }

    /** Runs {@code call} on {@code owner} (at once when already there); the future's listeners run on this context. */
    private <T> Future<T> onOwner(ContextInternal owner, Supplier<T> call) {
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

    private static ThreadPoolExecutor newVerifiers(int threads) {
        AtomicInteger n = new AtomicInteger();
        ThreadPoolExecutor pool = new ThreadPoolExecutor(threads, threads, 30, TimeUnit.SECONDS, new LinkedBlockingQueue<>(),
                task -> {
                    Thread t = new Thread(task, "orbitkv-peer-verify-" + n.incrementAndGet());
                    t.setDaemon(true);
                    return t;
                });
        pool.allowCoreThreadTimeOut(true); // an idle requester holds no verifier thread
        return pool;
    }

    /** Checks handed to the verifiers that have not ended (queued or running; 0 when none; tests). */
    public int verificationsPending() {
        return pendingChecks.get();
    }

    /** Fences that wait for their receive's outstanding checks before completing (tests). */
    public int fencesWaitingForVerification() {
        return fencesWaiting.get();
    }

    /** Test seam: {@code hook} runs on the verifier thread before each page's check (and may block it). */
    public void beforeVerify(Runnable hook) {
        this.beforeVerify = hook;
    }

    /** {@code openssl} (netty-tcnative), {@code jdk}, or {@code none} (plaintext). */
    public String tlsEngine() {
        return tlsEngine;
    }

    /** Transfer connections this transport opened as a requester (reused ones count once). */
    public long connectionsOpened() {
        return connectionsOpened.get();
    }

    // ---------------------------------------------------------------- source side

    /** Starts the transfer server (source side) on {@code host:port}, serving from the pool file at {@code poolPath}. */
    public Future<Integer> serve(String host, int port, Path poolPath, MemorySegment pool, Source source) {
        NetServerOptions options = new NetServerOptions().setHost(host).setPort(port).setTcpNoDelay(true)
                .setReceiveBufferSize(SOCKET_BUFFER_BYTES).setSendBufferSize(SOCKET_BUFFER_BYTES)
                .setIdleTimeout(SERVER_IDLE_SECONDS).setIdleTimeoutUnit(TimeUnit.SECONDS);
        if (!settings.plaintext()) {
            options.setSsl(true).setClientAuth(ClientAuth.REQUIRED).setKeyCertOptions(tls).setTrustOptions(trust)
                    .setSslEngineOptions(tlsEngine.equals("openssl") ? new OpenSSLEngineOptions() : new JdkSSLEngineOptions());
        }
        try {
            poolFile = settings.plaintext() ? FileChannel.open(poolPath, StandardOpenOption.READ) : null;
        } catch (IOException e) {
            return Future.failedFuture(e);
        }
        LOG.info("peer transfer port {}:{}: {}, {}", host, port, settings.plaintext()
                ? "plaintext (explicitly configured), sendfile from the pool file" : "mutual TLS, " + tlsEngine + " engine",
                transferContexts.isEmpty() ? "on the peer role's loop" : transferContexts.size() + " transfer loops");
        ContextInternal owner = currentContext();
        if (transferContexts.isEmpty()) {
            return listenOn(owner, owner, options, port, pool, source);
        }
        // One server per loop on the same port, which Vert.x binds once and shares, handing accepted connections to
        // the servers in turn. Vert.x shares a port > 0 by its number; an ephemeral one only as "port -1" (port 0
        // would bind a new random port per server).
        int shared = port == 0 ? -1 : port;
        Future<Integer> bound = listenOn(transferContexts.getFirst(), owner, options, shared, pool, source);
        for (ContextInternal loop : transferContexts.subList(1, transferContexts.size())) {
            bound = bound.compose(actual -> listenOn(loop, owner, options, shared, pool, source).map(again -> {
                if (!again.equals(actual)) {
                    throw new IllegalStateException("the transfer loops' servers got different ports: " + actual + ", " + again);
                }
                return actual;
            }));
        }
        return bound;
    }

    /** One server of the transfer port, listening from {@code loop}: its connections are served there. */
    private Future<Integer> listenOn(ContextInternal loop, ContextInternal owner, NetServerOptions options, int port,
                                     MemorySegment pool, Source source) {
        Promise<Integer> bound = owner.promise();
        loop.runOnContext(v -> {
            NetServer server = vertx.createNetServer(new NetServerOptions(options).setPort(port));
            servers.add(server);
            server.connectHandler(socket -> new Serving((NetSocketInternal) socket, pool, source, owner));
            server.listen().onComplete(ar -> {
                if (ar.succeeded()) {
                    bound.complete(ar.result().actualPort());
                } else {
                    bound.fail(ar.cause());
                }
            });
        });
        return bound.future();
    }

    /** One accepted transfer connection: header, pages, header, pages… on its loop; the source is asked on its owner's. */
    private final class Serving {
        final NetSocketInternal socket;
        final MemorySegment pool;
        final Source source;
        final ContextInternal owner;
        final String member;
        Buffer header = Buffer.buffer();
        boolean sending;
        boolean closed;
        Promise<Void> stalled;

        Serving(NetSocketInternal socket, MemorySegment pool, Source source, ContextInternal owner) {
            this.socket = socket;
            this.pool = pool;
            this.source = source;
            this.owner = owner;
            this.member = settings.plaintext() ? null : memberOf(socket);
            if (!settings.plaintext() && member == null) {
                close();
                return;
            }
            socket.closeHandler(v -> {
                closed = true;
                if (stalled != null) {
                    stalled.tryComplete(); // the pins go when the requester gives up
                }
            });
            socket.messageHandler(msg -> {
                ByteBuf b = (ByteBuf) msg;
                try {
                    if (closed) {
                        return;
                    }
                    if (header.length() + b.readableBytes() > 4 + MAX_HEADER_BYTES) {
                        close(); // headers are small, and the requester sends nothing while pages flow
                        return;
                    }
                    byte[] bytes = new byte[b.readableBytes()];
                    b.getBytes(b.readerIndex(), bytes);
                    header.appendBytes(bytes);
                } finally {
                    b.release();
                }
                if (!sending) {
                    next();
                }
            });
        }

        void close() {
            closed = true;
            socket.close();
        }

        /** Parses the next complete header, if any, and sends its lease's pages. */
        void next() {
            if (closed || header.length() < 4) {
                return;
            }
            int len = header.getInt(0);
            if (len <= 0 || len > MAX_HEADER_BYTES) {
                close();
                return;
            }
            if (header.length() < 4 + len) {
                return;
            }
            TransferHeader h;
            try {
                h = TransferHeader.parseFrom(header.getBytes(4, 4 + len));
            } catch (Exception e) {
                close();
                return;
            }
            header = header.getBuffer(4 + len, header.length());
            sending = true;
            byte[] token = h.getTransferToken().toByteArray();
            onOwner(owner, () -> source.begin(h.getLeaseId(), token, member)).onComplete(begun -> {
                List<PageSlice> pages = begun.succeeded() ? begun.result() : null;
                if (pages == null || closed) {
                    if (pages != null) {
                        finished(h.getLeaseId(), false); // the requester went while the owner granted: pins go
                    }
                    sending = false;
                    close();
                    return;
                }
                send(pages).onComplete(ar -> {
                    finished(h.getLeaseId(), ar.succeeded());
                    sending = false;
                    if (ar.failed()) {
                        close();
                    } else {
                        next();
                    }
                });
            });
        }

        private void finished(long leaseId, boolean sent) {
            if (currentContext() == owner) {
                source.finished(leaseId, sent);
            } else {
                owner.runOnContext(v -> source.finished(leaseId, sent));
            }
        }

        Future<Void> send(List<PageSlice> pages) {
            List<Future<Void>> writes = new ArrayList<>(pages.size());
            if (settings.testStallLeasePages() > 0 && pages.size() >= settings.testStallLeasePages()) {
                // Test hook: half the pages go, then the source stalls with the connection open (a hung peer).
                pages = pages.subList(0, pages.size() / 2);
                stalled = Promise.promise();
                writes.add(stalled.future());
            }
            for (PageSlice page : pages) {
                long n = pagesSent.incrementAndGet();
                if (settings.testFlipPage() > 0 && n == settings.testFlipPage()) {
                    // Test hook: this page's bytes are changed in flight (a copy; the pool is never written).
                    ByteBuf copy = Unpooled.directBuffer((int) page.length());
                    copy.writeBytes(pool.asSlice(page.offset(), page.length()).asByteBuffer());
                    copy.setByte(0, copy.getByte(0) ^ 0x5A);
                    writes.add(socket.writeMessage(copy));
                } else if (settings.plaintext()) {
                    // sendfile(2) from the shared-memory file, queued in order on the channel (Vert.x's sendFile
                    // opens the file on a worker and could reorder pages)
                    writes.add(socket.writeMessage(new PoolFileRegion(poolFile, page.offset(), page.length())));
                } else {
                    writes.add(socket.writeMessage(Unpooled.wrappedBuffer(
                            pool.asSlice(page.offset(), page.length()).asByteBuffer())));
                }
            }
            return Future.join(writes).mapEmpty();
        }
    }

    /** A region of the pool file on the transport's shared file channel: releasing it leaves the channel open. */
    private static final class PoolFileRegion extends DefaultFileRegion {
        PoolFileRegion(FileChannel file, long position, long count) {
            super(file, position, count);
        }

        @Override
        protected void deallocate() {
            // the channel belongs to the transport (closed in close()), not to this region
        }
    }

    /** The member id (certificate CN) of the TLS peer; null without a verified certificate. */
    static String memberOf(NetSocket socket) {
        try {
            List<Certificate> chain = socket.peerCertificates();
            if (chain == null || chain.isEmpty() || !(chain.getFirst() instanceof X509Certificate x509)) {
                return null;
            }
            return commonName(x509);
        } catch (SSLPeerUnverifiedException e) {
            return null;
        }
    }

    static String commonName(X509Certificate certificate) {
        for (String part : certificate.getSubjectX500Principal().getName().split(",")) {
            if (part.startsWith("CN=")) {
                return part.substring(3);
            }
        }
        return null;
    }

    // ---------------------------------------------------------------- requester side

    @Override
    public Receive receive(String endpoint, long leaseId, byte[] token, List<Destination> destinations, Duration timeout) {
        ContextInternal owner = currentContext();
        ContextInternal loop = nextTransferContext(owner);
        TcpReceive receive = new TcpReceive(loop, owner.promise(), endpoint, TransferHeader.newBuilder()
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

    private Connection takeIdle(String endpoint, Context context) {
        synchronized (idle) {
            ArrayDeque<Connection> pooled = idle.get(endpoint);
            while (pooled != null && !pooled.isEmpty()) {
                Connection c = pooled.pollLast();
                if (!c.closed && c.context == context) {
                    return c;
                }
                c.socket.close();
            }
            return null;
        }
    }

    private void offerIdle(Connection c) {
        synchronized (idle) {
            ArrayDeque<Connection> pooled = idle.computeIfAbsent(c.endpoint, k -> new ArrayDeque<>());
            if (!c.closed && pooled.size() < MAX_IDLE_PER_ENDPOINT) {
                pooled.addLast(c);
                return;
            }
        }
        c.socket.close();
    }

    private void forget(Connection c) {
        synchronized (idle) {
            ArrayDeque<Connection> pooled = idle.get(c.endpoint);
            if (pooled != null) {
                pooled.remove(c);
            }
        }
    }

    /** One requester-side transfer connection; carries one receive at a time, then may be pooled. */
    private final class Connection {
        final String endpoint;
        final Context context;
        final NetSocketInternal socket;
        final boolean direct;
        TcpReceive current;
        boolean closed;

        Connection(String endpoint, Context context, NetSocketInternal socket) {
            this.endpoint = endpoint;
            this.context = context;
            this.socket = socket;
            Channel channel = socket.channelHandlerContext().channel();
            // Straight into the slots: plaintext on a transport whose reads are synchronous on the event loop.
            this.direct = settings.plaintext() && (channel instanceof EpollSocketChannel || channel instanceof NioSocketChannel);
            if (direct) {
                channel.config().setRecvByteBufAllocator(new SlotAllocator(this));
            }
            socket.messageHandler(msg -> {
                ByteBuf b = (ByteBuf) msg;
                try {
                    TcpReceive r = current;
                    if (r != null) {
                        r.take(this, b);
                    } else {
                        close(); // bytes nobody asked for
                    }
                } finally {
                    b.release();
                }
            });
            socket.closeHandler(v -> lost("the source closed the transfer before every page arrived"));
            socket.exceptionHandler(e -> {
                lost("transfer failed: " + e.getMessage());
                close();
            });
        }

        void lost(String why) {
            closed = true;
            forget(this);
            TcpReceive r = current;
            if (r != null) {
                r.connectionLost(this, why);
            }
        }

        void close() {
            closed = true;
            forget(this);
            socket.close();
        }
    }

    /**
     * The receive allocator of a plaintext connection: while a receive is on it, each socket read gets a buffer that
     * wraps the next unfilled part of the current destination slot (so recv(2) lands the bytes in the slot); the
     * cursor moves by the bytes actually read ({@code lastBytesRead}, before the buffer is passed on). Without a
     * receive, or once fenced or full, reads get ordinary scratch buffers (whose bytes never reach a slot).
     */
    private static final class SlotAllocator extends DefaultMaxMessagesRecvByteBufAllocator {
        final Connection connection;

        SlotAllocator(Connection connection) {
            super(16);
            this.connection = connection;
        }

        @Override
        public Handle newHandle() {
            return new MaxMessageHandle() {
                @Override
                public ByteBuf allocate(ByteBufAllocator alloc) {
                    TcpReceive r = connection.current;
                    ByteBuf target = r == null ? null : r.nextTarget();
                    return target != null ? target : alloc.ioBuffer(SCRATCH_READ_BYTES);
                }

                @Override
                public int guess() {
                    return SCRATCH_READ_BYTES;
                }

                @Override
                public void lastBytesRead(int bytes) {
                    super.lastBytesRead(bytes);
                    TcpReceive r = connection.current;
                    if (r != null) {
                        r.landed(bytes);
                    }
                }
            };
        }
    }

    /**
     * One receive: every write into a slot happens on {@code context} (the connection's loop); so does the fence. Its
     * result promise belongs to the owner's context (the caller of {@link #receive}), whose listeners run there.
     */
    final class TcpReceive implements Receive {
        final Context context;
        final String endpoint;
        final TransferHeader header;
        final List<Destination> destinations;
        final long total;
        final Promise<Void> result;
        /** Slot buffers handed to a read that got bytes, not yet passed to {@link #take}. */
        final Set<ByteBuf> landedTargets = Collections.newSetFromMap(new IdentityHashMap<>());
        /** Inline: running CRC32C per destination over the bytes placed in its slot (each region once, as it landed). */
        final CRC32C[] crcs;
        /** Off the loop: each page's CRC32C, as its check reported back; null when inline. */
        final int[] values;
        Connection connection;
        /** The thread the first payload bytes landed on (observability for tests of the loops). */
        volatile String landedOn;
        ByteBuf pendingTarget;
        boolean fenced;
        boolean retried;
        /** Every granted byte is in its slot (the connection is free again); completes once the checks are in too. */
        boolean landedAll;
        /** Checks of this receive handed to the verifiers and not reported back; the slots are theirs meanwhile. */
        int verifying;
        /** The receive ended badly: a check that has not started skips its page (read on verifier threads). */
        volatile boolean abandoned;
        /** A fence waiting for {@link #verifying} to reach 0. */
        Promise<Void> drained;
        int page;
        long inPage;
        long received;

        TcpReceive(Context context, Promise<Void> result, String endpoint, TransferHeader header,
                   List<Destination> destinations) {
            this.context = context;
            this.result = result;
            this.endpoint = endpoint;
            this.header = header;
            this.destinations = destinations;
            this.total = destinations.stream().mapToLong(d -> d.slot().byteSize()).sum();
            if (verifiers == null) {
                this.values = null;
                this.crcs = new CRC32C[destinations.size()];
                for (int i = 0; i < crcs.length; i++) {
                    crcs[i] = new CRC32C();
                }
            } else {
                this.crcs = null;
                this.values = new int[destinations.size()];
            }
        }

        /**
         * Inline: folds the slot region {@code [from, from + n)} of the current page into its CRC32C, read back from
         * the slot itself right after the bytes landed there (still in cache), so the value is over what the slot holds.
         * Off the loop: nothing here (the page is checked whole once it landed, {@link #pageLanded}).
         */
        private void checksum(long from, long n) {
            if (crcs == null) {
                return;
            }
            long t0 = System.nanoTime();
            crcs[page].update(destinations.get(page).slot().asSlice(from, n).asByteBuffer());
            meters().record(System.nanoTime() - t0, n);
        }

        /** Off the loop: page {@code p} holds all its bytes and no read will write it again; a verifier checks it. */
        private void pageLanded(int p) {
            if (verifiers == null) {
                return;
            }
            MemorySegment slot = destinations.get(p).slot();
            verifying++;
            pendingChecks.incrementAndGet();
            try {
                verifiers.execute(() -> {
                    int value = 0;
                    boolean checked = false;
                    try {
                        beforeVerify.run();
                        if (!abandoned) {
                            long t0 = System.nanoTime();
                            CRC32C crc = new CRC32C();
                            crc.update(slot.asByteBuffer());
                            value = (int) crc.getValue();
                            checked = true;
                            meters().record(System.nanoTime() - t0, slot.byteSize());
                        }
                    } catch (RuntimeException e) {
                        LOG.warn("checking a received page failed: {}", e.toString());
                    } finally {
                        int v = value;
                        boolean ok = checked;
                        pendingChecks.decrementAndGet();
                        context.runOnContext(x -> verified(p, v, ok));
                    }
                });
            } catch (RejectedExecutionException e) {
                // the transport is closing: the page is not checked, the receive fails (nothing is sealed)
                pendingChecks.decrementAndGet();
                verifying--;
                fail(new PeerException(PeerException.Kind.TRANSFER_FAILED, "the transport is closed"));
            }
        }

        /** On the context: page {@code p}'s check reported back ({@code checked}: its value is {@code value}). */
        private void verified(int p, int value, boolean checked) {
            verifying--;
            if (checked) {
                values[p] = value;
            } else if (!abandoned) {
                fail(new PeerException(PeerException.Kind.TRANSFER_FAILED, "a received page could not be checked"));
            }
            if (verifying == 0) {
                if (landedAll) {
                    result.tryComplete(); // a no-op when it already failed (timeout, fence)
                }
                if (drained != null) {
                    drained.tryComplete();
                }
            }
        }

        /** Completes (on the context) when no check of this receive is outstanding. */
        private Future<Void> whenDrained() {
            if (verifying == 0) {
                return Future.succeededFuture();
            }
            if (drained == null) {
                drained = Promise.promise();
                fencesWaiting.incrementAndGet();
                drained.future().onComplete(ar -> fencesWaiting.decrementAndGet());
            }
            return drained.future();
        }

        @Override
        public List<Integer> receivedChecksums() {
            if (!result.future().succeeded()) {
                return null;
            }
            List<Integer> out = new ArrayList<>(destinations.size());
            for (int i = 0; i < destinations.size(); i++) {
                out.add(crcs != null ? (int) crcs[i].getValue() : values[i]);
            }
            return out;
        }

        /** Sends the header on a pooled connection of this context, or on a new one. */
        void start(boolean pooledAllowed) {
            Connection pooled = pooledAllowed ? takeIdle(endpoint, context) : null;
            if (pooled != null) {
                attach(pooled, true);
                return;
            }
            int colon = endpoint.lastIndexOf(':');
            client.connect(Integer.parseInt(endpoint.substring(colon + 1)), endpoint.substring(0, colon)).onComplete(ar -> {
                if (ar.failed()) {
                    fail(new PeerException(PeerException.Kind.TRANSFER_FAILED, "cannot connect to the source: "
                            + ar.cause().getMessage()));
                    return;
                }
                connectionsOpened.incrementAndGet();
                attach(new Connection(endpoint, context, (NetSocketInternal) ar.result()), false);
            });
        }

        private boolean retryable;

        void attach(Connection c, boolean reused) {
            if (fenced || result.future().isComplete()) {
                offerIdle(c); // unused: still clean
                return;
            }
            connection = c;
            retryable = reused && !retried;
            c.current = this;
            byte[] bytes = header.toByteArray();
            c.socket.write(Buffer.buffer(4 + bytes.length).appendInt(bytes.length).appendBytes(bytes));
            if (destinations.isEmpty()) {
                allLanded();
            }
        }

        /** The allocator's next read target: the unfilled rest of the current slot (plaintext), or null. */
        ByteBuf nextTarget() {
            if (fenced || landedAll || result.future().isComplete() || page >= destinations.size()) {
                return null;
            }
            MemorySegment slot = destinations.get(page).slot();
            pendingTarget = Unpooled.wrappedBuffer(slot.asSlice(inPage, slot.byteSize() - inPage).asByteBuffer()).clear();
            return pendingTarget;
        }

        /** A read into the last target got {@code bytes}: they are in the slot, the cursor moves past them. */
        void landed(int bytes) {
            ByteBuf target = pendingTarget;
            pendingTarget = null;
            if (target == null || bytes <= 0) {
                return;
            }
            landedTargets.add(target);
            checksum(inPage, bytes);
            advance(bytes);
        }

        private void advance(long n) {
            inPage += n;
            if (inPage == destinations.get(page).slot().byteSize()) {
                pageLanded(page);
                page++;
                inPage = 0;
            }
        }

        /** One received buffer: already in its slot (plaintext target), else copied in (direct → pool). */
        void take(Connection c, ByteBuf b) {
            if (c != connection || fenced || landedAll || result.future().isComplete()) {
                return;
            }
            retryable = false;
            if (landedOn == null) {
                landedOn = Thread.currentThread().getName();
            }
            int n = b.readableBytes();
            if (landedTargets.remove(b)) {
                received += n;
                RECEIVED_BYTES.addAndGet(n);
                RECEIVED_IN_PLACE_BYTES.addAndGet(n);
            } else {
                int index = b.readerIndex();
                int left = n;
                while (left > 0) {
                    if (page >= destinations.size()) {
                        fail(new PeerException(PeerException.Kind.TRANSFER_FAILED, "the source sent more bytes than granted"));
                        return;
                    }
                    MemorySegment slot = destinations.get(page).slot();
                    int chunk = (int) Math.min(left, slot.byteSize() - inPage);
                    b.getBytes(index, slot.asSlice(inPage, chunk).asByteBuffer());
                    checksum(inPage, chunk);
                    RECEIVED_BYTES.addAndGet(chunk);
                    received += chunk;
                    index += chunk;
                    left -= chunk;
                    advance(chunk);
                    if (fenced) {
                        return; // a page could not be handed to a verifier: nothing more goes into the slots
                    }
                }
            }
            if (received == total) {
                allLanded();
            }
        }

        /**
         * Every granted byte is in its slot: the connection is clean (exactly the granted bytes arrived) and goes back
         * to the pool at once; the receive completes when its outstanding checks reported back (at once inline).
         */
        private void allLanded() {
            if (landedAll || fenced || result.future().isComplete()) {
                return;
            }
            landedAll = true;
            Connection c = connection;
            c.current = null;
            offerIdle(c);
            if (verifying == 0) {
                result.tryComplete();
            }
        }

        void connectionLost(Connection c, String why) {
            if (c != connection || landedAll || result.future().isComplete()) {
                return;
            }
            c.current = null;
            if (retryable && !fenced) {
                // a pooled connection the source had closed before any byte of this transfer: once on a fresh one
                retried = true;
                retryable = false;
                connection = null;
                start(false);
                return;
            }
            fail(new PeerException(PeerException.Kind.TRANSFER_FAILED, why));
        }

        void fail(Throwable cause) {
            if (result.tryFail(cause)) {
                fenced = true;
                abandoned = true;
                if (connection != null && connection.current == this) {
                    connection.close(); // not once every byte landed: the connection then serves another receive
                }
            }
        }

        @Override
        public Future<Void> completion() {
            return result.future();
        }

        @Override
        public Future<Void> fence() {
            Promise<Void> fencedNow = currentContext().promise(); // answered on the caller's context
            context.runOnContext(v -> {
                fenced = true;
                abandoned = true;
                result.tryFail(new PeerException(PeerException.Kind.TIMEOUT, "fenced"));
                if (connection != null && connection.current == this) {
                    connection.close();
                }
                // nothing more lands; the slots are the verifiers' until their last check of this receive reported back
                whenDrained().onComplete(fencedNow);
            });
            return fencedNow.future();
        }
    }

    private Meters meters() {
        return Context.isOnEventLoopThread() ? onLoop : offLoop;
    }

    /** Stops the verifiers: queued checks still run (each skips an abandoned page or ends within one page's CRC). */
    private Future<Void> stopVerifiers() {
        if (verifiers == null) {
            return Future.succeededFuture();
        }
        verifiers.shutdown();
        return vertx.executeBlocking(() -> {
            if (!verifiers.awaitTermination(30, TimeUnit.SECONDS)) {
                LOG.warn("the peer verifiers did not stop within 30 s");
            }
            return null;
        });
    }

    @Override
    public Future<Void> close() {
        synchronized (idle) {
            idle.values().forEach(pooled -> pooled.forEach(c -> c.socket.close()));
            idle.clear();
        }
        Future<Void> s = Future.join(servers.stream().map(NetServer::close).toList()).mapEmpty();
        return s.compose(v -> client.close()).compose(v -> stopVerifiers()).andThen(v -> {
            try {
                if (poolFile != null) {
                    poolFile.close();
                }
            } catch (IOException e) {
                LOG.warn("closing the pool file of the transfer port failed: {}", e.getMessage());
            }
        }).eventually(() -> {
            if (transferGroup == null) {
                return Future.succeededFuture();
            }
            // the loops go last: every server and connection on them is closed by now
            Promise<Void> down = currentContext().promise();
            transferGroup.shutdownGracefully(0, 2, TimeUnit.SECONDS).addListener(f -> down.complete());
            return down.future();
        });
    }

    static boolean tokenEquals(byte[] a, byte[] b) {
        return MessageDigest.isEqual(a, b);
    }
}
