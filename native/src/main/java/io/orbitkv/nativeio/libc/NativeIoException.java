package io.orbitkv.nativeio.libc;

import java.io.IOException;
import java.nio.file.Path;

/**
 * A failed native file operation: the errno, the operation name and the path it was applied to.
 *
 * <p>Used by the libc façade and by io_uring completions ({@code errno = -res}), so callers handle one type whichever
 * way the I/O was issued.
 */
public class NativeIoException extends IOException {

    public static final int EIO = 5;
    public static final int ENOENT = 2;
    public static final int EBADF = 9;
    public static final int EINVAL = 22;
    public static final int ENOSPC = 28;
    public static final int ECANCELED = 125;

    private static final long serialVersionUID = 1L;

    private final int errno;
    private final String operation;
    private final transient Path path;

    public NativeIoException(String operation, Path path, int errno, String detail) {
        super(operation + "(" + path + ") failed: errno " + errno + " (" + Libc.describeErrno(errno) + ")"
                + (detail == null || detail.isEmpty() ? "" : ": " + detail));
        this.errno = errno;
        this.operation = operation;
        this.path = path;
    }

    public NativeIoException(String operation, Path path, int errno) {
        this(operation, path, errno, null);
    }

    /** The positive errno value reported by the kernel. */
    public int errno() {
        return errno;
    }

    /** The operation that failed, e.g. {@code open}, {@code fallocate}, {@code io_uring write}. */
    public String operation() {
        return operation;
    }

    /** The file the operation was applied to (null after deserialization). */
    public Path path() {
        return path;
    }
}
