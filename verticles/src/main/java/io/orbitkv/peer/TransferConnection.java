package io.orbitkv.peer;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.DefaultMaxMessagesRecvByteBufAllocator;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.handler.ssl.SslHandler;
import io.vertx.core.Context;
import io.vertx.core.internal.net.NetSocketInternal;

/**
 * One requester-side transfer connection, on one loop; carries one receive at a time ({@link #current}), then may go
 * back to the {@link IdleConnections}. Plaintext on a transport whose reads are synchronous on the loop (epoll, NIO)
 * receives straight into the slots ({@link SlotAllocator}) unless told to copy ({@code inPlace} false: read buffers
 * copied into the slots, {@link TcpPeerTransport#plaintextInPlace}); TLS decrypts straight into them
 * ({@link Decrypting}, the connection's {@link RecordBuffers} lending {@link TcpReceive#decryptTarget}s).
 */
final class TransferConnection {
    private static final int SCRATCH_READ_BYTES = 64 << 10;

    final String endpoint;
    final Context context;
    final NetSocketInternal socket;
    final boolean direct;
    private final IdleConnections idle;
    TcpReceive current;
    boolean closed;

    TransferConnection(String endpoint, Context context, NetSocketInternal socket, boolean plaintext, boolean inPlace,
                       IdleConnections idle) {
        this.endpoint = endpoint;
        this.context = context;
        this.socket = socket;
        this.idle = idle;
        Channel channel = socket.channelHandlerContext().channel();
        this.direct = plaintext && inPlace
                && (channel instanceof EpollSocketChannel || channel instanceof NioSocketChannel);
        if (direct) {
            channel.config().setRecvByteBufAllocator(new SlotAllocator(this));
        }
        ChannelHandlerContext ssl = channel.pipeline().context(SslHandler.class);
        if (!plaintext && ssl != null && channel.config().getAllocator() instanceof RecordBuffers buffers) {
            buffers.targets = capacity -> {
                TcpReceive r = current;
                return r == null ? null : r.decryptTarget(buffers, capacity);
            };
            channel.pipeline().addBefore(ssl.name(), "orbitkv-decrypting", new Decrypting(buffers));
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
        idle.forget(this);
        TcpReceive r = current;
        if (r != null) {
            r.connectionLost(this, why);
        }
    }

    void close() {
        closed = true;
        idle.forget(this);
        socket.close();
    }

    /** In front of the SslHandler: marks the reads it decrypts, whose output buffers may be slot targets. */
    private static final class Decrypting extends ChannelInboundHandlerAdapter {
        final RecordBuffers buffers;

        Decrypting(RecordBuffers buffers) {
            this.buffers = buffers;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            buffers.decrypting = true;
            try {
                ctx.fireChannelRead(msg);
            } finally {
                buffers.decrypting = false;
            }
        }
    }

    /**
     * The receive allocator of a plaintext connection: while a receive is on it, each socket read gets a buffer that
     * wraps the next unfilled part of the current destination slot (so recv(2) lands the bytes in the slot); the
     * cursor moves by the bytes actually read ({@code lastBytesRead}, before the buffer is passed on). Without a
     * receive, or once fenced or full, reads get ordinary scratch buffers (whose bytes never reach a slot).
     */
    private static final class SlotAllocator extends DefaultMaxMessagesRecvByteBufAllocator {
        final TransferConnection connection;

        SlotAllocator(TransferConnection connection) {
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
}
