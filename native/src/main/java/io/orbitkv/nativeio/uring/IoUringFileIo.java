package io.orbitkv.nativeio.uring;

import io.netty.channel.IoEventLoop;
import io.netty.channel.IoRegistration;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.uring.IoUring;
import io.netty.channel.uring.IoUringIoHandler;
import io.netty.channel.uring.IoUringIoHandlerConfig;
import io.netty.channel.uring.IoUringIoOps;
import io.netty.util.concurrent.DefaultThreadFactory;
import io.orbitkv.nativeio.libc.Libc;
import io.orbitkv.nativeio.libc.NativeFileDescriptor;
import io.orbitkv.nativeio.libc.NativeIoException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Consumer;

/**
 * File reads, writes and datasyncs through io_uring, on one dedicated netty io_uring event loop.
 *
 * <h2>Design note</h2>
 * <p><b>Threads.</b> This object owns a {@code MultiThreadIoEventLoopGroup} of exactly one thread. All request state
 * (lane queues, the tag table, open files) is confined to that thread; public methods may be called from any thread
 * and hop to it. The only cross-thread state is the admission counters (so a full lane is rejected immediately on
 * the caller's thread, without blocking it), each request's QUEUED/SUBMITTED/DONE state (cancel races submission with
 * a compare-and-set), and the gauges. Futures complete on the loop thread.
 *
 * <p><b>Buffers.</b> The caller owns every buffer. A buffer is lent to this object from the call until its future
 * completes, in any way; the caller must keep the memory alive and must not touch it meanwhile. A queued request
 * never touches its buffer. Once submitted, the kernel may read or write the buffer until the completion arrives, so a
 * submitted request cannot be recalled: cancelling it only marks it, and its future completes (as cancelled) after
 * the kernel's completion. Reads land directly in the caller's segment (for example a shared-memory pool slot); on
 * O_DIRECT files offset, length and address must be multiples of {@code directIoAlignmentBytes}.
 *
 * <p><b>Descriptors.</b> Files are opened through FFM on the loop thread and registered with netty, one registration
 * per file; a 16-bit tag in each submission maps completions back to requests. A file's descriptor is closed on the
 * loop thread only when none of its requests is queued or in flight, so its number cannot be reused under an I/O.
 *
 * <p><b>Scheduling.</b> At most {@code maxInFlight} requests are in the kernel at once. Beyond that, requests wait in
 * two bounded lanes. {@link IoLane#RESTORE} goes first; while writes wait, after {@code restoreSubmissionsPerWrite}
 * consecutive restore submissions one write is submitted, so writes keep at least 1/(N+1) of the submissions. A full
 * lane rejects with {@link FileIoRejectedException.Reason#QUEUE_FULL} at once. Short transfers are resubmitted for
 * the remainder; a read that reaches end of file completes with the shorter count; a write that makes no progress, or
 * an O_DIRECT transfer that stops off alignment, fails with {@link NativeIoException} (EIO, resp. the read completes
 * short). Kernel errors fail with {@link NativeIoException} carrying {@code errno = -res}.
 *
 * <p><b>Close.</b> {@link #close()} is idempotent: queued requests fail with {@code CLOSED} (their buffers untouched),
 * in-flight requests get a best-effort {@code IORING_OP_ASYNC_CANCEL} and their futures complete when the kernel
 * reports back, then every descriptor is closed and the loop shuts down. Capabilities are probed once, into
 * {@link #isAvailable()} and {@link #unavailabilityCause()}.
 */
public final class IoUringFileIo implements AutoCloseable {

    static final byte IORING_OP_ASYNC_CANCEL = 14;
    static final int IORING_FSYNC_DATASYNC = 1;
    /** Linux caps one read/write at MAX_RW_COUNT (INT_MAX rounded down to a page); larger requests continue. */
    static final int MAX_TRANSFER_BYTES = 0x7FFFF000;
    /** Tag carried by our own cancel submissions; never a request tag since maxInFlight is at most 4096. */
    static final int CANCEL_TAG = 0xFFFF;

    private static final boolean AVAILABLE;
    private static final Throwable UNAVAILABILITY_CAUSE;

