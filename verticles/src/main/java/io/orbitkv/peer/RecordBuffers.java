package io.orbitkv.peer;

import io.netty.buffer.AbstractByteBufAllocator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.UnpooledDirectByteBuf;
import io.netty.channel.Channel;
import io.netty.util.internal.PlatformDependent;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.IntFunction;

/**
 * The record buffers of one TLS transfer connection: the channel's allocator once its handshake is done, so that
 * netty's {@code SslHandler} writes every encrypted record into memory the connection already has instead of asking
 * the shared allocator for a fresh (mapped, zeroed) chunk per record.
 *
 * <p>Design note (ownership, threads). A direct request of at most {@link #BUFFER_BYTES} gets one of this connection's
 * buffers: the last one given back, or a new one while none is free. The netty buffer owns it until its last release
 * (the socket wrote the record, or the reader consumed it), which puts the memory back on the free list; at most
 * {@link #MAX_FREE} stay there, and once the channel closed every buffer coming back, and those on the list, are
 * freed at once. Requests it does not serve (heap, larger) go to the allocator the channel had. Allocation happens on
 * the connection's loop, a release may come from any thread: the list is guarded by this object's monitor (uncontended,
 * one lock per record of about 16 KiB).
 *
 * <p>Decrypt targets (requester). While {@link #decrypting} (set by {@link TransferConnection} around each read it
 * passes to the {@code SslHandler}), a one-argument {@link #directBuffer(int)} request (the handler's buffer for the
 * records it decrypts) first asks the connection's {@link #targets} for a buffer over the receiving slot, so the
 * engine decrypts straight into it. The other requests netty makes meanwhile (read and cumulation buffers) come through
 * {@link #buffer(int)} and {@link #ioBuffer}, which never get a target.
 */
final class RecordBuffers extends AbstractByteBufAllocator {
    /** A TLS record's ciphertext (16 KiB of plaintext plus the cipher's overhead) fits with room to spare. */
    static final int BUFFER_BYTES = 20 << 10;
    /**
     * Free buffers kept: the records of the pieces a source has in flight ({@link TransferServer#TLS_PIECES_IN_FLIGHT}
     * × 16) and a few more, 1.6 MiB at most.
     */
    static final int MAX_FREE = 80;

    private final ByteBufAllocator fallback;
    private final AtomicLong created;
    private final AtomicLong reused;
    private final ArrayDeque<ByteBuffer> free = new ArrayDeque<>();
    private boolean closed;
    /** Requester: a buffer over the next unfilled part of the receiving slot (at most the capacity asked), or null. */
    IntFunction<ByteBuf> targets;
    /** The connection's loop is passing a read to the SslHandler (confined to that loop). */
    boolean decrypting;

    /**
     * Installs a new instance as {@code channel}'s allocator; frees its buffers when the channel closes.
     *
     * @param created counts the buffers it had to allocate, {@code reused} the requests served from the free list
     */
    static RecordBuffers install(Channel channel, AtomicLong created, AtomicLong reused) {
        RecordBuffers buffers = new RecordBuffers(channel.config().getAllocator(), created, reused);
        channel.config().setAllocator(buffers);
        channel.closeFuture().addListener(f -> buffers.close());
        return buffers;
    }

    private RecordBuffers(ByteBufAllocator fallback, AtomicLong created, AtomicLong reused) {
        super(true);
        this.fallback = fallback;
        this.created = created;
        this.reused = reused;
    }

    @Override
    public ByteBuf directBuffer(int initialCapacity) {
        if (decrypting && targets != null) {
            ByteBuf target = targets.apply(initialCapacity);
            // no target: a record buffer (the engine decrypts what fits, a record at least, and asks again), so
            // the records decrypted outside the slots stay few
            return target != null ? target : directBuffer(Math.min(initialCapacity, BUFFER_BYTES), Integer.MAX_VALUE);
        }
        return directBuffer(initialCapacity, Integer.MAX_VALUE);
    }

    @Override
    public ByteBuf buffer(int initialCapacity) {
        return directBuffer(initialCapacity, Integer.MAX_VALUE);
    }

    @Override
    public ByteBuf ioBuffer() {
        return directBuffer(256, Integer.MAX_VALUE);
    }

    @Override
    public ByteBuf ioBuffer(int initialCapacity) {
        return directBuffer(initialCapacity, Integer.MAX_VALUE);
    }

    @Override
    public ByteBuf directBuffer(int initialCapacity, int maxCapacity) {
        if (initialCapacity > BUFFER_BYTES || maxCapacity < BUFFER_BYTES) {
            return fallback.directBuffer(initialCapacity, maxCapacity);
        }
        ByteBuffer memory;
        synchronized (this) {
            memory = free.pollLast();
        }
        if (memory == null) {
            memory = ByteBuffer.allocateDirect(BUFFER_BYTES);
            created.incrementAndGet();
        } else {
            reused.incrementAndGet();
        }
        return new Lent(this, memory, maxCapacity);
    }

    @Override
    public ByteBuf heapBuffer(int initialCapacity, int maxCapacity) {
        return fallback.heapBuffer(initialCapacity, maxCapacity);
    }

    @Override
    protected ByteBuf newHeapBuffer(int initialCapacity, int maxCapacity) {
        return fallback.heapBuffer(initialCapacity, maxCapacity);
    }

    @Override
    protected ByteBuf newDirectBuffer(int initialCapacity, int maxCapacity) {
        return directBuffer(initialCapacity, maxCapacity);
    }

    @Override
    public boolean isDirectBufferPooled() {
        return true;
    }

    private void giveBack(ByteBuffer memory) {
        synchronized (this) {
            if (!closed && free.size() < MAX_FREE) {
                free.addLast(memory);
                return;
            }
        }
        PlatformDependent.freeDirectBuffer(memory);
    }

    private void close() {
        ArrayDeque<ByteBuffer> left;
        synchronized (this) {
            closed = true;
            left = new ArrayDeque<>(free);
            free.clear();
        }
        left.forEach(PlatformDependent::freeDirectBuffer);
    }

    /** A record's netty buffer over one of the connection's buffers; its last release gives the memory back. */
    private static final class Lent extends UnpooledDirectByteBuf {
        private final RecordBuffers home;
        private final ByteBuffer memory;
        /** Grown past the lent memory (netty then owns a buffer of its own; the lent one is given back at once). */
        private boolean moved;

        Lent(RecordBuffers home, ByteBuffer memory, int maxCapacity) {
            super(home, memory, maxCapacity); // not freed by netty: deallocate gives it back
            this.home = home;
            this.memory = memory;
            clear();
        }

        @Override
        public ByteBuf capacity(int newCapacity) {
            boolean wasLent = !moved;
            super.capacity(newCapacity);
            if (wasLent && newCapacity != BUFFER_BYTES) {
                moved = true;
                home.giveBack(memory); // the bytes were copied into netty's new buffer
            }
            return this;
        }

        @Override
        protected void deallocate() {
            super.deallocate();
            if (!moved) {
                home.giveBack(memory);
            }
        }
    }
}
