package io.orbitkv.nativeio.libc;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.Objects;

/**
 * Typed façade over the libc calls the SSD tier needs: open with O_DIRECT, close, fallocate, ftruncate, fdatasync and
 * the file size; madvise for the shared-memory pool mapping; and the process's effective uid (for owner-only checks).
 *
 * <p>Design note: availability is probed once, when this class initializes, into {@code static final} fields that
 * keep the cause; every entry point checks it and throws {@link UnsupportedOperationException} carrying that cause.
 * Each call owns a confined {@link Arena} for exactly the duration of the downcall (the C path string and the errno
 * capture segment), so no native memory outlives a call. File descriptors are owned by {@link NativeFileDescriptor}
 * and released by its idempotent {@code close()}. Failures become {@link NativeIoException} with errno, operation and
 * path. These calls block the calling thread for the duration of the syscall: call them from the SSD role's own
 * threads, never from a Vert.x event loop.
 */
public final class Libc {

    public static final int O_RDONLY = 0;
    public static final int O_WRONLY = 1;
    public static final int O_RDWR = 2;
    public static final int O_CREAT = 0x40;
    public static final int O_TRUNC = 0x200;
    /** Bypass the page cache; offsets, lengths and buffer addresses must be aligned (4096 is always safe). */
    public static final int O_DIRECT = 0x4000;
    public static final int O_CLOEXEC = 0x80000;
    /** Owner read/write only: KV payload is tenant data. */
    public static final int MODE_0600 = 0600;
    /** {@code fallocate} mode that reserves blocks without changing the file size. */
    public static final int FALLOC_FL_KEEP_SIZE = 1;

    /** {@code madvise} advice: back this range with transparent huge pages where the file system allows it. */
    public static final int MADV_HUGEPAGE = 14;
    /** {@code madvise} advice (Linux 5.14+): write-fault every page of the range now, as a write would. */
    public static final int MADV_POPULATE_WRITE = 23;

    private static final int SEEK_END = 2;
    private static final boolean AVAILABLE;
    private static final Throwable UNAVAILABILITY_CAUSE;

    static {
        Throwable cause = null;
        try {
            if (!System.getProperty("os.name", "").toLowerCase(java.util.Locale.ROOT).contains("linux")) {
                throw new UnsupportedOperationException("libc bindings assume Linux, running on "
                        + System.getProperty("os.name"));
            }
            Objects.requireNonNull(LibcBindings.OPEN); // forces linking of every handle
        } catch (Throwable t) {
            cause = t;
        }
        AVAILABLE = cause == null;
        UNAVAILABILITY_CAUSE = cause;
    }

    private Libc() {
    }

    public static boolean isAvailable() {
        return AVAILABLE;
    }

    /** Why the bindings are unavailable, or null when they are available. */
    public static Throwable unavailabilityCause() {
        return UNAVAILABILITY_CAUSE;
    }

    /** Throws {@link UnsupportedOperationException} (with the probe's cause) when the bindings are unavailable. */
    public static void ensureAvailable() {
        if (!AVAILABLE) {
            throw new UnsupportedOperationException("libc bindings unavailable", UNAVAILABILITY_CAUSE);
        }
    }

