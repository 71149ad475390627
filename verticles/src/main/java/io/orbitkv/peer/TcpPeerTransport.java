package io.orbitkv.peer;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.DefaultFileRegion;
import io.orbitkv.protocol.peer.TransferHeader;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.ClientAuth;
import io.vertx.core.internal.net.NetSocketInternal;
import io.vertx.core.net.NetClient;
import io.vertx.core.net.NetClientOptions;
import io.vertx.core.net.NetServer;
import io.vertx.core.net.NetServerOptions;
import io.vertx.core.net.NetSocket;
import io.vertx.core.net.PemKeyCertOptions;
import io.vertx.core.net.PemTrustOptions;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.cert.Certificate;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import javax.net.ssl.SSLPeerUnverifiedException;

/**
 * The built-in transport: one TCP connection per lease, mutual TLS with the cluster's certificates by default.
 *
 * <p>Design note (zero copy, ownership): the source wraps the pinned pool slices in netty buffers
 * ({@link Unpooled#wrappedBuffer(ByteBuffer)}: no copy) and hands them to the channel; with TLS the engine encrypts
 * straight from the pool, with plaintext (explicit configuration only) the page is sent from the shared-memory file
 * as a netty {@link DefaultFileRegion} (sendfile: the kernel copies file → socket). The requester takes netty's raw (pooled, direct) buffers from
 * the channel ({@link NetSocketInternal#messageHandler}) and copies them once into its destination slots
 * (direct → pool); nothing passes through the Java heap. The source keeps its pins until every write of the lease has
 * completed (the {@link Source} is told {@code finished}), so a pin released meanwhile (release, expiry) is deferred,
 * never leaving netty reading a slot that was reused.
 *
 * <p>Cancel and crash: a requester that gives up fences: its receive stops writing before {@link Receive#fence}
 * completes (the flag is set on the connection's context, where every write into a slot happens) and the socket is
 * closed. A source that dies closes the connection (or stops answering: the requester's timeout fences). The server
 * closes a connection whose header is bad without sending a byte.
 */
public final class TcpPeerTransport implements PeerTransport {
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

    private final Vertx vertx;
    private final PeerSettings settings;
    private final NetClient client;
    private final AtomicLong pagesSent = new AtomicLong();
    private static final AtomicLong RECEIVED_BYTES = new AtomicLong();

    /** Payload bytes this JVM's receives copied into destinations (tests await a transfer in progress with it). */
    public static long receivedBytes() {
        return RECEIVED_BYTES.get();
    }
    private NetServer server;

    public TcpPeerTransport(Vertx vertx, PeerSettings settings, Path ca, Path cert, Path key) {
        this.vertx = vertx;
        this.settings = settings;
        NetClientOptions options = new NetClientOptions().setConnectTimeout(5_000).setTcpNoDelay(true)
                .setReceiveBufferSize(4 << 20).setSendBufferSize(4 << 20);
        if (!settings.plaintext()) {
            options.setSsl(true).setHostnameVerificationAlgorithm("HTTPS")
                    .setKeyCertOptions(new PemKeyCertOptions().setCertPath(cert.toString()).setKeyPath(key.toString()))
                    .setTrustOptions(new PemTrustOptions().addCertPath(ca.toString()));
        }
        this.client = vertx.createNetClient(options);
        this.tls = new PemKeyCertOptions().setCertPath(cert.toString()).setKeyPath(key.toString());
        this.trust = new PemTrustOptions().addCertPath(ca.toString());
    }

    private final PemKeyCertOptions tls;
    private final PemTrustOptions trust;

    /** Starts the transfer server (source side) on {@code host:port}, serving from the pool file at {@code poolPath}. */
    public Future<Integer> serve(String host, int port, Path poolPath, MemorySegment pool, Source source) {
        NetServerOptions options = new NetServerOptions().setHost(host).setPort(port).setTcpNoDelay(true)
                .setReceiveBufferSize(4 << 20).setSendBufferSize(4 << 20);
        if (!settings.plaintext()) {
            options.setSsl(true).setClientAuth(ClientAuth.REQUIRED).setKeyCertOptions(tls).setTrustOptions(trust);
        }
        server = vertx.createNetServer(options);
        server.connectHandler(socket -> onConnection((NetSocketInternal) socket, poolPath, pool, source));
        return server.listen().map(NetServer::actualPort);
    }

    private void onConnection(NetSocketInternal socket, Path poolPath, MemorySegment pool, Source source) {
        Buffer header = Buffer.buffer();
        boolean[] started = {false};
        socket.messageHandler(msg -> {
            ByteBuf b = (ByteBuf) msg;
            try {
                if (started[0]) {
                    return; // the requester sends nothing after its header
                }
                byte[] bytes = new byte[b.readableBytes()];
                b.getBytes(b.readerIndex(), bytes);
                header.appendBytes(bytes);
            } finally {
                b.release();
            }
            if (header.length() < 4) {
                return;
            }
            int len = header.getInt(0);
            if (len <= 0 || len > MAX_HEADER_BYTES) {
                socket.close();
                started[0] = true;
                return;
            }
            if (header.length() < 4 + len) {
                return;
            }
            started[0] = true;
            TransferHeader h;
            try {
                h = TransferHeader.parseFrom(header.getBytes(4, 4 + len));
            } catch (Exception e) {
                socket.close();
                return;
            }
            String member = settings.plaintext() ? null : memberOf(socket);
            List<PageSlice> pages = source.begin(h.getLeaseId(), h.getTransferToken().toByteArray(), member);
            if (pages == null) {
                socket.close();
                return;
            }
            send(socket, poolPath, pool, pages).onComplete(ar -> {
                source.finished(h.getLeaseId(), ar.succeeded());
                socket.close();
            });
        });
    }