    static {
        Throwable cause;
        boolean available;
        try {
            available = IoUring.isAvailable() && Libc.isAvailable();
            cause = !IoUring.isAvailable() ? IoUring.unavailabilityCause()
                    : Libc.isAvailable() ? null : Libc.unavailabilityCause();
        } catch (Throwable t) {
            available = false;
            cause = t;
        }
        AVAILABLE = available;
        UNAVAILABILITY_CAUSE = cause;
    }

    private final IoUringFileIoOptions options;
    private final FileIoListener listener;
    private final MultiThreadIoEventLoopGroup group;
    private final IoEventLoop loop;

    // Cross-thread: admission, gauges, close.
    private final Map<IoLane, AtomicInteger> acceptedNotSubmitted = new EnumMap<>(IoLane.class);
    private final Map<IoLane, LongAdder> rejectedQueueFull = new EnumMap<>(IoLane.class);
    private final AtomicIntegerArray inFlightByLane = new AtomicIntegerArray(IoLane.values().length);
    private final AtomicLong lentBufferBytes = new AtomicLong();
    private final AtomicLong resubmissions = new AtomicLong();
    private final AtomicBoolean closeStarted = new AtomicBoolean();
    private final CompletableFuture<Void> closeFuture = new CompletableFuture<>();

    // Loop-confined.
    private final Map<IoLane, ArrayDeque<FileIoRequest>> laneQueues = new EnumMap<>(IoLane.class);
    private final FileIoRequest[] requestsByTag;
    private final int[] freeTags;
    private int freeTagCount;
    private int inFlightTotal;
    private int consecutiveRestoresWhileWritesWaited;
    private boolean dispatching;
    private final Set<UringFile> openFiles = new LinkedHashSet<>();
    private boolean closing;
    private boolean closeFinishing;

    private IoUringFileIo(IoUringFileIoOptions options) {
        this.options = options;
        this.listener = options.listener();
        for (IoLane lane : IoLane.values()) {
            acceptedNotSubmitted.put(lane, new AtomicInteger());
            rejectedQueueFull.put(lane, new LongAdder());
            laneQueues.put(lane, new ArrayDeque<>());
        }
        int depth = options.maxInFlight();
        requestsByTag = new FileIoRequest[depth];
        freeTags = new int[depth];
        for (int tag = depth - 1; tag >= 0; tag--) {
            freeTags[freeTagCount++] = tag;
        }
        // Submissions per loop iteration: each in-flight request plus one cancel each, plus netty's own entries.
        int ringSize = Integer.highestOneBit(Math.max(64, 2 * depth + 16) - 1) << 1;
        IoUringIoHandlerConfig config = new IoUringIoHandlerConfig().setRingSize(ringSize);
        this.group = new MultiThreadIoEventLoopGroup(1, new DefaultThreadFactory(options.threadName(), true),
                IoUringIoHandler.newFactory(config));
        this.loop = group.next();
    }

    /** Whether io_uring (through netty) and the libc bindings work here; probed once. */
    public static boolean isAvailable() {
        return AVAILABLE;
    }

    /** Why io_uring file I/O is unavailable, or null when it is available. */
    public static Throwable unavailabilityCause() {
        return UNAVAILABILITY_CAUSE;
    }

    /**
     * Starts a new instance with its own loop thread.
     *
     * @throws UnsupportedOperationException when {@link #isAvailable()} is false (the cause attached)
     */
    public static IoUringFileIo create(IoUringFileIoOptions options) {
        if (!AVAILABLE) {
            throw new UnsupportedOperationException("io_uring file I/O unavailable", UNAVAILABILITY_CAUSE);
        }
        Objects.requireNonNull(options, "options").validate();
        return new IoUringFileIo(options);
    }

    // ------------------------------------------------------------------------------------------------ files

    /**
     * Opens {@code path} ({@link Libc} flags; O_CLOEXEC is always added) on the loop thread and registers it.
     * Fails with {@link NativeIoException} (errno, path) when the open fails.
     */
    public CompletableFuture<UringFile> open(Path path, int flags, int mode) {
        Objects.requireNonNull(path, "path");
        CompletableFuture<UringFile> result = new CompletableFuture<>();
        if (closeStarted.get()) {
            result.completeExceptionally(closedRejection(null));
            return result;
        }
        runOnLoop(() -> onOpen(path, flags, mode, result), result::completeExceptionally);
        return result;
    }

