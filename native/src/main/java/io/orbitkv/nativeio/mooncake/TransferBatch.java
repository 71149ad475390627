package io.orbitkv.nativeio.mooncake;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * A TE batch: up to {@link #capacity()} transfers submitted in one or more calls, each polled ({@link #status}) until
 * terminal, then freed ({@link #free()}).
 *
 * <p>Design note: TE keeps a batch's tasks (and its workers write into them) until {@code freeBatchID}, which it
 * refuses ({@link TransferEngineError#BATCH_BUSY}) until every task was seen finished by a status poll. So this batch
 * frees only when every task polled terminal and TE agrees; otherwise {@link #free()} throws and the batch stays owned,
 * counted live, and blocks its engine's close: a cancelled or timed-out user parks it and frees it later, never
 * before. The local buffers of submitted tasks must stay mapped and registered until then. Calls on one batch are
 * serialized; polling never blocks (TE's completion is poll-only), so the poller chooses its own back-off.
 */
public final class TransferBatch implements AutoCloseable {
    private static final TransferStatus NOT_POLLED = new TransferStatus(TransferState.WAITING, 0);
    private final MooncakeTransferEngine engine;
    private final long id;
    private final int capacity;
    private final List<TransferStatus> lastStatuses = new ArrayList<>();
    private boolean freed;

    TransferBatch(MooncakeTransferEngine engine, long id, int capacity) {
        this.engine = engine;
        this.id = id;
        this.capacity = capacity;
    }

    public int capacity() {
        return capacity;
    }

    /** Tasks submitted so far; task ids are 0 to this minus one, in submission order. */
    public synchronized int submitted() {
        return lastStatuses.size();
    }

    /** Submits {@code requests} (validated first, all or none); their task ids follow the ones submitted before. */
    public synchronized void submit(List<TransferRequest> requests) {
        Objects.requireNonNull(requests, "requests");
        ensureLive("submitTransfer");
        if (requests.isEmpty()) {
            throw new IllegalArgumentException("nothing to submit");
        }
        if (lastStatuses.size() + requests.size() > capacity) {
            throw new IllegalArgumentException(requests.size() + " more transfers exceed the batch's capacity of "
                    + capacity + " (" + lastStatuses.size() + " submitted)");
        }
        synchronized (engine.stateLock()) {
            for (TransferRequest request : requests) {
                engine.validate(Objects.requireNonNull(request, "request"));
            }
        }
        int count = requests.size();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment entries = arena.allocate(TransferEngineBindings.TRANSFER_REQUEST, count);
            long stride = TransferEngineBindings.TRANSFER_REQUEST.byteSize();
            for (int i = 0; i < count; i++) {
                TransferRequest request = requests.get(i);
                long base = i * stride;
                entries.set(ValueLayout.JAVA_INT, base + TransferEngineBindings.REQUEST_OPCODE, request.opcode().code);
                entries.set(ValueLayout.ADDRESS, base + TransferEngineBindings.REQUEST_SOURCE, request.local());
                entries.set(ValueLayout.JAVA_INT, base + TransferEngineBindings.REQUEST_TARGET_ID, request.target().id());
                entries.set(ValueLayout.JAVA_LONG, base + TransferEngineBindings.REQUEST_TARGET_OFFSET, request.remoteAddress());
                entries.set(ValueLayout.JAVA_LONG, base + TransferEngineBindings.REQUEST_LENGTH, request.local().byteSize());
            }
            int rc = engine.withHandle("submitTransfer", handle -> MooncakeTransferEngine.invokeInt(() ->
                    (int) engine.bindings.submitTransfer.invokeExact(handle, id, entries, (long) count)));
            if (rc != 0) {
                // TE may have queued the tasks before a transport refused them: then they are ours to poll and free.
                if (taskExists(lastStatuses.size())) {
                    for (int i = 0; i < count; i++) {
                        lastStatuses.add(NOT_POLLED);
                    }
                }
                throw new MooncakeException("submitTransfer", rc, count + " transfer(s)");
            }
        }
        for (int i = 0; i < count; i++) {
            lastStatuses.add(NOT_POLLED);
        }
    }

    public void submit(TransferRequest... requests) {
        submit(List.of(requests));
    }

    /** Polls task {@code task}; a terminal answer is kept and returned again without asking TE. */
    public synchronized TransferStatus status(int task) {
        ensureLive("getTransferStatus");
        if (task < 0 || task >= lastStatuses.size()) {
            throw new IllegalArgumentException("task " + task + " not in [0, " + lastStatuses.size() + ")");
        }
        TransferStatus last = lastStatuses.get(task);
        if (last.state().isTerminal()) {
            return last;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(TransferEngineBindings.TRANSFER_STATUS);
            int rc = poll(task, out);
            if (rc != 0) {
                throw new MooncakeException("getTransferStatus", rc, "task " + task);
            }
            TransferStatus status = new TransferStatus(
                    TransferState.of(out.get(ValueLayout.JAVA_INT, TransferEngineBindings.STATUS_STATUS)),
                    out.get(ValueLayout.JAVA_LONG, TransferEngineBindings.STATUS_TRANSFERRED));
            lastStatuses.set(task, status);
            return status;
        }
    }

    /** Polls every task not yet terminal; true when all are terminal (completed or not). */
    public synchronized boolean pollAll() {
        boolean all = true;
        for (int task = 0; task < lastStatuses.size(); task++) {
            all &= status(task).state().isTerminal();
        }
        return all;
    }

    /** The last state seen for each task (WAITING until polled). */
    public synchronized List<TransferState> states() {
        return lastStatuses.stream().map(TransferStatus::state).toList();
    }

    /**
     * Frees the batch once every task polled terminal. Throws {@link IllegalStateException} (the batch stays live and
     * owned) while a task is not, or while TE still counts one busy. Idempotent.
     */
    public synchronized void free() {
        if (freed) {
            return;
        }
        if (!pollAll()) {
            throw new IllegalStateException("batch has tasks still in flight: " + states());
        }
        int rc = engine.withHandle("freeBatchID", handle -> MooncakeTransferEngine.invokeInt(() ->
                (int) engine.bindings.freeBatchID.invokeExact(handle, id)));
        if (TransferEngineError.of(rc) == TransferEngineError.BATCH_BUSY) {
            throw new IllegalStateException("the engine still counts tasks of this batch busy: " + states());
        }
        MooncakeTransferEngine.check("freeBatchID", rc);
        freed = true;
        engine.batchFreed(this);
    }

    /** {@link #free()}. */
    @Override
    public void close() {
        free();
    }

    private boolean taskExists(int task) {
        try (Arena arena = Arena.ofConfined()) {
            return poll(task, arena.allocate(TransferEngineBindings.TRANSFER_STATUS)) == 0;
        }
    }

    private int poll(int task, MemorySegment out) {
        return engine.withHandle("getTransferStatus", handle -> MooncakeTransferEngine.invokeInt(() ->
                (int) engine.bindings.getTransferStatus.invokeExact(handle, id, (long) task, out)));
    }

    private void ensureLive(String what) {
        if (freed) {
            throw new IllegalStateException(what + ": the batch was freed");
        }
    }
}