    private Future<Void> send(NetSocketInternal socket, Path poolPath, MemorySegment pool, List<PageSlice> pages) {
        List<Future<Void>> writes = new ArrayList<>(pages.size());
        boolean stall = settings.testStallLeasePages() > 0 && pages.size() >= settings.testStallLeasePages();
        if (stall) {
            // Test hook: half the pages go, then the source stalls with the connection open (a hung peer).
            pages = pages.subList(0, pages.size() / 2);
            Promise<Void> stalled = Promise.promise();
            socket.closeHandler(v -> stalled.tryComplete()); // the pins go when the requester gives up
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
                // sendfile(2) from the shared-memory file, queued in order on the channel (Vert.x's sendFile opens
                // the file on a worker and could reorder pages)
                writes.add(socket.writeMessage(new DefaultFileRegion(poolPath.toFile(), page.offset(), page.length())));
            } else {
                writes.add(socket.writeMessage(Unpooled.wrappedBuffer(pool.asSlice(page.offset(), page.length()).asByteBuffer())));
            }
        }
        return Future.join(writes).mapEmpty();
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

    @Override
    public Receive receive(String endpoint, long leaseId, byte[] token, List<Destination> destinations, Duration timeout) {
        int colon = endpoint.lastIndexOf(':');
        TcpReceive receive = new TcpReceive(vertx.getOrCreateContext(), destinations);
        long timer = vertx.setTimer(Math.max(1, timeout.toMillis()), t -> receive.fail(new PeerException(
                PeerException.Kind.TIMEOUT, "the transfer did not complete within its budget")));
        receive.result.future().onComplete(ar -> vertx.cancelTimer(timer));
        client.connect(Integer.parseInt(endpoint.substring(colon + 1)), endpoint.substring(0, colon))
                .onComplete(ar -> {
                    if (ar.failed()) {
                        receive.fail(new PeerException(PeerException.Kind.TRANSFER_FAILED, "cannot connect to the source: "
                                + ar.cause().getMessage()));
                        return;
                    }
                    receive.attach((NetSocketInternal) ar.result(), TransferHeader.newBuilder().setLeaseId(leaseId)
                            .setTransferToken(com.google.protobuf.ByteString.copyFrom(token)).build());
                });
        return receive;
    }

    /** One receive: writes happen only on {@code context}; the fence flag is set there too. */
    private static final class TcpReceive implements Receive {
        final Context context;
        final List<Destination> destinations;
        final Promise<Void> result = Promise.promise();
        NetSocketInternal socket;
        boolean fenced;
        int page;
        long inPage;

        TcpReceive(Context context, List<Destination> destinations) {
            this.context = context;
            this.destinations = destinations;
        }

        void attach(NetSocketInternal s, TransferHeader header) {
            if (fenced || result.future().isComplete()) {
                s.close();
                return;
            }
            socket = s;
            s.messageHandler(msg -> {
                ByteBuf b = (ByteBuf) msg;
                try {
                    if (!fenced) {
                        take(b);
                    }
                } finally {
                    b.release();
                }
            });
            s.closeHandler(v -> fail(new PeerException(PeerException.Kind.TRANSFER_FAILED,
                    "the source closed the transfer before every page arrived")));
            s.exceptionHandler(e -> fail(new PeerException(PeerException.Kind.TRANSFER_FAILED,
                    "transfer failed: " + e.getMessage())));
            byte[] bytes = header.toByteArray();
            s.write(Buffer.buffer().appendInt(bytes.length).appendBytes(bytes));
            if (destinations.isEmpty()) {
                result.tryComplete();
            }
        }

        /** Copies one received buffer into the destination slots (direct → pool). */
        private void take(ByteBuf b) {
            int index = b.readerIndex();
            int left = b.readableBytes();
            while (left > 0) {
                if (page >= destinations.size()) {
                    fail(new PeerException(PeerException.Kind.TRANSFER_FAILED, "the source sent more bytes than granted"));
                    return;
                }
                MemorySegment slot = destinations.get(page).slot();
                int n = (int) Math.min(left, slot.byteSize() - inPage);
                ByteBuffer target = slot.asSlice(inPage, n).asByteBuffer();
                b.getBytes(index, target);
                RECEIVED_BYTES.addAndGet(n);
                index += n;
                left -= n;
                inPage += n;
                if (inPage == slot.byteSize()) {
                    page++;
                    inPage = 0;
                }
            }
            if (page == destinations.size()) {
                result.tryComplete();
            }
        }

        void fail(Throwable cause) {
            if (result.tryFail(cause)) {
                fenced = true;
                if (socket != null) {
                    socket.close();
                }
            }
        }

        @Override
        public Future<Void> completion() {
            return result.future();
        }

        @Override
        public Future<Void> fence() {
            Promise<Void> fencedNow = Promise.promise();
            context.runOnContext(v -> {
                fenced = true;
                result.tryFail(new PeerException(PeerException.Kind.TIMEOUT, "fenced"));
                if (socket != null) {
                    socket.close();
                }
                fencedNow.complete();
            });
            return fencedNow.future();
        }
    }

    @Override
    public Future<Void> close() {
        Future<Void> s = server == null ? Future.succeededFuture() : server.close();
        return s.compose(v -> client.close());
    }

    static boolean tokenEquals(byte[] a, byte[] b) {
        return MessageDigest.isEqual(a, b);
    }

    static long seconds(Duration d) {
        return TimeUnit.MILLISECONDS.toSeconds(d.toMillis());
    }
}