    private void onOpen(Path path, int flags, int mode, CompletableFuture<UringFile> result) {
        if (closing) {
            result.completeExceptionally(closedRejection(null));
            return;
        }
        NativeFileDescriptor descriptor;
        try {
            descriptor = Libc.open(path, flags, mode);
        } catch (NativeIoException | RuntimeException e) {
            result.completeExceptionally(e);
            return;
        }
        UringFile file = new UringFile(this, descriptor);
        loop.register(file.handle).addListener(registered -> {
            if (registered.isSuccess() && !closing) {
                file.registration = (IoRegistration) registered.getNow();
                openFiles.add(file);
                result.complete(file);
            } else {
                if (registered.isSuccess()) {
                    ((IoRegistration) registered.getNow()).cancel();
                }
                closeDescriptorQuietly(file);
                result.completeExceptionally(registered.isSuccess() ? closedRejection(null) : registered.cause());
            }
        });
    }

    /**
     * Closes {@code file} once its queued and in-flight requests are done; new requests on it are rejected with
     * {@link FileIoRejectedException.Reason#FILE_CLOSED}. Idempotent.
     */
    public CompletableFuture<Void> closeFile(UringFile file) {
        requireOwned(file);
        runOnLoop(() -> {
            file.closing = true;
            maybeFinishFileClose(file);
        }, failure -> closeDescriptorQuietly(file));
        return file.closeFuture;
    }

    /** Size of the file in bytes (lseek SEEK_END), run on the loop thread so it is ordered with {@link #closeFile}. */
    public CompletableFuture<Long> size(UringFile file) {
        return callOnLoop(file, file.descriptor::size);
    }

    /**
     * Reserves blocks for {@code [offset, offset + length)} (fallocate), on the loop thread. A metadata operation
     * that can take milliseconds: meant for shard setup, not the steady state.
     */
    public CompletableFuture<Void> fallocate(UringFile file, int mode, long offset, long length) {
        return callOnLoop(file, () -> {
            file.descriptor.fallocate(mode, offset, length);
            return null;
        });
    }

    /** Sets the file size (ftruncate), on the loop thread: a sparse extension when growing. Setup only. */
    public CompletableFuture<Void> truncate(UringFile file, long length) {
        return callOnLoop(file, () -> {
            file.descriptor.truncate(length);
            return null;
        });
    }

    private <T> CompletableFuture<T> callOnLoop(UringFile file, Callable<T> call) {
        requireOwned(file);
        CompletableFuture<T> result = new CompletableFuture<>();
        runOnLoop(() -> {
            if (file.closing || file.isClosed()) {
                result.completeExceptionally(new FileIoRejectedException(FileIoRejectedException.Reason.FILE_CLOSED,
                        null, file.path().toString()));
                return;
            }
            try {
                result.complete(call.call());
            } catch (Exception e) {
                result.completeExceptionally(e);
            }
        }, result::completeExceptionally);
        return result;
    }

    // ------------------------------------------------------------------------------------------------ requests

    /** Reads {@code dst.byteSize()} bytes at {@code fileOffset} into {@code dst}; completes with the bytes read. */
    public FileIoFuture read(UringFile file, long fileOffset, MemorySegment dst, IoLane lane) {
        Objects.requireNonNull(dst, "dst");
        if (dst.isReadOnly()) {
            throw new IllegalArgumentException("read into a read-only segment");
        }
        return submit(file, FileIoOperation.READ, fileOffset, dst, lane);
    }

    /** Writes all of {@code src} at {@code fileOffset}; completes with the bytes written. */
    public FileIoFuture write(UringFile file, long fileOffset, MemorySegment src, IoLane lane) {
        Objects.requireNonNull(src, "src");
        return submit(file, FileIoOperation.WRITE, fileOffset, src, lane);
    }

