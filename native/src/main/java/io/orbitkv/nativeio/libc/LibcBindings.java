package io.orbitkv.nativeio.libc;

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
 * Raw FFM downcalls into glibc, one handle per function, shaped exactly like the C prototypes (x86-64/aarch64 LP64:
 * {@code off_t} is a 64-bit long). No error mapping, no lifetimes: that is {@link Libc}'s job.
 *
 * <p>Every call that reports failure through {@code errno} takes a leading capture-state segment
 * ({@link #allocateCallState}) because errno must be read in the same downcall: any JVM work between the call and a
 * later {@code __errno_location()} read may overwrite it.
 */
@SuppressWarnings("restricted") // downcall handles are the point of this class; access is granted at launch
final class LibcBindings {

    static final StructLayout CALL_STATE_LAYOUT = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CALL_STATE_LAYOUT.varHandle(MemoryLayout.PathElement.groupElement("errno"));

    /** {@code int open(const char *path, int flags, ...)}: variadic after the flags, the mode is passed there. */
    static final MethodHandle OPEN;
    /** {@code int close(int fd)}. */
    static final MethodHandle CLOSE;
    /** {@code int fallocate(int fd, int mode, off_t offset, off_t len)}. */
    static final MethodHandle FALLOCATE;
    /** {@code int ftruncate(int fd, off_t length)}. */
    static final MethodHandle FTRUNCATE;
    /** {@code int fdatasync(int fd)}. */
    static final MethodHandle FDATASYNC;
    /** {@code off_t lseek(int fd, off_t offset, int whence)}. */
    static final MethodHandle LSEEK;
    /** {@code char *strerror(int errnum)}. */
    static final MethodHandle STRERROR;
    /** {@code int madvise(void *addr, size_t length, int advice)}. */
    static final MethodHandle MADVISE;
    /** {@code uid_t geteuid(void)}: always succeeds. */
    static final MethodHandle GETEUID;

    static {
        Linker linker = Linker.nativeLinker();
        SymbolLookup libc = linker.defaultLookup();
        Linker.Option errno = Linker.Option.captureCallState("errno");
        OPEN = linker.downcallHandle(find(libc, "open"),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT,
                        ValueLayout.JAVA_INT),
                errno, Linker.Option.firstVariadicArg(2));
        CLOSE = linker.downcallHandle(find(libc, "close"),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT), errno);
        FALLOCATE = linker.downcallHandle(find(libc, "fallocate"),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT,
                        ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG), errno);
        FTRUNCATE = linker.downcallHandle(find(libc, "ftruncate"),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG), errno);
        FDATASYNC = linker.downcallHandle(find(libc, "fdatasync"),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT), errno);
        LSEEK = linker.downcallHandle(find(libc, "lseek"),
                FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG,
                        ValueLayout.JAVA_INT), errno);
        STRERROR = linker.downcallHandle(find(libc, "strerror"),
                FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.JAVA_INT));
        MADVISE = linker.downcallHandle(find(libc, "madvise"),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG,
                        ValueLayout.JAVA_INT), errno);
        GETEUID = linker.downcallHandle(find(libc, "geteuid"), FunctionDescriptor.of(ValueLayout.JAVA_INT));
    }

    private LibcBindings() {
    }

    private static MemorySegment find(SymbolLookup lookup, String name) {
        return lookup.find(name).orElseThrow(() -> new UnsatisfiedLinkError("libc symbol not found: " + name));
    }

    static int errno(MemorySegment callState) {
        return (int) ERRNO.get(callState, 0L);
    }
}
