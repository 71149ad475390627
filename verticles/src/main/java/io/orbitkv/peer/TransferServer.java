package io.orbitkv.peer;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.DefaultFileRegion;
import io.orbitkv.protocol.peer.TransferHeader;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.ClientAuth;
import io.vertx.core.internal.ContextInternal;
import io.vertx.core.internal.net.NetSocketInternal;
import io.vertx.core.net.JdkSSLEngineOptions;
import io.vertx.core.net.NetServer;
import io.vertx.core.net.NetServerOptions;
import io.vertx.core.net.NetSocket;
import io.vertx.core.net.OpenSSLEngineOptions;
import io.vertx.core.net.PemKeyCertOptions;
import io.vertx.core.net.PemTrustOptions;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.cert.Certificate;
import java.security.cert.X509Certificate;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import javax.net.ssl.SSLPeerUnverifiedException;
import io.orbitkv.common.RateLimitedLog;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The source side of the built-in transport: the transfer port, one server per transfer loop on the same port (or one
 * on the owner's loop). A connection reads a header (4-byte big-endian length, then a {@link TransferHeader}: lease
 * id and transfer token), asks its owner ({@link TcpPeerTransport.Source#begin}, on the owner's context) for the
 * lease's pages, and writes their bytes in grant order; then it waits for the next header. A bad header, an unknown
 * lease or (with TLS) a certificate that does not name the lease's requester closes the connection without a byte.
 *
 * <p>Design note (zero copy, ownership). The pinned pool slices go to the channel without a copy: with TLS wrapped in
 * netty buffers (encrypted straight from the pool); with plaintext as {@link DefaultFileRegion}s of the shared-memory
 * file (sendfile), over one file channel opened by {@link #serve} and closed by {@link #close}. The owner keeps the
 * lease's pins until {@link TcpPeerTransport.Source#finished} (every write completed or failed), so netty never reads a
 * slot that was reused. Connections idle for {@value #IDLE_SECONDS} s are closed.
 */
final class TransferServer {
    private static final Logger LOG = LoggerFactory.getLogger(TransferServer.class);
    static final int MAX_HEADER_BYTES = 256;
    static final int IDLE_SECONDS = 60;
    /** TLS: a page is queued in pieces of this size (16 records), each while the channel is writable. */
    static final int TLS_PIECE_BYTES = 256 << 10;
    /**
     * TLS: pieces queued and not yet written to the socket, at most (1 MiB): what is encrypted ahead of the socket,
     * so the connection's record buffers ({@link RecordBuffers}) are reused instead of a lease encrypted whole.
     */
    static final int TLS_PIECES_IN_FLIGHT = 4;

    private final TcpPeerTransport transport;
    private final Vertx vertx;
    private final PeerSettings settings;
    private final TransferLoops loops;
    private final PemKeyCertOptions tls;
    private final PemTrustOptions trust;
    private final String tlsEngine;
    private final AtomicLong pagesSent = new AtomicLong();
    /** Refused connections of this transport's ports, one line per kind per interval. */
    final RateLimitedLog refusals = new RateLimitedLog(LOG);
    private final List<NetServer> servers = new CopyOnWriteArrayList<>();
    private FileChannel poolFile;

    TransferServer(TcpPeerTransport transport, Vertx vertx, PeerSettings settings, TransferLoops loops,
                   PemKeyCertOptions tls, PemTrustOptions trust, String tlsEngine) {
        this.transport = transport;
        this.vertx = vertx;
        this.settings = settings;
        this.loops = loops;
        this.tls = tls;
        this.trust = trust;
        this.tlsEngine = tlsEngine;
    }

    /** Starts the transfer server (source side) on {@code host:port}, serving from the pool file at {@code poolPath}. */
    Future<Integer> serve(String host, int port, Path poolPath, MemorySegment pool, TcpPeerTransport.Source source) {
        NetServerOptions options = new NetServerOptions().setHost(host).setPort(port).setTcpNoDelay(true)
                .setSendBufferSize(TcpPeerTransport.SEND_BUFFER_BYTES) // no receive size: headers only
                .setIdleTimeout(IDLE_SECONDS).setIdleTimeoutUnit(TimeUnit.SECONDS);
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
                loops.size() == 0 ? "on the peer role's loop" : loops.size() + " transfer loops");
        ContextInternal owner = transport.currentContext();
        if (loops.size() == 0) {
            return listenOn(owner, owner, options, port, pool, source);
        }
        // One server per loop on the same port, which Vert.x binds once and shares, handing accepted connections to
        // the servers in turn. Vert.x shares a port > 0 by its number; an ephemeral one only as "port -1" (port 0
        // would bind a new random port per server).
        int shared = port == 0 ? -1 : port;
        Future<Integer> bound = listenOn(loops.contexts().getFirst(), owner, options, shared, pool, source);
        for (ContextInternal loop : loops.contexts().subList(1, loops.size())) {
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
                                     MemorySegment pool, TcpPeerTransport.Source source) {
        Promise<Integer> bound = owner.promise();
        loop.runOnContext(v -> {
            NetServer server = vertx.createNetServer(new NetServerOptions(options).setPort(port));
            servers.add(server);
            server.connectHandler(socket -> new Serving((NetSocketInternal) socket, pool, source, owner));
            server.exceptionHandler(this::refused); // the handshakes that never reach connectHandler
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
        final TcpPeerTransport.Source source;
        final ContextInternal owner;
        final String member;
        Buffer header = Buffer.buffer();
        boolean sending;
        boolean closed;
        Promise<Void> stalled;
        /** The pages' queueing, while it waits for the channel to drain (TLS); failed if the connection closes. */
        Promise<Void> draining;
        /** TLS: the page whose pieces are being queued (the rest of it unread), or null. */
        ByteBuf piecing;
        /** TLS: pieces queued whose write has not completed. */
        int piecesInFlight;
        /** TLS: the queueing to go on once a piece in flight was written, or null. */
        Runnable resume;
        boolean pumping;

        Serving(NetSocketInternal socket, MemorySegment pool, TcpPeerTransport.Source source, ContextInternal owner) {
            this.socket = socket;
            this.pool = pool;
            this.source = source;
            this.owner = owner;
            this.member = settings.plaintext() ? null : memberOf(socket);
            if (!settings.plaintext() && member == null) {
                refusals.warn("peer transfer connection refused", null, "its certificate names no member");
                close();
                return;
            }
            if (!settings.plaintext()) {
                transport.reuseRecordBuffers(socket);
            }
            socket.closeHandler(v -> {
                closed = true;
                if (stalled != null) {
                    stalled.tryComplete(); // the pins go when the requester gives up
                }
                if (draining != null) {
                    draining.tryFail("the transfer connection closed"); // no drain will come: the lease finishes
                }
                dropPiecing();
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
            transport.onOwner(owner, () -> source.begin(h.getLeaseId(), token, member)).onComplete(begun -> {
                List<TcpPeerTransport.PageSlice> pages = begun.succeeded() ? begun.result() : null;
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
            if (transport.currentContext() == owner) {
                source.finished(leaseId, sent);
            } else {
                owner.runOnContext(v -> source.finished(leaseId, sent));
            }
        }

        Future<Void> send(List<TcpPeerTransport.PageSlice> pages) {
            List<Future<Void>> writes = new ArrayList<>(pages.size() + 1);
            if (settings.testStallLeasePages() > 0 && pages.size() >= settings.testStallLeasePages()) {
                // Test hook: half the pages go, then the source stalls with the connection open (a hung peer).
                pages = pages.subList(0, pages.size() / 2);
                stalled = Promise.promise();
                writes.add(stalled.future());
            }
            Promise<Void> queued = Promise.promise();
            pump(pages.iterator(), writes, queued);
            // every queued write ends (done or failed) before the lease is finished: netty never reads a slot after
            return queued.future().transform(q -> Future.join(writes).transform(w -> q.succeeded() && w.succeeded()
                    ? Future.<Void>succeededFuture() : Future.<Void>failedFuture("the pages were not all sent")));
        }

        /**
         * Queues the pages in order. Plaintext regions cost nothing until the socket takes them (sendfile), so they go
         * at once. With TLS each page is encrypted into record buffers when it is flushed, so it goes in pieces of
         * {@value #TLS_PIECE_BYTES} bytes, at most {@value #TLS_PIECES_IN_FLIGHT} of them not yet written to the socket
         * (the next one queued as one completes): the encrypted bytes waiting here stay bounded while the kernel's send
         * buffer keeps the wire busy, and the connection's record buffers are reused. The channel's writability alone
         * does not bound it: its change reaches Vert.x only after this loop returns, so the loop would queue (and the
         * flush encrypt) a whole lease at once.
         */
        private void pump(java.util.Iterator<TcpPeerTransport.PageSlice> pages, List<Future<Void>> writes,
                          Promise<Void> queued) {
            draining = null;
            pumping = true;
            try {
                pumpPieces(pages, writes, queued);
            } finally {
                pumping = false;
            }
        }

        private void pumpPieces(java.util.Iterator<TcpPeerTransport.PageSlice> pages, List<Future<Void>> writes,
                                Promise<Void> queued) {
            while (piecing != null || pages.hasNext()) {
                if (closed) {
                    dropPiecing();
                    queued.tryFail("the transfer connection closed");
                    return;
                }
                if (settings.plaintext()) {
                    writes.add(socket.writeMessage(message(pages.next())));
                    continue;
                }
                if (socket.writeQueueFull()) {
                    draining = queued;
                    socket.drainHandler(v -> {
                        socket.drainHandler(null);
                        if (!queued.future().isComplete()) {
                            pump(pages, writes, queued);
                        }
                    });
                    return;
                }
                if (piecesInFlight >= TLS_PIECES_IN_FLIGHT) {
                    draining = queued;
                    resume = () -> {
                        if (!queued.future().isComplete()) {
                            pump(pages, writes, queued);
                        }
                    };
                    return;
                }
                if (piecing == null) {
                    piecing = (ByteBuf) message(pages.next());
                }
                ByteBuf piece = piecing.readRetainedSlice(Math.min(piecing.readableBytes(), TLS_PIECE_BYTES));
                if (!piecing.isReadable()) {
                    dropPiecing();
                }
                piecesInFlight++;
                Future<Void> written = socket.writeMessage(piece);
                writes.add(written);
                written.onComplete(ar -> pieceWritten());
            }
            queued.tryComplete();
        }

        /** TLS: a piece's write completed (or failed): the queueing goes on if it waited for room. */
        private void pieceWritten() {
            piecesInFlight--;
            Runnable next = resume;
            if (next != null && !pumping) {
                resume = null;
                next.run();
            }
        }

        /** Releases the TLS page being cut into pieces (its queued pieces hold their own references). */
        private void dropPiecing() {
            if (piecing != null) {
                piecing.release();
                piecing = null;
            }
        }

        private Object message(TcpPeerTransport.PageSlice page) {
            long n = pagesSent.incrementAndGet();
            if (settings.testFlipPage() > 0 && n == settings.testFlipPage()) {
                // Test hook: this page's bytes are changed in flight (a copy; the pool is never written).
                ByteBuf copy = Unpooled.directBuffer((int) page.length());
                copy.writeBytes(pool.asSlice(page.offset(), page.length()).asByteBuffer());
                copy.setByte(0, copy.getByte(0) ^ 0x5A);
                return copy;
            }
            if (settings.plaintext()) {
                // sendfile(2) from the shared-memory file, queued in order on the channel (Vert.x's sendFile
                // opens the file on a worker and could reorder pages)
                return new PoolFileRegion(poolFile, page.offset(), page.length());
            }
            return Unpooled.wrappedBuffer(pool.asSlice(page.offset(), page.length()).asByteBuffer());
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

    /**
     * A connection that failed before it was served: with TLS a refused handshake (no certificate, an untrusted one,
     * no common cipher). The member is unknown: nothing verified names it.
     */
    private void refused(Throwable cause) {
        refusals.warn(settings.plaintext() ? "peer transfer connection failed" : "peer transfer tls handshake refused",
                null, RateLimitedLog.describe(cause));
    }

    /** The member id (certificate CN) of the TLS peer; null without a verified certificate. */
    static String memberOf(NetSocket socket) {
        try {
            List<Certificate> chain = socket.peerCertificates();
            if (chain == null || chain.isEmpty() || !(chain.getFirst() instanceof X509Certificate x509)) {
                return null;
            }
            return TcpPeerTransport.commonName(x509);
        } catch (SSLPeerUnverifiedException e) {
            return null;
        }
    }

    /** Closes the servers (their connections with them), then the pool file channel. */
    Future<Void> close() {
        return Future.join(servers.stream().map(NetServer::close).toList()).<Void>mapEmpty().andThen(v -> {
            try {
                if (poolFile != null) {
                    poolFile.close();
                }
            } catch (IOException e) {
                LOG.warn("closing the pool file of the transfer port failed: {}", e.getMessage());
            }
        });
    }
}