    /**
     * fdatasync through io_uring; completes with 0 once data written before it completed is durable. io_uring does
     * not order it after requests still in flight: issue it after the writes it must cover have completed.
     */
    public FileIoFuture datasync(UringFile file, IoLane lane) {
        return submit(file, FileIoOperation.DATASYNC, 0, null, lane);
    }

    private FileIoFuture submit(UringFile file, FileIoOperation operation, long fileOffset, MemorySegment buffer,
                                IoLane lane) {
        requireOwned(file);
        Objects.requireNonNull(lane, "lane");
        if (buffer != null) {
            validateTransfer(file, fileOffset, buffer);
        }
        FileIoRequest request = new FileIoRequest(this, file, operation, lane, fileOffset, buffer);
        if (closeStarted.get()) {
            rejectUnsubmitted(request, closedRejection(lane));
            return request.future;
        }
        if (file.isClosed()) {
            rejectUnsubmitted(request, fileClosedRejection(request));
            return request.future;
        }
        if (!tryAccept(lane)) {
            rejectedQueueFull.get(lane).increment();
            rejectUnsubmitted(request, new FileIoRejectedException(FileIoRejectedException.Reason.QUEUE_FULL, lane,
                    "capacity " + options.queueCapacity(lane) + " reached, " + request));
            return request.future;
        }
        runOnLoop(() -> onEnqueue(request), failure -> {
            if (request.state.compareAndSet(FileIoRequest.QUEUED, FileIoRequest.DONE)) {
                acceptedNotSubmitted.get(lane).decrementAndGet();
                request.future.fail(closedRejection(lane));
            }
        });
        return request.future;
    }

    private void validateTransfer(UringFile file, long fileOffset, MemorySegment buffer) {
        if (!buffer.isNative()) {
            throw new IllegalArgumentException("io_uring needs an off-heap segment (heap arrays may move)");
        }
        long length = buffer.byteSize();
        if (length < 1 || length > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("transfer length must be 1.." + Integer.MAX_VALUE + ": " + length);
        }
        if (fileOffset < 0) {
            throw new IllegalArgumentException("negative file offset " + fileOffset);
        }
        if (file.direct()) {
            long alignment = options.directIoAlignmentBytes();
            if ((fileOffset | length | buffer.address()) % alignment != 0) {
                throw new IllegalArgumentException("O_DIRECT needs offset, length and address aligned to "
                        + alignment + ": offset " + fileOffset + ", length " + length + ", address 0x"
                        + Long.toHexString(buffer.address()));
            }
        }
    }

    private boolean tryAccept(IoLane lane) {
        AtomicInteger accepted = acceptedNotSubmitted.get(lane);
        int capacity = options.queueCapacity(lane);
        for (;;) {
            int current = accepted.get();
            if (current >= capacity) {
                return false;
            }
            if (accepted.compareAndSet(current, current + 1)) {
                return true;
            }
        }
    }

    private void onEnqueue(FileIoRequest request) {
        if (request.state.get() != FileIoRequest.QUEUED) {
            return; // cancelled while hopping to the loop; the canceller already released its admission
        }
        if (closing || request.file.closing) {
            if (request.state.compareAndSet(FileIoRequest.QUEUED, FileIoRequest.DONE)) {
                acceptedNotSubmitted.get(request.lane).decrementAndGet();
                request.future.fail(closing ? closedRejection(request.lane) : fileClosedRejection(request));
            }
            return;
        }
        laneQueues.get(request.lane).addLast(request);
        request.file.outstandingRequests++;
        dispatch();
    }

    /** Called by the cancelling thread after it won the QUEUED -> DONE race. */
    void onCancelledWhileQueued(FileIoRequest request) {
        acceptedNotSubmitted.get(request.lane).decrementAndGet();
        runOnLoop(() -> {
            if (laneQueues.get(request.lane).remove(request)) {
                request.file.outstandingRequests--;
                maybeFinishFileClose(request.file);
            }
        }, ignored -> { });
    }

