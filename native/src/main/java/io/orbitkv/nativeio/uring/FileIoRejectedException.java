package io.orbitkv.nativeio.uring;

/** A request that {@link IoUringFileIo} refused to queue, or dropped unsubmitted; its buffer was never touched. */
public final class FileIoRejectedException extends Exception {

    private static final long serialVersionUID = 1L;

    /** Why a request was not (or will never be) submitted. */
    public enum Reason {
        /** The lane's bounded queue was full when the request was made. */
        QUEUE_FULL,
        /** The I/O instance is closing or closed. */
        CLOSED,
        /** The target file is closing or closed. */
        FILE_CLOSED
    }

    private final Reason reason;
    private final IoLane lane;

    public FileIoRejectedException(Reason reason, IoLane lane, String message) {
        super(reason + " on lane " + lane + ": " + message, null, false, false);
        this.reason = reason;
        this.lane = lane;
    }

    public Reason reason() {
        return reason;
    }

    public IoLane lane() {
        return lane;
    }
}
