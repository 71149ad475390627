package io.orbitkv.ssd;

import io.orbitkv.nativeio.uring.FileIoFuture;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import io.orbitkv.model.SsdReadResult;

/**
 * The result of {@link SsdStore#readInto}: a verified read, or an {@link SsdException}, or cancellation.
 *
 * <p>Design note (ownership on cancel): while this future is incomplete the destination segment belongs to the SSD
 * role (the kernel may be writing into it) and so do any bounce buffers it uses; it completes, in any way, only after
 * every I/O it submitted has reported its completion. {@link #cancel} therefore records the wish and forwards it to
 * the io_uring requests (a queued one is dropped at once, a submitted one cannot be recalled) and returns false; the
 * future completes as cancelled once the completions arrived. Completes on the SSD role's thread. Callers cannot
 * complete it themselves.
 */
public final class SsdReadFuture extends CompletableFuture<SsdReadResult> {

    private final List<FileIoFuture> submitted = new CopyOnWriteArrayList<>();
    private volatile boolean cancelRequested;

    SsdReadFuture() {
    }

    /** Requests cancellation; the future completes (cancelled) only after the submitted I/O completed. */
    @Override
    public boolean cancel(boolean mayInterruptIfRunning) {
        if (isDone()) {
            return false;
        }
        cancelRequested = true;
        for (FileIoFuture io : submitted) {
            io.cancel(false);
        }
        return false;
    }

    public boolean cancelRequested() {
        return cancelRequested;
    }

    void track(FileIoFuture io) {
        submitted.add(io);
        if (cancelRequested) {
            io.cancel(false);
        }
    }

    @Override
    public boolean complete(SsdReadResult value) {
        throw new UnsupportedOperationException("completed by the SSD role only");
    }

    @Override
    public boolean completeExceptionally(Throwable ex) {
        throw new UnsupportedOperationException("completed by the SSD role only");
    }

    @Override
    public void obtrudeValue(SsdReadResult value) {
        throw new UnsupportedOperationException("completed by the SSD role only");
    }

    @Override
    public void obtrudeException(Throwable ex) {
        throw new UnsupportedOperationException("completed by the SSD role only");
    }

    @Override
    public <U> CompletableFuture<U> newIncompleteFuture() {
        return new CompletableFuture<>();
    }

    void succeed(SsdReadResult result) {
        super.complete(result);
    }

    void fail(Throwable failure) {
        super.completeExceptionally(failure);
    }

    void markCancelled() {
        super.cancel(false);
    }
}
