package io.orbitkv.nativeio.libc;

import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * An open file descriptor and the path it was opened from.
 *
 * <p>Design note: this object is the descriptor's only owner. {@link #close()} is idempotent and releases it exactly
 * once; after it, {@link #fd()} must not be used (the number may already belong to another file). A descriptor used
 * by in-flight io_uring requests must not be closed until their completions arrived: the io_uring layer
 * ({@code IoUringFileIo}) enforces that for the files it opened, so do not close those yourself.
 */
public final class NativeFileDescriptor implements AutoCloseable {

    private final int fd;
    private final Path path;
    private final boolean direct;
    private final AtomicBoolean closed = new AtomicBoolean();

    NativeFileDescriptor(int fd, Path path, boolean direct) {
        this.fd = fd;
        this.path = path;
        this.direct = direct;
    }

    public int fd() {
        return fd;
    }

    public Path path() {
        return path;
    }

    /** Whether the file was opened with O_DIRECT, so I/O must be 4096-aligned. */
    public boolean direct() {
        return direct;
    }

    public boolean isClosed() {
        return closed.get();
    }

    /** Reserves {@code length} bytes at {@code offset} (mode 0 extends the file size, see {@link Libc#FALLOC_FL_KEEP_SIZE}). */
    public void fallocate(int mode, long offset, long length) throws NativeIoException {
        ensureOpen("fallocate");
        Libc.fallocate(fd, path, mode, offset, length);
    }

    public void truncate(long length) throws NativeIoException {
        ensureOpen("ftruncate");
        Libc.ftruncate(fd, path, length);
    }

    /** Blocks until the file's data (and the metadata needed to read it) is durable. */
    public void datasync() throws NativeIoException {
        ensureOpen("fdatasync");
        Libc.fdatasync(fd, path);
    }

    public long size() throws NativeIoException {
        ensureOpen("lseek");
        return Libc.size(fd, path);
    }

    /** Closes the descriptor once; later calls do nothing. */
    @Override
    public void close() throws NativeIoException {
        if (closed.compareAndSet(false, true)) {
            Libc.close(fd, path);
        }
    }

    private void ensureOpen(String operation) throws NativeIoException {
        if (closed.get()) {
            throw new NativeIoException(operation, path, NativeIoException.EBADF, "descriptor already closed");
        }
    }

    @Override
    public String toString() {
        return "NativeFileDescriptor[fd=" + fd + ", path=" + path + (direct ? ", O_DIRECT" : "")
                + (closed.get() ? ", closed" : "") + "]";
    }
}
