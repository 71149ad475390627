package io.orbitkv.nativeio.cuda;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Typed façade over the CUDA runtime calls a Manager-executed restore needs: device count and selection, host
 * registration (pinning) of the pool mapping, CUDA IPC import of engine allocations, streams, asynchronous copies and
 * events, plus device allocations and synchronous copies for qualification and tests.
 *
 * <p>Design note (probe once, keep the cause): the library is loaded and {@code cudaGetDeviceCount} called once, when
 * this class initializes, into {@code static final} fields. A missing library or symbol, a runtime error (on a
 * machine with the runtime but no driver: 35, {@code cudaErrorInsufficientDriver}) or zero devices makes the façade
 * unavailable with that cause; every entry point then throws {@link CudaUnavailableException} carrying it, and nothing
 * is retried. Ownership: every native resource this façade hands out (a host registration, an IPC mapping, a device
 * buffer, a stream, an event) is an {@link AutoCloseable} whose idempotent {@code close()} releases it and decrements
 * a live counter ({@link #liveResources()}); tests assert those counters return to zero. Concurrency: CUDA's current
 * device is per thread, so callers {@link #setDevice} on the thread that issues calls (the restore role's per-device
 * worker); the handles themselves are thread-safe. Calls that wait ({@link CudaEvent#synchronize()},
 * {@link CudaStream#synchronize()}, {@link #copy}) block the calling thread: call them from worker threads only.
 */
public final class CudaRuntime {
    /** Bytes of a {@code cudaIpcMemHandle_t}. */
    public static final int IPC_HANDLE_BYTES = 64;
    public static final int MEMCPY_HOST_TO_DEVICE = 1;
    public static final int MEMCPY_DEVICE_TO_HOST = 2;
    public static final int MEMCPY_DEVICE_TO_DEVICE = 3;
    /** {@code cudaHostRegisterPortable}: the pinning is visible to every CUDA context of the process. */
    public static final int HOST_REGISTER_PORTABLE = 1;
    private static final int IPC_LAZY_ENABLE_PEER_ACCESS = 1;
    private static final int STREAM_NON_BLOCKING = 1;
    private static final int EVENT_DISABLE_TIMING = 2;
    private static final int ERROR_NOT_READY = 600;

    private static final CudaRuntimeBindings BINDINGS;
    private static final int DEVICE_COUNT;
    private static final Throwable UNAVAILABILITY_CAUSE;

    private static final AtomicInteger LIVE_HOST_REGISTRATIONS = new AtomicInteger();
    private static final AtomicInteger LIVE_IPC_MAPPINGS = new AtomicInteger();
    private static final AtomicInteger LIVE_DEVICE_BUFFERS = new AtomicInteger();
    private static final AtomicInteger LIVE_STREAMS = new AtomicInteger();
    private static final AtomicInteger LIVE_EVENTS = new AtomicInteger();

    static {
        CudaRuntimeBindings bindings = null;
        int devices = 0;
        Throwable cause = null;
        try {
            bindings = CudaRuntimeBindings.load();
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment count = arena.allocate(ValueLayout.JAVA_INT);
                int rc = (int) bindings.getDeviceCount.invokeExact(count);
                if (rc != 0) {
                    cause = error(bindings, "cudaGetDeviceCount", rc);
                } else {
                    devices = count.get(ValueLayout.JAVA_INT, 0);
                    if (devices <= 0) {
                        cause = new CudaException("cudaGetDeviceCount", CudaException.NO_DEVICE, "cudaErrorNoDevice",
                                "the driver reports no CUDA device");
                    }
                }
            }
        } catch (Throwable t) {
            cause = t;
        }
        BINDINGS = bindings;
        DEVICE_COUNT = cause == null ? devices : 0;
        UNAVAILABILITY_CAUSE = cause;
    }

    private CudaRuntime() {}

    public static boolean isAvailable() {
        return UNAVAILABILITY_CAUSE == null;
    }

    /** Why CUDA is unavailable (a {@link CudaException} or the link error), or null when it is available. */
    public static Throwable unavailabilityCause() {
        return UNAVAILABILITY_CAUSE;
    }

    /** Whether the runtime library itself loaded (it may still lack a driver or a device). */
    public static boolean libraryLoaded() {
        return BINDINGS != null;
    }

    /** The soname that loaded, or null. */
    public static String libraryName() {
        return BINDINGS == null ? null : BINDINGS.soname;
    }

    /** Devices found by the probe; 0 when unavailable. */
    public static int deviceCount() {
        return DEVICE_COUNT;
    }

    private static void ensureAvailable(String what) {
        if (UNAVAILABILITY_CAUSE != null) {
            throw new CudaUnavailableException(what, UNAVAILABILITY_CAUSE);
        }
    }

    /** Makes {@code device} current on the calling thread. */
    public static void setDevice(int device) {
        ensureAvailable("cudaSetDevice");
        if (device < 0 || device >= DEVICE_COUNT) {
            throw new IllegalArgumentException("CUDA device " + device + " out of range [0, " + DEVICE_COUNT + ")");
        }
        check("cudaSetDevice", invokeInt(BINDINGS.setDevice, device));
    }

    /** The runtime's version (e.g. 13000); works without a driver once the library loaded, else -1. */
    public static int runtimeVersion() {
        if (BINDINGS == null) {
            return -1;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(ValueLayout.JAVA_INT);
            int rc = invokeInt(BINDINGS.runtimeGetVersion, out);
            return rc == 0 ? out.get(ValueLayout.JAVA_INT, 0) : -1;
        }
    }

    /** The driver's CUDA version; 0 when no driver is installed, -1 when the library did not load. */
    public static int driverVersion() {
        if (BINDINGS == null) {
            return -1;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(ValueLayout.JAVA_INT);
            int rc = invokeInt(BINDINGS.driverGetVersion, out);
            return rc == 0 ? out.get(ValueLayout.JAVA_INT, 0) : -1;
        }
    }

    /**
     * Pins {@code segment} (page-locked, {@code cudaHostRegisterPortable}) so copies from it are DMA; the caller keeps
     * the mapping alive until the registration is closed ({@code cudaHostUnregister} before {@code munmap}).
     */
    public static HostRegistration registerHost(MemorySegment segment) {
        ensureAvailable("cudaHostRegister");
        check("cudaHostRegister", invokeInt(BINDINGS.hostRegister, segment, segment.byteSize(), HOST_REGISTER_PORTABLE));
        LIVE_HOST_REGISTRATIONS.incrementAndGet();
        return new HostRegistration(segment);
    }

    /** Imports another process's allocation from its 64-byte IPC handle, on the calling thread's current device. */
    public static IpcMapping openIpc(byte[] handle) {
        ensureAvailable("cudaIpcOpenMemHandle");
        if (handle.length != IPC_HANDLE_BYTES) {
            throw new IllegalArgumentException("a CUDA IPC handle is " + IPC_HANDLE_BYTES + " bytes, got " + handle.length);
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(ValueLayout.ADDRESS);
            MemorySegment byValue = arena.allocate(CudaRuntimeBindings.IPC_HANDLE_LAYOUT);
            MemorySegment.copy(handle, 0, byValue, ValueLayout.JAVA_BYTE, 0, IPC_HANDLE_BYTES);
            int rc;
            try {
                rc = (int) BINDINGS.ipcOpenMemHandle.invokeExact(out, byValue, IPC_LAZY_ENABLE_PEER_ACCESS);
            } catch (Throwable t) {
                throw rethrow(t);
            }
            check("cudaIpcOpenMemHandle", rc);
            LIVE_IPC_MAPPINGS.incrementAndGet();
            return new IpcMapping(out.get(ValueLayout.ADDRESS, 0).address());
        }
    }

    /** The IPC handle of a device allocation of this process (the exporting side; qualification and tests). */
    public static byte[] ipcHandle(DeviceBuffer buffer) {
        ensureAvailable("cudaIpcGetMemHandle");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment handle = arena.allocate(CudaRuntimeBindings.IPC_HANDLE_LAYOUT);
            check("cudaIpcGetMemHandle", invokeInt(BINDINGS.ipcGetMemHandle, handle, MemorySegment.ofAddress(buffer.address())));
            return handle.toArray(ValueLayout.JAVA_BYTE);
        }
    }

    /** {@code cudaMalloc} on the calling thread's current device. */
    public static DeviceBuffer malloc(long bytes) {
        ensureAvailable("cudaMalloc");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(ValueLayout.ADDRESS);
            check("cudaMalloc", invokeInt(BINDINGS.malloc, out, bytes));
            LIVE_DEVICE_BUFFERS.incrementAndGet();
            return new DeviceBuffer(out.get(ValueLayout.ADDRESS, 0).address(), bytes);
        }
    }

    /** A synchronous {@code cudaMemcpy} (blocks); addresses are host or device pointers as {@code kind} says. */
    public static void copy(long dst, long src, long bytes, int kind) {
        ensureAvailable("cudaMemcpy");
        check("cudaMemcpy", invokeInt(BINDINGS.memcpy, MemorySegment.ofAddress(dst), MemorySegment.ofAddress(src), bytes, kind));
    }

    /** A non-blocking stream on the calling thread's current device. */
    public static CudaStream createStream() {
        ensureAvailable("cudaStreamCreateWithFlags");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(ValueLayout.ADDRESS);
            check("cudaStreamCreateWithFlags", invokeInt(BINDINGS.streamCreateWithFlags, out, STREAM_NON_BLOCKING));
            LIVE_STREAMS.incrementAndGet();
            return new CudaStream(out.get(ValueLayout.ADDRESS, 0));
        }
    }

    /** An event; {@code timing} false makes it a pure completion marker (cheaper). */
    public static CudaEvent createEvent(boolean timing) {
        ensureAvailable("cudaEventCreateWithFlags");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(ValueLayout.ADDRESS);
            check("cudaEventCreateWithFlags", invokeInt(BINDINGS.eventCreateWithFlags, out, timing ? 0 : EVENT_DISABLE_TIMING));
            LIVE_EVENTS.incrementAndGet();
            return new CudaEvent(out.get(ValueLayout.ADDRESS, 0));
        }
    }

    /** Native resources handed out and not yet closed, by kind. */
    public record LiveResources(int hostRegistrations, int ipcMappings, int deviceBuffers, int streams, int events) {
        public int total() {
            return hostRegistrations + ipcMappings + deviceBuffers + streams + events;
        }
    }

    public static LiveResources liveResources() {
        return new LiveResources(LIVE_HOST_REGISTRATIONS.get(), LIVE_IPC_MAPPINGS.get(), LIVE_DEVICE_BUFFERS.get(),
                LIVE_STREAMS.get(), LIVE_EVENTS.get());
    }

    /** A pinned host range; closing unregisters it (before the caller unmaps). */
    public static final class HostRegistration implements AutoCloseable {
        private final MemorySegment segment;
        private final AtomicInteger closed = new AtomicInteger();

        private HostRegistration(MemorySegment segment) {
            this.segment = segment;
        }

        public MemorySegment segment() {
            return segment;
        }

        @Override
        public void close() {
            if (closed.getAndSet(1) == 0) {
                LIVE_HOST_REGISTRATIONS.decrementAndGet();
                check("cudaHostUnregister", invokeInt(BINDINGS.hostUnregister, segment));
            }
        }
    }

    /** An imported allocation of another process; closing unmaps it ({@code cudaIpcCloseMemHandle}). */
    public static final class IpcMapping implements AutoCloseable {
        private final long address;
        private final AtomicInteger closed = new AtomicInteger();

        private IpcMapping(long address) {
            this.address = address;
        }

        /** The device pointer of the imported allocation in this process. */
        public long address() {
            return address;
        }

        @Override
        public void close() {
            if (closed.getAndSet(1) == 0) {
                LIVE_IPC_MAPPINGS.decrementAndGet();
                check("cudaIpcCloseMemHandle", invokeInt(BINDINGS.ipcCloseMemHandle, MemorySegment.ofAddress(address)));
            }
        }
    }

    /** A {@code cudaMalloc} allocation; closing frees it. */
    public static final class DeviceBuffer implements AutoCloseable {
        private final long address;
        private final long bytes;
        private final AtomicInteger closed = new AtomicInteger();

        private DeviceBuffer(long address, long bytes) {
            this.address = address;
            this.bytes = bytes;
        }

        public long address() {
            return address;
        }

        public long sizeBytes() {
            return bytes;
        }

        @Override
        public void close() {
            if (closed.getAndSet(1) == 0) {
                LIVE_DEVICE_BUFFERS.decrementAndGet();
                check("cudaFree", invokeInt(BINDINGS.free, MemorySegment.ofAddress(address)));
            }
        }
    }

    /** A CUDA stream; copies on it run in submission order. Closing destroys it (pending work still completes). */
    public static final class CudaStream implements AutoCloseable {
        private final MemorySegment handle;
        private final AtomicInteger closed = new AtomicInteger();

        private CudaStream(MemorySegment handle) {
            this.handle = handle;
        }

        /** Queues a host-to-device copy; {@code src} should be pinned ({@link #registerHost}) for a true async DMA. */
        public void copyHostToDevice(long deviceDst, MemorySegment src, long bytes) {
            int rc;
            try { // the hot call: exact invocation, no boxing
                rc = (int) BINDINGS.memcpyAsync.invokeExact(MemorySegment.ofAddress(deviceDst),
                        MemorySegment.ofAddress(src.address()), bytes, MEMCPY_HOST_TO_DEVICE, handle);
            } catch (Throwable t) {
                throw rethrow(t);
            }
            check("cudaMemcpyAsync", rc);
        }

        /** Queues a copy of {@code bytes} between raw addresses of the given {@code kind}. */
        public void copy(long dst, long src, long bytes, int kind) {
            check("cudaMemcpyAsync", invokeInt(BINDINGS.memcpyAsync, MemorySegment.ofAddress(dst),
                    MemorySegment.ofAddress(src), bytes, kind, handle));
        }

        /** Records {@code event} after everything queued so far. */
        public void record(CudaEvent event) {
            check("cudaEventRecord", invokeInt(BINDINGS.eventRecord, event.handle, handle));
        }

        /** Blocks until everything queued on the stream completed. */
        public void synchronize() {
            check("cudaStreamSynchronize", invokeInt(BINDINGS.streamSynchronize, handle));
        }

        @Override
        public void close() {
            if (closed.getAndSet(1) == 0) {
                LIVE_STREAMS.decrementAndGet();
                check("cudaStreamDestroy", invokeInt(BINDINGS.streamDestroy, handle));
            }
        }
    }

    /** A completion marker recorded on a stream. */
    public static final class CudaEvent implements AutoCloseable {
        private final MemorySegment handle;
        private final AtomicInteger closed = new AtomicInteger();

        private CudaEvent(MemorySegment handle) {
            this.handle = handle;
        }

        /** Blocks until the work before the event's record completed; a failed copy surfaces here. */
        public void synchronize() {
            check("cudaEventSynchronize", invokeInt(BINDINGS.eventSynchronize, handle));
        }

        /** Whether the recorded work completed, without blocking. */
        public boolean isComplete() {
            int rc = invokeInt(BINDINGS.eventQuery, handle);
            if (rc == ERROR_NOT_READY) {
                return false;
            }
            check("cudaEventQuery", rc);
            return true;
        }

        /** Milliseconds between {@code start} and this event (both timing events, both complete). */
        public float elapsedMillisSince(CudaEvent start) {
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment out = arena.allocate(ValueLayout.JAVA_FLOAT);
                check("cudaEventElapsedTime", invokeInt(BINDINGS.eventElapsedTime, out, start.handle, handle));
                return out.get(ValueLayout.JAVA_FLOAT, 0);
            }
        }

        @Override
        public void close() {
            if (closed.getAndSet(1) == 0) {
                LIVE_EVENTS.decrementAndGet();
                check("cudaEventDestroy", invokeInt(BINDINGS.eventDestroy, handle));
            }
        }
    }

    // ---- error mapping ----

    private static void check(String operation, int rc) {
        if (rc != 0) {
            throw error(BINDINGS, operation, rc);
        }
    }

    private static CudaException error(CudaRuntimeBindings bindings, String operation, int rc) {
        return new CudaException(operation, rc, cString(bindings.getErrorName, rc), cString(bindings.getErrorString, rc));
    }

    /** The runtime's static description strings (valid for the process's life); never freed. */
    private static String cString(MethodHandle function, int rc) {
        try {
            MemorySegment text = (MemorySegment) function.invokeExact(rc);
            return text.equals(MemorySegment.NULL) ? "unknown" : text.reinterpret(1024).getString(0);
        } catch (Throwable t) {
            return "unknown";
        }
    }

    private static int invokeInt(MethodHandle handle, Object... args) {
        try {
            return (int) handle.invokeWithArguments(args);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    private static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException r) {
            throw r;
        }
        if (t instanceof Error e) {
            throw e;
        }
        return new IllegalStateException("CUDA downcall failed", t);
    }
}