    private void dispatch() {
        if (dispatching) {
            return; // a completion callback submitted from inside the loop below; the loop picks it up
        }
        dispatching = true;
        try {
            while (inFlightTotal < options.maxInFlight()) {
                IoLane lane = nextLane();
                if (lane == null) {
                    return;
                }
                boolean writesWaiting = !laneQueues.get(IoLane.WRITE).isEmpty();
                FileIoRequest request = laneQueues.get(lane).pollFirst();
                if (!request.state.compareAndSet(FileIoRequest.QUEUED, FileIoRequest.SUBMITTED)) {
                    request.file.outstandingRequests--; // cancelled in the queue; its canceller released admission
                    maybeFinishFileClose(request.file);
                    continue;
                }
                acceptedNotSubmitted.get(lane).decrementAndGet();
                if (lane == IoLane.RESTORE) {
                    consecutiveRestoresWhileWritesWaited = writesWaiting ? consecutiveRestoresWhileWritesWaited + 1 : 0;
                } else {
                    consecutiveRestoresWhileWritesWaited = 0;
                }
                start(request);
            }
        } finally {
            dispatching = false;
        }
    }

    private IoLane nextLane() {
        boolean restoreWaiting = !laneQueues.get(IoLane.RESTORE).isEmpty();
        boolean writeWaiting = !laneQueues.get(IoLane.WRITE).isEmpty();
        if (restoreWaiting && writeWaiting) {
            return consecutiveRestoresWhileWritesWaited >= options.restoreSubmissionsPerWrite()
                    ? IoLane.WRITE : IoLane.RESTORE;
        }
        return restoreWaiting ? IoLane.RESTORE : writeWaiting ? IoLane.WRITE : null;
    }

    private void start(FileIoRequest request) {
        int tag = freeTags[--freeTagCount];
        requestsByTag[tag] = request;
        request.tag = tag;
        inFlightTotal++;
        inFlightByLane.incrementAndGet(request.lane.ordinal());
        lentBufferBytes.addAndGet(request.lengthBytes);
        request.firstSubmitNanos = options.nanoClock().getAsLong();
        try {
            listener.onSubmitted(request.lane, request.operation, request.file.path(), request.fileOffset,
                    request.lengthBytes);
        } catch (RuntimeException ignored) {
            // an observer must not break the I/O path
        }
        submitEntry(request);
    }

    private void submitEntry(FileIoRequest request) {
        IoUringIoOps ops;
        if (request.operation == FileIoOperation.DATASYNC) {
            ops = new IoUringIoOps(request.operation.opcode(), (byte) 0, (short) 0, request.file.fd(), 0L, 0L, 0,
                    IORING_FSYNC_DATASYNC, (short) request.tag, (short) 0, (short) 0, 0, 0L);
        } else {
            long done = request.transferredBytes;
            int length = (int) Math.min(request.lengthBytes - done, MAX_TRANSFER_BYTES);
            ops = new IoUringIoOps(request.operation.opcode(), (byte) 0, (short) 0, request.file.fd(),
                    request.fileOffset + done, request.address + done, length, 0, (short) request.tag, (short) 0,
                    (short) 0, 0, 0L);
        }
        long userData = request.file.registration.submit(ops);
        if (userData == 0) {
            // Registration no longer valid: nothing reached the kernel, so the buffer is free again.
            finish(request, new NativeIoException("io_uring " + request.operation, request.file.path(),
                    NativeIoException.EBADF, "file registration is no longer valid"));
            return;
        }
        request.kernelUserData = userData;
    }

    /** A completion for {@code file}, on the loop thread. */
    void onCompletion(UringFile file, int res, short data) {
        int tag = Short.toUnsignedInt(data);
        if (tag == CANCEL_TAG) {
            return; // outcome of our own best-effort cancel; the target request reports separately
        }
        FileIoRequest request = tag < requestsByTag.length ? requestsByTag[tag] : null;
        if (request == null || request.file != file) {
            return; // cannot happen while tags are only freed on their final completion
        }
        if (res < 0) {
            finish(request, new NativeIoException("io_uring " + request.operation, file.path(), -res,
                    "offset " + (request.fileOffset + request.transferredBytes) + " length "
                            + (request.lengthBytes - request.transferredBytes)));
            return;
        }
        if (request.operation == FileIoOperation.DATASYNC) {
            finish(request, null);
            return;
        }
        request.transferredBytes += res;
        boolean isRead = request.operation == FileIoOperation.READ;
        if (request.transferredBytes == request.lengthBytes) {
            finish(request, null);
        } else if (res == 0) {
            finish(request, isRead ? null : noProgress(request, "write made no progress"));
        } else if (file.direct() && request.transferredBytes % options.directIoAlignmentBytes() != 0) {
            // O_DIRECT cannot continue from an unaligned position: for a read this is end of file.
            finish(request, isRead ? null : noProgress(request, "O_DIRECT write stopped at an unaligned length"));
        } else if (closing) {
            finish(request, noProgress(request, "closed during a short transfer"));
        } else {
            resubmissions.incrementAndGet();
            submitEntry(request);
        }
    }