    /**
     * Opens {@code path} with {@code flags} (O_CLOEXEC is always added) and {@code mode} (used with O_CREAT).
     * The caller owns the returned descriptor and must close it.
     */
    public static NativeFileDescriptor open(Path path, int flags, int mode) throws NativeIoException {
        ensureAvailable();
        Objects.requireNonNull(path, "path");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment callState = arena.allocate(LibcBindings.CALL_STATE_LAYOUT);
            MemorySegment cPath = arena.allocateFrom(path.toString());
            int fd = (int) LibcBindings.OPEN.invokeExact(callState, cPath, flags | O_CLOEXEC, mode);
            if (fd < 0) {
                throw new NativeIoException("open", path, LibcBindings.errno(callState),
                        "flags 0x" + Integer.toHexString(flags));
            }
            return new NativeFileDescriptor(fd, path, (flags & O_DIRECT) != 0);
        } catch (NativeIoException | RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("open downcall failed", t);
        }
    }

    static void close(int fd, Path path) throws NativeIoException {
        // Linux releases the descriptor even when close reports an error, so a failed close is never retried.
        checkZero(invokeIntFd(LibcBindings.CLOSE, fd), "close", path);
    }

    static void fallocate(int fd, Path path, int mode, long offset, long length) throws NativeIoException {
        ensureAvailable();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment callState = arena.allocate(LibcBindings.CALL_STATE_LAYOUT);
            int rc = (int) LibcBindings.FALLOCATE.invokeExact(callState, fd, mode, offset, length);
            if (rc != 0) {
                throw new NativeIoException("fallocate", path, LibcBindings.errno(callState),
                        "offset " + offset + " length " + length);
            }
        } catch (NativeIoException | RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("fallocate downcall failed", t);
        }
    }

    static void ftruncate(int fd, Path path, long length) throws NativeIoException {
        ensureAvailable();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment callState = arena.allocate(LibcBindings.CALL_STATE_LAYOUT);
            int rc = (int) LibcBindings.FTRUNCATE.invokeExact(callState, fd, length);
            if (rc != 0) {
                throw new NativeIoException("ftruncate", path, LibcBindings.errno(callState), "length " + length);
            }
        } catch (NativeIoException | RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("ftruncate downcall failed", t);
        }
    }

    static void fdatasync(int fd, Path path) throws NativeIoException {
        checkZero(invokeIntFd(LibcBindings.FDATASYNC, fd), "fdatasync", path);
    }

    /** Size in bytes via {@code lseek(fd, 0, SEEK_END)}; moves the file position, which pread/io_uring ignore. */
    static long size(int fd, Path path) throws NativeIoException {
        ensureAvailable();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment callState = arena.allocate(LibcBindings.CALL_STATE_LAYOUT);
            long size = (long) LibcBindings.LSEEK.invokeExact(callState, fd, 0L, SEEK_END);
            if (size < 0) {
                throw new NativeIoException("lseek", path, LibcBindings.errno(callState), "SEEK_END");
            }
            return size;
        } catch (NativeIoException | RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("lseek downcall failed", t);
        }
    }

    /**
     * {@code madvise(segment.address(), segment.byteSize(), advice)}; the segment must start page-aligned (a mapping
     * does). {@code path} only names the mapped file in the error. Blocks for as long as the advice takes
     * ({@link #MADV_POPULATE_WRITE} faults in every page): not on an event loop.
     */
    public static void madvise(MemorySegment segment, int advice, Path path) throws NativeIoException {
        ensureAvailable();
        Objects.requireNonNull(segment, "segment");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment callState = arena.allocate(LibcBindings.CALL_STATE_LAYOUT);
            int rc = (int) LibcBindings.MADVISE.invokeExact(callState, segment, segment.byteSize(), advice);
            if (rc != 0) {
                throw new NativeIoException("madvise", path, LibcBindings.errno(callState),
                        "advice " + advice + " length " + segment.byteSize());
            }
        } catch (NativeIoException | RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("madvise downcall failed", t);
        }
    }

    /** The effective uid of this process ({@code geteuid}, which cannot fail): who owns the files it creates. */
    public static int effectiveUid() {
        ensureAvailable();
        try {
            return (int) LibcBindings.GETEUID.invokeExact();
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("downcall failed", t);
        }
    }

    /** The C library's text for {@code errno}, or {@code "errno N"} when libc is unavailable. */
    @SuppressWarnings("restricted") // strerror returns a NUL-terminated static string of unknown length
    public static String describeErrno(int errno) {
        if (!AVAILABLE) {
            return "errno " + errno;
        }
        try {
            MemorySegment text = (MemorySegment) LibcBindings.STRERROR.invokeExact(errno);
            return text.equals(MemorySegment.NULL) ? "errno " + errno : text.reinterpret(1024).getString(0);
        } catch (Throwable t) {
            return "errno " + errno;
        }
    }

    /** Returns 0 on success or the errno on failure. */
    private static int invokeIntFd(java.lang.invoke.MethodHandle handle, int fd) {
        ensureAvailable();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment callState = arena.allocate(LibcBindings.CALL_STATE_LAYOUT);
            int rc = (int) handle.invokeExact(callState, fd);
            return rc == 0 ? 0 : LibcBindings.errno(callState);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("downcall failed", t);
        }
    }

    private static void checkZero(int errno, String operation, Path path) throws NativeIoException {
        if (errno != 0) {
            throw new NativeIoException(operation, path, errno);
        }
    }
}
