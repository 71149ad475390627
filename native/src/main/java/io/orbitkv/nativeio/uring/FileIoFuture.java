package io.orbitkv.nativeio.uring;

import java.util.concurrent.CompletableFuture;

/**
 * The result of one {@link IoUringFileIo} request: the bytes transferred, or a {@link
 * io.orbitkv.nativeio.libc.NativeIoException} / {@link FileIoRejectedException}.
 *
 * <p>Design note (ownership on cancel): while this future is incomplete the request's buffer belongs to the I/O
 * layer; when it completes, in any way, the buffer is the caller's again. {@link #cancel} therefore only completes the
 * future at once when the request is still queued (its buffer was never handed to the kernel). Once submitted, a
 * request cannot be recalled: {@code cancel} records the wish and returns false, and the future completes as
 * cancelled only when the kernel's completion arrives, because until then the kernel may still be writing into the
 * buffer. Callers must not complete this future themselves; the {@code complete*} and {@code obtrude*} methods throw.
 * Completion happens on the io_uring loop thread; non-async dependents run there and must not block.
 */
public final class FileIoFuture extends CompletableFuture<Integer> {

    private final FileIoRequest request;

    FileIoFuture(FileIoRequest request) {
        this.request = request;
    }

    /**
     * Cancels a queued request (returns true, the future is cancelled now) or marks a submitted one (returns false;
     * the future completes as cancelled after the kernel completion). Returns false when already done.
     */
    @Override
    public boolean cancel(boolean mayInterruptIfRunning) {
        return request.requestCancel();
    }

    /** Whether cancellation was requested, whether or not it took effect yet. */
    public boolean cancelRequested() {
        return request.cancelRequested();
    }

    @Override
    public boolean complete(Integer value) {
        throw new UnsupportedOperationException("completed by the I/O layer only");
    }

    @Override
    public boolean completeExceptionally(Throwable ex) {
        throw new UnsupportedOperationException("completed by the I/O layer only");
    }

    @Override
    public void obtrudeValue(Integer value) {
        throw new UnsupportedOperationException("completed by the I/O layer only");
    }

    @Override
    public void obtrudeException(Throwable ex) {
        throw new UnsupportedOperationException("completed by the I/O layer only");
    }

    /** Dependents are plain futures, so they can be completed, timed out and cancelled normally. */
    @Override
    public <U> CompletableFuture<U> newIncompleteFuture() {
        return new CompletableFuture<>();
    }

    boolean succeed(int bytes) {
        return super.complete(bytes);
    }

    boolean fail(Throwable failure) {
        return super.completeExceptionally(failure);
    }

    boolean markCancelled() {
        return super.cancel(false);
    }
}