    private static NativeIoException noProgress(FileIoRequest request, String detail) {
        return new NativeIoException("io_uring " + request.operation, request.file.path(), NativeIoException.EIO,
                detail + " after " + request.transferredBytes + " of " + request.lengthBytes + " bytes at offset "
                        + request.fileOffset);
    }

    private void finish(FileIoRequest request, Throwable failure) {
        requestsByTag[request.tag] = null;
        freeTags[freeTagCount++] = request.tag;
        request.tag = -1;
        inFlightTotal--;
        inFlightByLane.decrementAndGet(request.lane.ordinal());
        lentBufferBytes.addAndGet(-request.lengthBytes);
        request.state.set(FileIoRequest.DONE);
        request.file.outstandingRequests--;
        long elapsedNanos = options.nanoClock().getAsLong() - request.firstSubmitNanos;
        try {
            listener.onCompleted(request.lane, request.operation, request.file.path(), request.fileOffset,
                    request.transferredBytes, failure instanceof NativeIoException e ? e.errno() : 0, elapsedNanos);
        } catch (RuntimeException ignored) {
            // an observer must not break the I/O path
        }
        if (request.cancelRequested()) {
            request.future.markCancelled();
        } else if (failure != null) {
            request.future.fail(failure);
        } else {
            request.future.succeed((int) request.transferredBytes);
        }
        dispatch();
        maybeFinishFileClose(request.file);
        maybeFinishClose();
    }

    private void rejectUnsubmitted(FileIoRequest request, Throwable failure) {
        request.state.set(FileIoRequest.DONE);
        request.future.fail(failure);
    }

    // ------------------------------------------------------------------------------------------------ close

    private void maybeFinishFileClose(UringFile file) {
        if (file.closing && file.outstandingRequests == 0 && !closeFinishing) {
            closeFileNow(file);
        }
    }

    private void closeFileNow(UringFile file) {
        openFiles.remove(file);
        if (file.registration != null) {
            file.registration.cancel();
        }
        try {
            file.descriptor.close();
            file.closeFuture.complete(null);
        } catch (NativeIoException e) {
            file.closeFuture.completeExceptionally(e);
        }
    }

    void closeDescriptorQuietly(UringFile file) {
        try {
            file.descriptor.close();
        } catch (NativeIoException ignored) {
            // Linux releases the descriptor even when close reports an error
        }
        file.closeFuture.complete(null);
    }

    /**
     * Starts closing (idempotent): queued requests fail with {@code CLOSED}, in-flight ones get a best-effort kernel
     * cancel and complete when the kernel reports back, then every file is closed and the loop thread ends.
     */
    public CompletableFuture<Void> closeAsync() {
        if (closeStarted.compareAndSet(false, true)) {
            runOnLoop(this::onClose, closeFuture::completeExceptionally);
        }
        return closeFuture;
    }

