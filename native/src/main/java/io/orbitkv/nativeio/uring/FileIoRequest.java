package io.orbitkv.nativeio.uring;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One read, write or datasync travelling through {@link IoUringFileIo}.
 *
 * <p>{@link #state} is the only field touched from several threads: a caller's cancel and the loop's submission race
 * for the QUEUED state with a compare-and-set, so exactly one of them moves the request out of it. Everything else
 * after construction is confined to the loop thread. The request keeps a strong reference to the caller's segment so
 * that a segment from a GC-managed arena cannot be freed while the kernel may still use its memory.
 */
final class FileIoRequest {

    static final int QUEUED = 0;
    static final int SUBMITTED = 1;
    static final int DONE = 2;

    final IoUringFileIo owner;
    final UringFile file;
    final FileIoOperation operation;
    final IoLane lane;
    final long fileOffset;
    final MemorySegment buffer;
    final long address;
    final long lengthBytes;
    final FileIoFuture future;
    final AtomicInteger state = new AtomicInteger(QUEUED);
    private volatile boolean cancelRequested;

    // Loop-confined.
    long transferredBytes;
    int tag = -1;
    long firstSubmitNanos;
    long kernelUserData;

    FileIoRequest(IoUringFileIo owner, UringFile file, FileIoOperation operation, IoLane lane, long fileOffset,
                  MemorySegment buffer) {
        this.owner = owner;
        this.file = file;
        this.operation = operation;
        this.lane = lane;
        this.fileOffset = fileOffset;
        this.buffer = buffer;
        this.address = buffer == null ? 0 : buffer.address();
        this.lengthBytes = buffer == null ? 0 : buffer.byteSize();
        this.future = new FileIoFuture(this);
    }

    boolean cancelRequested() {
        return cancelRequested;
    }

    /** See {@link FileIoFuture#cancel}. */
    boolean requestCancel() {
        if (future.isDone()) {
            return false;
        }
        cancelRequested = true;
        if (state.compareAndSet(QUEUED, DONE)) {
            owner.onCancelledWhileQueued(this);
            return future.markCancelled();
        }
        return false;
    }

    @Override
    public String toString() {
        return operation + "[" + file.path() + " @" + fileOffset + " +" + lengthBytes + " lane=" + lane + "]";
    }
}
