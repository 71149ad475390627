package io.orbitkv.peer;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.buffer.UnpooledDirectByteBuf;
import io.orbitkv.protocol.peer.TransferHeader;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.buffer.Buffer;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;
import java.util.concurrent.RejectedExecutionException;
import java.util.zip.CRC32C;

/**
 * One receive of a granted lease into its destination slots. Every write into a slot happens on {@code context} (the
 * connection's loop), and so does the fence; the result promise belongs to the owner's context (the caller of
 * {@link TcpPeerTransport#receive}), whose listeners run there.
 *
 * <p>Design note (ownership). The receive owns the slots until its result or its fence completes. Each value of
 * {@link #receivedChecksums} is the CRC32C of the bytes the slot holds, read back right after they landed (inline), or
 * by a verifier once the page's last byte landed (the cursor is past it: no read writes it again). While a check it
 * handed over is outstanding ({@code verifying} &gt; 0) a verifier may read the slot; a receive that ends badly sets
 * {@code abandoned}, so a check that has not started skips its page, and {@link #fence} completes only when none is
 * outstanding. The result completes only once every byte landed and every check reported back.
 *
 * <p>TLS decrypts into the slots: {@link #decryptTarget} lends the SslHandler one buffer at a time over the unfilled
 * rest of the current page; when it comes back through {@link #take} its bytes are already in place (it must start at
 * the cursor, else the receive fails). A target smaller than a record released without being taken (the next record
 * does not fit: it crosses the page's end) makes the next decrypt go to an ordinary buffer of one record, copied in;
 * an ordinary buffer taken while a target is lent would overlap it, so the receive fails rather than mix them (netty
 * passes each decrypted buffer on before it asks for the next, so neither happens in order).
 *
 * <p>Cancel: a fence (or a failure) marks the receive fenced (the allocator hands out scratch buffers, nothing more is
 * copied into a slot) and closes the connection, which is never pooled again. A pooled connection found closed before
 * any byte of this transfer arrived is replaced once by a fresh one.
 */
final class TcpReceive implements PeerTransport.Receive {
    private final TcpPeerTransport transport;
    private final ReceiveVerifiers verifiers;
    final Context context;
    final String endpoint;
    final TransferHeader header;
    final List<PeerTransport.Destination> destinations;
    final long total;
    final Promise<Void> result;
    /** Slot buffers handed to a read that got bytes, not yet passed to {@link #take}. */
    final Set<ByteBuf> landedTargets = Collections.newSetFromMap(new IdentityHashMap<>());
    /** Inline: running CRC32C per destination over the bytes placed in its slot (each region once, as it landed). */
    final CRC32C[] crcs;
    /** Off the loop: each page's CRC32C, as its check reported back; null when inline. */
    final int[] values;
    TransferConnection connection;
    /** The thread the first payload bytes landed on (observability for tests of the loops). */
    volatile String landedOn;
    ByteBuf pendingTarget;
    /** TLS: the decrypt target lent to the SslHandler, not yet taken or released; null when none. */
    DecryptTarget lent;
    /** TLS: the last target came back unused: the next decrypt goes to an ordinary buffer. */
    boolean spill;
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