    /**
     * {@link #closeAsync()} and waits up to {@code closeTimeoutMillis}. Must not be called on the loop thread.
     *
     * @throws IllegalStateException on the loop thread, or when the close did not finish in time
     */
    @Override
    public void close() {
        if (loop.inEventLoop()) {
            throw new IllegalStateException("close() would block the io_uring loop thread; use closeAsync()");
        }
        try {
            closeAsync().get(options.closeTimeoutMillis(), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while closing", e);
        } catch (ExecutionException e) {
            throw new IllegalStateException("close failed", e.getCause());
        } catch (TimeoutException e) {
            throw new IllegalStateException("close did not finish within " + options.closeTimeoutMillis()
                    + " ms; in flight: " + inFlightTotalGauge(), e);
        }
    }

    private void onClose() {
        closing = true;
        for (IoLane lane : IoLane.values()) {
            ArrayDeque<FileIoRequest> queue = laneQueues.get(lane);
            for (FileIoRequest request; (request = queue.pollFirst()) != null; ) {
                request.file.outstandingRequests--;
                if (request.state.compareAndSet(FileIoRequest.QUEUED, FileIoRequest.DONE)) {
                    acceptedNotSubmitted.get(lane).decrementAndGet();
                    request.future.fail(closedRejection(lane));
                }
            }
        }
        for (FileIoRequest request : requestsByTag) {
            if (request != null && request.file.registration.isValid()) {
                request.file.registration.submit(new IoUringIoOps(IORING_OP_ASYNC_CANCEL, (byte) 0, (short) 0, -1,
                        0L, request.kernelUserData, 0, 0, (short) CANCEL_TAG, (short) 0, (short) 0, 0, 0L));
            }
        }
        for (UringFile file : openFiles) {
            file.closing = true;
        }
        maybeFinishClose();
    }

    private void maybeFinishClose() {
        if (!closing || closeFinishing || inFlightTotal > 0) {
            return;
        }
        closeFinishing = true;
        List<UringFile> files = new ArrayList<>(openFiles);
        for (UringFile file : files) {
            closeFileNow(file);
        }
        group.shutdownGracefully(0, options.closeTimeoutMillis(), TimeUnit.MILLISECONDS).addListener(terminated -> {
            if (terminated.isSuccess()) {
                closeFuture.complete(null);
            } else {
                closeFuture.completeExceptionally(terminated.cause());
            }
        });
    }

    // ------------------------------------------------------------------------------------------------ gauges

    /** Requests of {@code lane} currently submitted to the kernel. */
    public int inFlight(IoLane lane) {
        return inFlightByLane.get(lane.ordinal());
    }

    /** Requests of {@code lane} accepted but not yet submitted (including those hopping to the loop thread). */
    public int queued(IoLane lane) {
        return acceptedNotSubmitted.get(lane).get();
    }

    /** Requests of {@code lane} rejected because its queue was full, since creation. */
    public long rejectedQueueFull(IoLane lane) {
        return rejectedQueueFull.get(lane).sum();
    }

    /** Bytes of caller buffers currently lent to the kernel (submitted, completion not yet arrived). */
    public long lentBufferBytes() {
        return lentBufferBytes.get();
    }

    /** Continuation submissions made for short reads and writes, since creation. */
    public long shortTransferResubmissions() {
        return resubmissions.get();
    }

    public IoUringFileIoOptions options() {
        return options;
    }

    /** Whether the calling thread is this instance's io_uring loop thread. */
    public boolean inLoopThread() {
        return loop.inEventLoop();
    }

    private int inFlightTotalGauge() {
        int total = 0;
        for (IoLane lane : IoLane.values()) {
            total += inFlight(lane);
        }
        return total;
    }

    // ------------------------------------------------------------------------------------------------ helpers

    private void runOnLoop(Runnable task, Consumer<Throwable> onRejected) {
        if (loop.inEventLoop()) {
            task.run();
            return;
        }
        try {
            loop.execute(task);
        } catch (RejectedExecutionException e) {
            onRejected.accept(closedRejection(null));
        }
    }

    private void requireOwned(UringFile file) {
        Objects.requireNonNull(file, "file");
        if (file.owner != this) {
            throw new IllegalArgumentException("file was opened by another IoUringFileIo: " + file);
        }
    }

    private static FileIoRejectedException closedRejection(IoLane lane) {
        return new FileIoRejectedException(FileIoRejectedException.Reason.CLOSED, lane, "io_uring file I/O closed");
    }

    private static FileIoRejectedException fileClosedRejection(FileIoRequest request) {
        return new FileIoRejectedException(FileIoRejectedException.Reason.FILE_CLOSED, request.lane,
                request.toString());
    }
}
