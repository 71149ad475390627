package io.orbitkv.nativeio.cufile;

import io.orbitkv.nativeio.cuda.CudaRuntime;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Typed façade over cuFile (GPUDirect Storage): reads of SSD extents straight into device memory, the
 * {@code CUFILE} restore route.
 *
 * <p>Design note (probe once, keep the cause): the library ({@code libcufile.so.0}, then {@code libcufile.so}) is
 * loaded and linked when this class initializes; then, only if the CUDA runtime is available, the driver is opened
 * ({@code cuFileDriverOpen}) once. A missing library or symbol, an unavailable CUDA runtime, or a driver-open error
 * makes the façade unavailable with that cause, kept in a {@code static final} field; every entry point throws
 * {@link CuFileUnavailableException} carrying it. The driver stays open for the process's life (closing it while
 * another thread reads is undefined). Ownership: a {@link FileHandle} (a registered descriptor) is closed exactly once
 * by its owner and counted in {@link #liveHandles()}. Reads block the calling thread: worker threads only.
 */
@SuppressWarnings("restricted")
public final class CuFile {
    static final String[] SONAMES = {"libcufile.so.0", "libcufile.so"};
    /** {@code CU_FILE_HANDLE_TYPE_OPAQUE_FD}. */
    private static final int HANDLE_TYPE_OPAQUE_FD = 1;
    /** {@code CUfileError_t}: {@code struct { CUfileOpError err; CUresult cu_err; }}, returned by value. */
    private static final StructLayout ERROR_LAYOUT = MemoryLayout.structLayout(
            ValueLayout.JAVA_INT.withName("err"), ValueLayout.JAVA_INT.withName("cu_err"));
    /** {@code CUfileDescr_t}: {@code { int type; union { int fd; void* handle; } handle; const CUfileFSOps_t* fs_ops; }}. */
    private static final StructLayout DESCR_LAYOUT = MemoryLayout.structLayout(
            ValueLayout.JAVA_INT.withName("type"), MemoryLayout.paddingLayout(4),
            ValueLayout.ADDRESS.withName("handle"), ValueLayout.ADDRESS.withName("fs_ops"));

    private static final MethodHandle DRIVER_OPEN;       // CUfileError_t cuFileDriverOpen(void)
    private static final MethodHandle HANDLE_REGISTER;   // CUfileError_t cuFileHandleRegister(CUfileHandle_t*, CUfileDescr_t*)
    private static final MethodHandle HANDLE_DEREGISTER; // void cuFileHandleDeregister(CUfileHandle_t)
    private static final MethodHandle READ;              // ssize_t cuFileRead(CUfileHandle_t, void*, size_t, off_t, off_t)
    private static final String LIBRARY;
    private static final Throwable UNAVAILABILITY_CAUSE;
    private static final AtomicInteger LIVE_HANDLES = new AtomicInteger();

    static {
        MethodHandle open = null;
        MethodHandle register = null;
        MethodHandle deregister = null;
        MethodHandle read = null;
        String library = null;
        Throwable cause = null;
        try {
            SymbolLookup lookup = null;
            StringBuilder tried = new StringBuilder();
            for (String soname : SONAMES) {
                try {
                    lookup = SymbolLookup.libraryLookup(soname, Arena.global());
                    library = soname;
                    break;
                } catch (IllegalArgumentException notFound) {
                    tried.append(tried.isEmpty() ? "" : ", ").append(soname);
                }
            }
            if (lookup == null) {
                throw new UnsatisfiedLinkError("cuFile library not found (tried " + tried + ")");
            }
            Linker linker = Linker.nativeLinker();
            open = linker.downcallHandle(find(lookup, "cuFileDriverOpen"), FunctionDescriptor.of(ERROR_LAYOUT));
            register = linker.downcallHandle(find(lookup, "cuFileHandleRegister"),
                    FunctionDescriptor.of(ERROR_LAYOUT, ValueLayout.ADDRESS, ValueLayout.ADDRESS));
            deregister = linker.downcallHandle(find(lookup, "cuFileHandleDeregister"),
                    FunctionDescriptor.ofVoid(ValueLayout.ADDRESS));
            read = linker.downcallHandle(find(lookup, "cuFileRead"), FunctionDescriptor.of(ValueLayout.JAVA_LONG,
                    ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG,
                    ValueLayout.JAVA_LONG));
            if (!CudaRuntime.isAvailable()) {
                throw new IllegalStateException("cuFile needs the CUDA runtime: " + CudaRuntime.unavailabilityCause().getMessage(),
                        CudaRuntime.unavailabilityCause());
            }
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment status = (MemorySegment) open.invokeExact((java.lang.foreign.SegmentAllocator) arena);
                int err = status.get(ValueLayout.JAVA_INT, 0);
                if (err != 0) {
                    throw new CuFileException("cuFileDriverOpen", err, status.get(ValueLayout.JAVA_INT, 4));
                }
            }
        } catch (Throwable t) {
            cause = t;
        }
        DRIVER_OPEN = open;
        HANDLE_REGISTER = register;
        HANDLE_DEREGISTER = deregister;
        READ = read;
        LIBRARY = library;
        UNAVAILABILITY_CAUSE = cause;
    }

    private CuFile() {}

    private static MemorySegment find(SymbolLookup lookup, String name) {
        return lookup.find(name).orElseThrow(() -> new UnsatisfiedLinkError("cuFile symbol not found: " + name));
    }

    public static boolean isAvailable() {
        return UNAVAILABILITY_CAUSE == null;
    }

    /** Why cuFile is unavailable, or null when it is available. */
    public static Throwable unavailabilityCause() {
        return UNAVAILABILITY_CAUSE;
    }

    /** The soname that loaded, or null when no cuFile library exists on this machine. */
    public static String libraryName() {
        return LIBRARY;
    }

    public static int liveHandles() {
        return LIVE_HANDLES.get();
    }

    private static void ensureAvailable(String what) {
        if (UNAVAILABILITY_CAUSE != null) {
            throw new CuFileUnavailableException(what, UNAVAILABILITY_CAUSE);
        }
    }

    /** Registers an open file descriptor (opened with O_DIRECT by its owner, who keeps it open until close). */
    public static FileHandle register(int fd) {
        ensureAvailable("cuFileHandleRegister");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment descr = arena.allocate(DESCR_LAYOUT);
            descr.set(ValueLayout.JAVA_INT, 0, HANDLE_TYPE_OPAQUE_FD);
            descr.set(ValueLayout.JAVA_INT, 8, fd);
            MemorySegment out = arena.allocate(ValueLayout.ADDRESS);
            MemorySegment status = (MemorySegment) HANDLE_REGISTER.invokeExact((java.lang.foreign.SegmentAllocator) arena, out, descr);
            int err = status.get(ValueLayout.JAVA_INT, 0);
            if (err != 0) {
                throw new CuFileException("cuFileHandleRegister", err, status.get(ValueLayout.JAVA_INT, 4));
            }
            LIVE_HANDLES.incrementAndGet();
            return new FileHandle(out.get(ValueLayout.ADDRESS, 0));
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("cuFileHandleRegister downcall failed", t);
        }
    }

    /** A descriptor registered with cuFile; reads go straight from the file into device memory. */
    public static final class FileHandle implements AutoCloseable {
        private final MemorySegment handle;
        private final AtomicInteger closed = new AtomicInteger();

        private FileHandle(MemorySegment handle) {
            this.handle = handle;
        }

        /** Reads {@code bytes} at {@code fileOffset} into {@code devicePointer + deviceOffset}; blocks; returns bytes read. */
        public long read(long devicePointer, long bytes, long fileOffset, long deviceOffset) {
            long n;
            try {
                n = (long) READ.invokeExact(handle, MemorySegment.ofAddress(devicePointer), bytes, fileOffset, deviceOffset);
            } catch (RuntimeException | Error e) {
                throw e;
            } catch (Throwable t) {
                throw new IllegalStateException("cuFileRead downcall failed", t);
            }
            if (n < 0) {
                throw new CuFileException("cuFileRead", (int) -n, 0);
            }
            return n;
        }

        @Override
        public void close() {
            if (closed.getAndSet(1) == 0) {
                LIVE_HANDLES.decrementAndGet();
                try {
                    HANDLE_DEREGISTER.invokeExact(handle);
                } catch (RuntimeException | Error e) {
                    throw e;
                } catch (Throwable t) {
                    throw new IllegalStateException("cuFileHandleDeregister downcall failed", t);
                }
            }
        }
    }
}
