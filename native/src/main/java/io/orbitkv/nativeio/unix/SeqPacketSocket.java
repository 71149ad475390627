package io.orbitkv.nativeio.unix;

import io.orbitkv.nativeio.libc.NativeIoException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * One Unix-domain {@code SOCK_SEQPACKET} socket: a listening socket or one end of a connection. A connection carries
 * whole messages in order (a datagram's boundaries with a stream's reliability), so a frame never needs a length
 * prefix or reassembly, and a peer sees end-of-stream when the other end dies.
 *
 * <p>Design note: this object is the descriptor's only owner; {@link #close} releases it exactly once. Closing a
 * descriptor another thread is blocked on is a use-after-close (the number may be reused at once), so the thread that
 * blocks in {@link #accept} or {@link #receive} owns the close: other threads call {@link #shutdown}, which wakes it
 * (receive answers end-of-stream, accept fails), and it closes. A socket polled by an event loop instead
 * ({@link #descriptor}, {@link #receiveNow}) is closed by that loop, after it dropped the descriptor from its poller. {@link #send} is safe from several threads (the
 * kernel appends each message atomically). errno is captured in the same downcall into a per-thread state segment.
 * Capabilities are probed once ({@link #isAvailable}, with the cause kept).
 */
public final class SeqPacketSocket implements AutoCloseable {
    private static final int AF_UNIX = 1;
    private static final int SOCK_SEQPACKET = 5;
    private static final int SOCK_CLOEXEC = 0x80000;
    private static final int SOL_SOCKET = 1;
    private static final int SO_SNDBUF = 7;
    private static final int SO_PEERCRED = 17;
    private static final int MSG_DONTWAIT = 0x40;
    private static final int MSG_TRUNC = 0x20;
    private static final int MSG_NOSIGNAL = 0x4000;
    private static final int SHUT_RDWR = 2;
    private static final int EINTR = 4;
    private static final int EAGAIN = 11;
    /** {@code struct sockaddr_un}: a 2-byte family and 108 bytes of NUL-terminated path. */
    private static final int SOCKADDR_UN_BYTES = 110;
    public static final int MAX_PATH_BYTES = 107;
    /** {@code struct ucred}: pid, uid, gid. */
    private static final int UCRED_BYTES = 12;

    private static final boolean AVAILABLE;
    private static final Throwable UNAVAILABILITY_CAUSE;
    private static final ThreadLocal<MemorySegment> CALL_STATE =
            ThreadLocal.withInitial(() -> Arena.ofAuto().allocate(SeqPacketBindings.CALL_STATE_LAYOUT));

    static {
        Throwable cause = null;
        try {
            if (!System.getProperty("os.name", "").toLowerCase(Locale.ROOT).contains("linux")) {
                throw new UnsupportedOperationException("SOCK_SEQPACKET bindings assume Linux, running on "
                        + System.getProperty("os.name"));
            }
            Objects.requireNonNull(SeqPacketBindings.SOCKET); // forces linking of every handle
        } catch (Throwable t) {
            cause = t;
        }
        AVAILABLE = cause == null;
        UNAVAILABILITY_CAUSE = cause;
    }

    private final int fd;
    private final Path path;
    private final AtomicBoolean closed = new AtomicBoolean();

    private SeqPacketSocket(int fd, Path path) {
        this.fd = fd;
        this.path = path;
    }

    public static boolean isAvailable() {
        return AVAILABLE;
    }

    /** Why the bindings are unavailable, or null when they are available. */
    public static Throwable unavailabilityCause() {
        return UNAVAILABILITY_CAUSE;
    }

    /** Binds a new socket at {@code path} (which must not exist) and listens; the caller sets its mode. */
    public static SeqPacketSocket listen(Path path, int backlog) throws NativeIoException {
        SeqPacketSocket socket = open(path);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment address = address(arena, path);
            socket.check((int) invoke(SeqPacketBindings.BIND, socket.fd, address, SOCKADDR_UN_BYTES), "bind");
            socket.check((int) invoke(SeqPacketBindings.LISTEN, socket.fd, backlog), "listen");
            return socket;
        } catch (NativeIoException | RuntimeException e) {
            socket.closeQuietly();
            throw e;
        }
    }

    /** Connects to the listening socket at {@code path}. */
    public static SeqPacketSocket connect(Path path) throws NativeIoException {
        SeqPacketSocket socket = open(path);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment address = address(arena, path);
            int rc;
            do {
                rc = (int) invoke(SeqPacketBindings.CONNECT, socket.fd, address, SOCKADDR_UN_BYTES);
            } while (rc < 0 && lastErrno() == EINTR);
            socket.check(rc, "connect");
            return socket;
        } catch (NativeIoException | RuntimeException e) {
            socket.closeQuietly();
            throw e;
        }
    }

    private static SeqPacketSocket open(Path path) throws NativeIoException {
        ensureAvailable();
        int fd = (int) invoke(SeqPacketBindings.SOCKET, AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            throw new NativeIoException("socket(AF_UNIX, SOCK_SEQPACKET)", path, lastErrno());
        }
        return new SeqPacketSocket(fd, path);
    }

    /** Blocks until a peer connects; fails once {@link #shutdown} was called. The caller owns the new socket. */
    public SeqPacketSocket accept() throws NativeIoException {
        ensureOpen("accept4");
        int accepted;
        do {
            accepted = (int) invoke(SeqPacketBindings.ACCEPT4, fd, MemorySegment.NULL, MemorySegment.NULL, SOCK_CLOEXEC);
        } while (accepted < 0 && lastErrno() == EINTR);
        if (accepted < 0) {
            throw new NativeIoException("accept4", path, lastErrno());
        }
        return new SeqPacketSocket(accepted, path);
    }

    /** The connected peer's uid as the kernel recorded it at connect ({@code SO_PEERCRED}): it cannot be faked. */
    public int peerUid() throws NativeIoException {
        ensureOpen("getsockopt(SO_PEERCRED)");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment ucred = arena.allocate(UCRED_BYTES, 4);
            MemorySegment length = arena.allocate(ValueLayout.JAVA_INT);
            length.set(ValueLayout.JAVA_INT, 0, UCRED_BYTES);
            check((int) invoke(SeqPacketBindings.GETSOCKOPT, fd, SOL_SOCKET, SO_PEERCRED, ucred, length),
                    "getsockopt(SO_PEERCRED)");
            return ucred.get(ValueLayout.JAVA_INT, 4);
        }
    }

    /** The send buffer the kernel granted this socket ({@code SO_SNDBUF}); a message must fit a little below it. */
    public int sendBufferBytes() throws NativeIoException {
        ensureOpen("getsockopt(SO_SNDBUF)");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment value = arena.allocate(ValueLayout.JAVA_INT);
            MemorySegment length = arena.allocate(ValueLayout.JAVA_INT);
            length.set(ValueLayout.JAVA_INT, 0, 4);
            check((int) invoke(SeqPacketBindings.GETSOCKOPT, fd, SOL_SOCKET, SO_SNDBUF, value, length), "getsockopt(SO_SNDBUF)");
            return value.get(ValueLayout.JAVA_INT, 0);
        }
    }

    /**
     * Asks for a send buffer of {@code bytes} (the kernel doubles it, capped by {@code net.core.wmem_max}) and returns
     * the size granted.
     */
    public int sendBufferBytes(int bytes) throws NativeIoException {
        ensureOpen("setsockopt(SO_SNDBUF)");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment value = arena.allocate(ValueLayout.JAVA_INT);
            value.set(ValueLayout.JAVA_INT, 0, bytes);
            check((int) invoke(SeqPacketBindings.SETSOCKOPT, fd, SOL_SOCKET, SO_SNDBUF, value, 4), "setsockopt(SO_SNDBUF)");
        }
        return sendBufferBytes();
    }

    /**
     * Blocks for the next message and copies at most {@code into.byteSize()} bytes of it. Returns the message's full
     * length (larger than the buffer when it was cut: the rest is discarded, the next call reads the next message),
     * or 0 at end-of-stream (the peer closed, or {@link #shutdown} was called).
     */
    public long receive(MemorySegment into) throws NativeIoException {
        ensureOpen("recv");
        long n;
        do {
            n = recv(into, MSG_TRUNC);
        } while (n < 0 && lastErrno() == EINTR);
        if (n < 0) {
            throw new NativeIoException("recv", path, lastErrno());
        }
        return n;
    }

    /**
     * Like {@link #receive}, without blocking: the next message's full length, 0 at end-of-stream, or -1 when no
     * message waits (for a caller that polls the descriptor's readiness).
     */
    public long receiveNow(MemorySegment into) throws NativeIoException {
        ensureOpen("recv");
        long n;
        do {
            n = recv(into, MSG_TRUNC | MSG_DONTWAIT);
        } while (n < 0 && lastErrno() == EINTR);
        if (n < 0) {
            int errno = lastErrno();
            if (errno == EAGAIN) {
                return -1;
            }
            throw new NativeIoException("recv", path, errno);
        }
        return n;
    }

    /**
     * The descriptor's number, to register its readiness with a poller (an event loop). This object still owns it: the
     * poller must drop it before {@link #close}, or a number reused after the close would be polled for someone else.
     */
    public int descriptor() {
        return fd;
    }

    /**
     * Sends {@code length} bytes of {@code from} as one message. With {@code dontWait}, returns false instead of
     * blocking when the socket's send buffer is full; otherwise true. A message larger than the send buffer fails with
     * EMSGSIZE (90); a closed peer with EPIPE (32) (never SIGPIPE).
     */
    public boolean send(MemorySegment from, long length, boolean dontWait) throws NativeIoException {
        ensureOpen("send");
        int flags = MSG_NOSIGNAL | (dontWait ? MSG_DONTWAIT : 0);
        long n;
        do {
            n = send(from, length, flags);
        } while (n < 0 && lastErrno() == EINTR);
        if (n < 0) {
            int errno = lastErrno();
            if (dontWait && errno == EAGAIN) {
                return false;
            }
            throw new NativeIoException("send", path, errno, length + " bytes");
        }
        return true;
    }

    /**
     * Wakes a thread blocked in {@link #receive} or {@link #accept} on this socket. Safe from any thread as long as the
     * owner cannot close the socket meanwhile (the caller orders the two); idempotent.
     */
    public void shutdown() {
        if (!closed.get()) {
            invoke(SeqPacketBindings.SHUTDOWN, fd, SHUT_RDWR); // ENOTCONN on a peer already gone: nothing to wake
        }
    }

    public boolean isClosed() {
        return closed.get();
    }

    /** Releases the descriptor once; only the thread that blocks on it may call this (see the design note). */
    @Override
    public void close() throws NativeIoException {
        if (closed.compareAndSet(false, true)) {
            // Linux releases the descriptor even when close reports an error, so a failed close is never retried.
            check((int) invoke(SeqPacketBindings.CLOSE, fd), "close");
        }
    }

    private void closeQuietly() {
        try {
            close();
        } catch (NativeIoException ignored) {
            // The descriptor is released either way.
        }
    }

    @Override
    public String toString() {
        return "SeqPacketSocket[fd=" + fd + ", path=" + path + (closed.get() ? ", closed" : "") + "]";
    }

    private void ensureOpen(String operation) throws NativeIoException {
        if (closed.get()) {
            throw new NativeIoException(operation, path, NativeIoException.EBADF, "socket already closed");
        }
    }

    private void check(int rc, String operation) throws NativeIoException {
        if (rc < 0) {
            throw new NativeIoException(operation, path, lastErrno());
        }
    }

    private static void ensureAvailable() {
        if (!AVAILABLE) {
            throw new UnsupportedOperationException("SOCK_SEQPACKET bindings unavailable", UNAVAILABILITY_CAUSE);
        }
    }

    private static MemorySegment address(Arena arena, Path path) throws NativeIoException {
        byte[] bytes = path.toString().getBytes(StandardCharsets.UTF_8);
        if (bytes.length > MAX_PATH_BYTES) {
            throw new NativeIoException("sockaddr_un", path, NativeIoException.EINVAL, "a Unix socket path holds at most "
                    + MAX_PATH_BYTES + " bytes, this one " + bytes.length);
        }
        MemorySegment address = arena.allocate(SOCKADDR_UN_BYTES, 2);
        address.set(ValueLayout.JAVA_SHORT, 0, (short) AF_UNIX);
        MemorySegment.copy(bytes, 0, address, ValueLayout.JAVA_BYTE, 2, bytes.length);
        return address;
    }

    /** The hot paths call their handles exactly (no boxing): one downcall per message. */
    private long recv(MemorySegment into, int flags) {
        try {
            return (long) SeqPacketBindings.RECV.invokeExact(CALL_STATE.get(), fd, into, into.byteSize(), flags);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("recv downcall failed", t);
        }
    }

    private long send(MemorySegment from, long length, int flags) {
        try {
            return (long) SeqPacketBindings.SEND.invokeExact(CALL_STATE.get(), fd, from, length, flags);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("send downcall failed", t);
        }
    }

    private static int lastErrno() {
        return SeqPacketBindings.errno(CALL_STATE.get());
    }

    /** Invokes a handle with this thread's call state first; the errno of the call stays in it until the next one. */
    private static Object invoke(MethodHandle handle, Object... args) {
        Object[] withState = new Object[args.length + 1];
        withState[0] = CALL_STATE.get();
        System.arraycopy(args, 0, withState, 1, args.length);
        try {
            return handle.invokeWithArguments(withState);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("downcall failed", t);
        }
    }
}
