package io.orbitkv.restore;

import io.orbitkv.common.Ticker;
import io.orbitkv.common.LocalCodec;
import io.orbitkv.common.RoleProxies;
import io.orbitkv.nativeio.cuda.CudaRuntime;
import io.orbitkv.restore.RestoreCommands.BatchDone;
import io.orbitkv.restore.RestoreCommands.CopyBatch;
import io.vertx.core.Future;
import io.vertx.core.VerticleBase;
import io.vertx.core.eventbus.MessageConsumer;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * One device's worker (deployed with the worker threading model): it executes copy batches and blocks until each copy
 * is terminal, so the restore role's event loop never waits on a device.
 *
 * <p>Design note: the host lane copies pool pages into an engine's mapped host region ({@code MemorySegment.copy});
 * a CUDA lane makes its device current, queues {@code cudaMemcpyAsync} per page from the host-registered pool mapping
 * into the imported allocation on its own stream, records one event and blocks on it. A batch answers only when every
 * copy it submitted is terminal, which is what lets the restore role hold credits, sources and destination until then.
 * A host region shrunk underneath a copy raises an {@link InternalError} (the JVM's SIGBUS handling for mapped memory):
 * the batch fails instead of the Manager. This worker owns its CUDA stream and event and the IPC imports done on its
 * thread; {@link #stop()} closes them. Confined to this verticle's worker context (one thread at a time).
 */
final class DeviceWorkerVerticle extends VerticleBase {
    private final String address;
    private final Ticker ticker;
    private final int cudaDevice;
    private final RestoreVerticle.CopyGate gate;
    private final List<CudaRuntime.IpcMapping> imports = new ArrayList<>();
    private CudaRuntime.CudaStream stream;
    private CudaRuntime.CudaEvent done;
    private final List<MessageConsumer<?>> consumers = new ArrayList<>();

    /** {@code cudaDevice} -1: the host lane. */
    DeviceWorkerVerticle(String address, int cudaDevice, RestoreVerticle.CopyGate gate, Ticker ticker) {
        this.ticker = ticker;
        this.address = address;
        this.cudaDevice = cudaDevice;
        this.gate = gate;
    }

    static String address(String device) {
        return "orbitkv.restore.device." + device;
    }

    @Override
    public Future<?> start() {
        LocalCodec.register(vertx, RestoreCommands.MESSAGE_TYPES.toArray(Class<?>[]::new));
        if (cudaDevice >= 0) {
            CudaRuntime.setDevice(cudaDevice);
            stream = CudaRuntime.createStream();
            done = CudaRuntime.createEvent(false);
        }
        consumers.add(RoleProxies.serve(vertx.eventBus(), address, (Object command) -> {
            try {
                return Future.succeededFuture(switch (command) {
                    case CopyBatch batch -> (Object) execute(batch);
                    case RestoreCommands.ImportIpc importIpc -> importIpc(importIpc.handle());
                    case RestoreCommands.CloseIpc close -> closeIpc(close.address());
                    default -> throw new IllegalArgumentException("unknown worker command " + command);
                });
            } catch (RuntimeException e) {
                return Future.failedFuture(e);
            }
        }));
        return Future.succeededFuture();
    }

    private BatchDone execute(CopyBatch batch) {
        int n = batch.lengths().length;
        long[] nanos = new long[n];
        boolean hostBatch = batch.hostDestination() != null;
        if (hostBatch != (cudaDevice < 0) || (!hostBatch && batch.device() != cudaDevice)) {
            // A plan is bound to one device: a batch for another lane is refused before anything is copied.
            return BatchDone.failed(n, new IllegalArgumentException("a batch for device " + batch.device()
                    + " reached the worker of " + address));
        }
        try {
            gate.beforeBatch();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return BatchDone.failed(n, e);
        }
        int completed = 0;
        long started = ticker.nanos();
        long submitted = started;
        try {
            if (batch.hostDestination() != null) {
                for (int i = 0; i < n; i++) {
                    long start = ticker.nanos();
                    MemorySegment.copy(batch.pool(), batch.sourceOffsets()[i], batch.hostDestination(),
                            batch.destinationOffsets()[i], batch.lengths()[i]);
                    nanos[i] = ticker.nanos() - start;
                    completed++;
                }
                submitted = ticker.nanos();
                return new BatchDone(completed, nanos, null, started, submitted - started, 0);
            }
            CudaRuntime.setDevice(batch.device());
            for (int i = 0; i < n; i++) {
                stream.copyHostToDevice(batch.deviceBase() + batch.destinationOffsets()[i],
                        batch.pool().asSlice(batch.sourceOffsets()[i], batch.lengths()[i]), batch.lengths()[i]);
            }
            stream.record(done);
            submitted = ticker.nanos();
            done.synchronize();
            long finished = ticker.nanos();
            java.util.Arrays.fill(nanos, (finished - started) / Math.max(1, n));
            return new BatchDone(n, nanos, null, started, submitted - started, finished - submitted);
        } catch (RuntimeException | InternalError e) {
            if (stream != null) {
                // Copies already queued must be terminal before the batch answers: drain the stream.
                try {
                    stream.synchronize();
                } catch (RuntimeException ignored) {
                    // The stream's own error is the one reported below.
                }
            }
            return new BatchDone(completed, nanos, e, started, submitted - started, 0);
        }
    }

    private Long importIpc(byte[] handle) {
        CudaRuntime.setDevice(cudaDevice);
        CudaRuntime.IpcMapping mapping = CudaRuntime.openIpc(handle);
        imports.add(mapping);
        return mapping.address();
    }

    private Boolean closeIpc(long deviceAddress) {
        for (CudaRuntime.IpcMapping mapping : imports) {
            if (mapping.address() == deviceAddress) {
                imports.remove(mapping);
                mapping.close();
                return true;
            }
        }
        return false;
    }

    @Override
    public Future<?> stop() {
        RoleProxies.withdrawAll(context);
        consumers.forEach(MessageConsumer::unregister);
        List<AutoCloseable> owned = new ArrayList<>(imports);
        imports.clear();
        if (done != null) {
            owned.add(done);
        }
        if (stream != null) {
            owned.add(stream);
        }
        RuntimeException first = null;
        for (AutoCloseable resource : owned) {
            try {
                resource.close();
            } catch (Exception e) {
                if (first == null) {
                    first = new IllegalStateException("closing CUDA resources of " + address, e);
                } else {
                    first.addSuppressed(e);
                }
            }
        }
        return first == null ? Future.succeededFuture() : Future.failedFuture(first);
    }
}
