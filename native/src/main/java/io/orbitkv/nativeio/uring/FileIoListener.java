package io.orbitkv.nativeio.uring;

import java.nio.file.Path;

/**
 * Observes submissions and completions of {@link IoUringFileIo}, for cost observations and metrics.
 *
 * <p>Both methods run on the io_uring loop thread, in submission and completion order: keep them short and
 * non-blocking (record a number, hand off to another thread). An exception thrown here is caught and ignored so that
 * an observer can never wedge the I/O path.
 */
public interface FileIoListener {

    /** A request left its lane queue and its first submission queue entry was enqueued to the kernel. */
    default void onSubmitted(IoLane lane, FileIoOperation operation, Path path, long fileOffset, long lengthBytes) {
    }

    /**
     * A request finished (successfully or not; continuations of short transfers included in the time).
     *
     * @param transferredBytes bytes transferred, 0 for a datasync
     * @param errno            0 on success, else the failure's errno
     * @param submitToCompleteNanos from the first submission to the final completion, measured with the injected clock
     */
    default void onCompleted(IoLane lane, FileIoOperation operation, Path path, long fileOffset,
                             long transferredBytes, int errno, long submitToCompleteNanos) {
    }
}
