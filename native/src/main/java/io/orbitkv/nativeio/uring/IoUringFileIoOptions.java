package io.orbitkv.nativeio.uring;

import java.util.Objects;
import java.util.function.LongSupplier;

/**
 * Settings of an {@link IoUringFileIo}; fluent, validated when the instance is created.
 *
 * <p>{@code restoreSubmissionsPerWrite} (N) is the starvation bound: while writes wait, at most N restore requests
 * are submitted in a row before one write is submitted, so writes get at least 1/(N+1) of the submission slots under
 * a continuous restore load and all of them when no restore waits. A large N favours restore latency; N = 0 would
 * alternate strictly and is rejected because it would give writes priority over restores.
 */
public final class IoUringFileIoOptions {

    public static final int MAX_IN_FLIGHT_DEFAULT = 16;
    public static final int LANE_QUEUE_CAPACITY_DEFAULT = 1024;
    public static final int RESTORE_SUBMISSIONS_PER_WRITE_DEFAULT = 8;
    public static final int DIRECT_IO_ALIGNMENT_BYTES_DEFAULT = 4096;
    public static final long CLOSE_TIMEOUT_MILLIS_DEFAULT = 10_000;
    /** Tags are 16-bit and one value is reserved for cancel operations. */
    public static final int MAX_IN_FLIGHT_LIMIT = 4096;

    private int maxInFlight = MAX_IN_FLIGHT_DEFAULT;
    private int restoreQueueCapacity = LANE_QUEUE_CAPACITY_DEFAULT;
    private int writeQueueCapacity = LANE_QUEUE_CAPACITY_DEFAULT;
    private int restoreSubmissionsPerWrite = RESTORE_SUBMISSIONS_PER_WRITE_DEFAULT;
    private int directIoAlignmentBytes = DIRECT_IO_ALIGNMENT_BYTES_DEFAULT;
    private long closeTimeoutMillis = CLOSE_TIMEOUT_MILLIS_DEFAULT;
    private String threadName = "orbitkv-ssd-uring";
    private FileIoListener listener = new FileIoListener() {
    };
    private LongSupplier nanoClock = System::nanoTime;

    /** Requests submitted to the kernel at once, both lanes together (the queue depth). */
    public IoUringFileIoOptions maxInFlight(int maxInFlight) {
        this.maxInFlight = maxInFlight;
        return this;
    }

    /**
     * Restore requests accepted but not yet submitted to the kernel (those still hopping to the loop thread included)
     * before new ones are rejected with {@link FileIoRejectedException.Reason#QUEUE_FULL}.
     */
    public IoUringFileIoOptions restoreQueueCapacity(int restoreQueueCapacity) {
        this.restoreQueueCapacity = restoreQueueCapacity;
        return this;
    }

    /** As {@link #restoreQueueCapacity}, for the write lane. */
    public IoUringFileIoOptions writeQueueCapacity(int writeQueueCapacity) {
        this.writeQueueCapacity = writeQueueCapacity;
        return this;
    }

    /** N in "after N consecutive restore submissions while writes wait, one write is submitted" (N >= 1). */
    public IoUringFileIoOptions restoreSubmissionsPerWrite(int restoreSubmissionsPerWrite) {
        this.restoreSubmissionsPerWrite = restoreSubmissionsPerWrite;
        return this;
    }

    /** Alignment enforced for offset, length and buffer address on files opened with O_DIRECT. */
    public IoUringFileIoOptions directIoAlignmentBytes(int directIoAlignmentBytes) {
        this.directIoAlignmentBytes = directIoAlignmentBytes;
        return this;
    }

    /** How long {@link IoUringFileIo#close()} waits for outstanding completions and the loop's shutdown. */
    public IoUringFileIoOptions closeTimeoutMillis(long closeTimeoutMillis) {
        this.closeTimeoutMillis = closeTimeoutMillis;
        return this;
    }

    public IoUringFileIoOptions threadName(String threadName) {
        this.threadName = Objects.requireNonNull(threadName, "threadName");
        return this;
    }

    public IoUringFileIoOptions listener(FileIoListener listener) {
        this.listener = Objects.requireNonNull(listener, "listener");
        return this;
    }

    /** Monotonic clock for submit-to-complete times; injected so tests and replays control time. */
    public IoUringFileIoOptions nanoClock(LongSupplier nanoClock) {
        this.nanoClock = Objects.requireNonNull(nanoClock, "nanoClock");
        return this;
    }

    public int maxInFlight() {
        return maxInFlight;
    }

    public int restoreQueueCapacity() {
        return restoreQueueCapacity;
    }

    public int writeQueueCapacity() {
        return writeQueueCapacity;
    }

    public int restoreSubmissionsPerWrite() {
        return restoreSubmissionsPerWrite;
    }

    public int directIoAlignmentBytes() {
        return directIoAlignmentBytes;
    }

    public long closeTimeoutMillis() {
        return closeTimeoutMillis;
    }

    public String threadName() {
        return threadName;
    }

    public FileIoListener listener() {
        return listener;
    }

    public LongSupplier nanoClock() {
        return nanoClock;
    }

    int queueCapacity(IoLane lane) {
        return lane == IoLane.RESTORE ? restoreQueueCapacity : writeQueueCapacity;
    }

    void validate() {
        if (maxInFlight < 1 || maxInFlight > MAX_IN_FLIGHT_LIMIT) {
            throw new IllegalArgumentException("maxInFlight must be 1.." + MAX_IN_FLIGHT_LIMIT + ": " + maxInFlight);
        }
        if (restoreQueueCapacity < 1 || writeQueueCapacity < 1) {
            throw new IllegalArgumentException("queue capacities must be >= 1");
        }
        if (restoreSubmissionsPerWrite < 1) {
            throw new IllegalArgumentException("restoreSubmissionsPerWrite must be >= 1: " + restoreSubmissionsPerWrite);
        }
        if (directIoAlignmentBytes < 512 || Integer.bitCount(directIoAlignmentBytes) != 1) {
            throw new IllegalArgumentException("directIoAlignmentBytes must be a power of two >= 512");
        }
        if (closeTimeoutMillis < 1) {
            throw new IllegalArgumentException("closeTimeoutMillis must be >= 1");
        }
    }
}