    TcpReceive(TcpPeerTransport transport, Context context, Promise<Void> result, String endpoint,
               TransferHeader header, List<PeerTransport.Destination> destinations) {
        this.transport = transport;
        this.verifiers = transport.verifiers();
        this.context = context;
        this.result = result;
        this.endpoint = endpoint;
        this.header = header;
        this.destinations = destinations;
        this.total = destinations.stream().mapToLong(d -> d.slot().byteSize()).sum();
        if (verifiers.inline()) {
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
        if (crcs != null) {
            verifiers.fold(crcs[page], destinations.get(page).slot().asSlice(from, n));
        }
    }

    /** Off the loop: page {@code p} holds all its bytes and no read will write it again; a verifier checks it. */
    private void pageLanded(int p) {
        if (verifiers.inline()) {
            return;
        }
        verifying++;
        try {
            verifiers.check(destinations.get(p).slot(), () -> abandoned,
                    (value, checked) -> context.runOnContext(x -> verified(p, value, checked)));
        } catch (RejectedExecutionException e) {
            // the transport is closing: the page is not checked, the receive fails (nothing is sealed)
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
            verifiers.fencesWaiting.incrementAndGet();
            drained.future().onComplete(ar -> verifiers.fencesWaiting.decrementAndGet());
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
        TransferConnection pooled = pooledAllowed ? transport.idle().take(endpoint, context) : null;
        if (pooled != null) {
            attach(pooled, true);
            return;
        }
        transport.connect(endpoint).onComplete(ar -> {
            if (ar.failed()) {
                fail(new PeerException(PeerException.Kind.TRANSFER_FAILED, "cannot connect to the source: "
                        + ar.cause().getMessage()));
                return;
            }
            attach(new TransferConnection(endpoint, context, ar.result(), transport.plaintext(),
                    transport.plaintextInPlace(), transport.idle()), false);
        });
    }

    private boolean retryable;

    void attach(TransferConnection c, boolean reused) {
        if (fenced || result.future().isComplete()) {
            transport.idle().offer(c); // unused: still clean
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

    /**
     * TLS: a buffer over the unfilled rest of the current page, at most {@code capacity} bytes, for the SslHandler to
     * decrypt into; null (an ordinary buffer then) while one is lent, after one came back unused, or without a page.
     */
    ByteBuf decryptTarget(ByteBufAllocator alloc, int capacity) {
        if (spill) {
            spill = false;
            return null;
        }
        if (lent != null || capacity <= 0 || fenced || landedAll || result.future().isComplete()
                || page >= destinations.size()) {
            return null;
        }
        MemorySegment slot = destinations.get(page).slot();
        long room = slot.byteSize() - inPage;
        int n = (int) Math.min(capacity, room);
        lent = new DecryptTarget(alloc, this, slot.asSlice(inPage, n).asByteBuffer(), page, inPage,
                n == room && room < RECORD_ROOM);
        return lent;
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
    void take(TransferConnection c, ByteBuf b) {
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
            transport.countReceived(n, true);
        } else if (b == lent) {
            lent = null;
            DecryptTarget target = (DecryptTarget) b;
            target.taken = true;
            if (target.page != page || target.offset != inPage || b.readerIndex() != 0) {
                fail(new PeerException(PeerException.Kind.TRANSFER_FAILED, "decrypted records arrived out of order"));
                return;
            }
            checksum(inPage, n);
            transport.countReceived(n, true);
            received += n;
            advance(n);
        } else if (lent != null) {
            fail(new PeerException(PeerException.Kind.TRANSFER_FAILED, "decrypted records arrived out of order"));
            return;
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
                transport.countReceived(chunk, false);
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
        TransferConnection c = connection;
        c.current = null;
        transport.idle().offer(c);
        if (verifying == 0) {
            result.tryComplete();
        }
    }

    void connectionLost(TransferConnection c, String why) {
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

    /**
     * The room the engine wants for one record it decrypts (its ciphertext length, at most 16 KiB of plaintext plus
     * the cipher's expansion): a target limited by the page's end to less may be refused as too small.
     */
    static final int RECORD_ROOM = (16 << 10) + 2048 + 256;

    /** A slot region lent to the SslHandler to decrypt into; never freed by netty (the slot is the receive's). */
    static final class DecryptTarget extends UnpooledDirectByteBuf {
        final TcpReceive receive;
        final int page;
        final long offset;
        /** Cut short by the page's end to less than a record's room. */
        final boolean pageEnd;
        boolean taken;

        DecryptTarget(ByteBufAllocator alloc, TcpReceive receive, java.nio.ByteBuffer region, int page, long offset,
                      boolean pageEnd) {
            super(alloc, region, region.remaining());
            this.receive = receive;
            this.page = page;
            this.offset = offset;
            this.pageEnd = pageEnd;
            clear();
        }

        @Override
        protected void deallocate() {
            super.deallocate();
            if (receive.lent == this) {
                receive.lent = null;
            }
            if (!taken && pageEnd) {
                // back unused at the page's end: the next record may cross it (it goes through an ordinary buffer,
                // copied in); a target back unused elsewhere only met an incomplete record
                receive.spill = true;
            }
        }
    }

    @Override
    public Future<Void> completion() {
        return result.future();
    }

    @Override
    public Future<Void> fence() {
        Promise<Void> fencedNow = transport.currentContext().promise(); // answered on the caller's context
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
