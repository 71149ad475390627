package io.orbitkv.nativeio.unix;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;

/**
 * Raw FFM downcalls into glibc's socket calls, one handle per function, shaped exactly like the C prototypes (LP64:
 * {@code size_t}/{@code ssize_t} are 64-bit longs, {@code socklen_t} a 32-bit int). No error mapping, no lifetimes:
 * that is {@link SeqPacketSocket}'s job. Every call that reports failure through {@code errno} takes a leading
 * capture-state segment, because errno must be read in the same downcall.
 */
@SuppressWarnings("restricted") // downcall handles are the point of this class; access is granted at launch
final class SeqPacketBindings {
    static final StructLayout CALL_STATE_LAYOUT = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CALL_STATE_LAYOUT.varHandle(MemoryLayout.PathElement.groupElement("errno"));

    /** {@code int socket(int domain, int type, int protocol)}. */
    static final MethodHandle SOCKET;
    /** {@code int bind(int fd, const struct sockaddr *addr, socklen_t len)}. */
    static final MethodHandle BIND;
    /** {@code int listen(int fd, int backlog)}. */
    static final MethodHandle LISTEN;
    /** {@code int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)}. */
    static final MethodHandle ACCEPT4;
    /** {@code int connect(int fd, const struct sockaddr *addr, socklen_t len)}. */
    static final MethodHandle CONNECT;
    /** {@code ssize_t send(int fd, const void *buf, size_t len, int flags)}. */
    static final MethodHandle SEND;
    /** {@code ssize_t recv(int fd, void *buf, size_t len, int flags)}. */
    static final MethodHandle RECV;
    /** {@code int getsockopt(int fd, int level, int name, void *value, socklen_t *len)}. */
    static final MethodHandle GETSOCKOPT;
    /** {@code int setsockopt(int fd, int level, int name, const void *value, socklen_t len)}. */
    static final MethodHandle SETSOCKOPT;
    /** {@code int shutdown(int fd, int how)}. */
    static final MethodHandle SHUTDOWN;
    /** {@code int close(int fd)}. */
    static final MethodHandle CLOSE;

    static {
        Linker linker = Linker.nativeLinker();
        SymbolLookup libc = linker.defaultLookup();
        Linker.Option errno = Linker.Option.captureCallState("errno");
        ValueLayout i = ValueLayout.JAVA_INT;
        ValueLayout l = ValueLayout.JAVA_LONG;
        ValueLayout a = ValueLayout.ADDRESS;
        SOCKET = linker.downcallHandle(find(libc, "socket"), FunctionDescriptor.of(i, i, i, i), errno);
        BIND = linker.downcallHandle(find(libc, "bind"), FunctionDescriptor.of(i, i, a, i), errno);
        LISTEN = linker.downcallHandle(find(libc, "listen"), FunctionDescriptor.of(i, i, i), errno);
        ACCEPT4 = linker.downcallHandle(find(libc, "accept4"), FunctionDescriptor.of(i, i, a, a, i), errno);
        CONNECT = linker.downcallHandle(find(libc, "connect"), FunctionDescriptor.of(i, i, a, i), errno);
        SEND = linker.downcallHandle(find(libc, "send"), FunctionDescriptor.of(l, i, a, l, i), errno);
        RECV = linker.downcallHandle(find(libc, "recv"), FunctionDescriptor.of(l, i, a, l, i), errno);
        GETSOCKOPT = linker.downcallHandle(find(libc, "getsockopt"), FunctionDescriptor.of(i, i, i, i, a, a), errno);
        SETSOCKOPT = linker.downcallHandle(find(libc, "setsockopt"), FunctionDescriptor.of(i, i, i, i, a, i), errno);
        SHUTDOWN = linker.downcallHandle(find(libc, "shutdown"), FunctionDescriptor.of(i, i, i), errno);
        CLOSE = linker.downcallHandle(find(libc, "close"), FunctionDescriptor.of(i, i), errno);
    }

    private SeqPacketBindings() {
    }

    private static MemorySegment find(SymbolLookup lookup, String name) {
        return lookup.find(name).orElseThrow(() -> new UnsatisfiedLinkError("libc symbol not found: " + name));
    }

    static int errno(MemorySegment callState) {
        return (int) ERRNO.get(callState, 0L);
    }
}
