package io.orbitkv.nativeio.cuda;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * Raw FFM downcalls into the CUDA runtime ({@code libcudart}), one handle per function, shaped exactly like the C
 * prototypes of {@code cuda_runtime_api.h} (CUDA 12/13): every function returns {@code cudaError_t} (an int);
 * pointers, streams and events are addresses; {@code size_t} is a 64-bit long. No error mapping and no lifetimes:
 * that is {@link CudaRuntime}'s job. Linking fails with {@link UnsatisfiedLinkError} when the library or a symbol is
 * missing, which the façade keeps as its unavailability cause.
 */
@SuppressWarnings("restricted") // downcall handles are the point of this class; access is granted at launch
final class CudaRuntimeBindings {
    /** Sonames tried in order; the first that loads is used. */
    static final String[] SONAMES = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
    /** {@code cudaIpcMemHandle_t}: {@code struct { char reserved[64]; }}, passed by value. */
    static final MemoryLayout IPC_HANDLE_LAYOUT = MemoryLayout.structLayout(
            MemoryLayout.sequenceLayout(CudaRuntime.IPC_HANDLE_BYTES, ValueLayout.JAVA_BYTE).withName("reserved"));

    final String soname;
    final MethodHandle getDeviceCount;     // (int* count)
    final MethodHandle setDevice;          // (int device)
    final MethodHandle getErrorName;       // const char* (cudaError_t)
    final MethodHandle getErrorString;     // const char* (cudaError_t)
    final MethodHandle runtimeGetVersion;  // (int*)
    final MethodHandle driverGetVersion;   // (int*)
    final MethodHandle hostRegister;       // (void* ptr, size_t size, unsigned flags)
    final MethodHandle hostUnregister;     // (void* ptr)
    final MethodHandle ipcGetMemHandle;    // (cudaIpcMemHandle_t* handle, void* devPtr)
    final MethodHandle ipcOpenMemHandle;   // (void** devPtr, cudaIpcMemHandle_t handle, unsigned flags)
    final MethodHandle ipcCloseMemHandle;  // (void* devPtr)
    final MethodHandle malloc;             // (void** devPtr, size_t size)
    final MethodHandle free;               // (void* devPtr)
    final MethodHandle memcpy;             // (void* dst, const void* src, size_t count, int kind)
    final MethodHandle memcpyAsync;        // (void* dst, const void* src, size_t count, int kind, cudaStream_t)
    final MethodHandle streamCreateWithFlags; // (cudaStream_t*, unsigned flags)
    final MethodHandle streamSynchronize;  // (cudaStream_t)
    final MethodHandle streamDestroy;      // (cudaStream_t)
    final MethodHandle eventCreateWithFlags; // (cudaEvent_t*, unsigned flags)
    final MethodHandle eventRecord;        // (cudaEvent_t, cudaStream_t)
    final MethodHandle eventSynchronize;   // (cudaEvent_t)
    final MethodHandle eventQuery;         // (cudaEvent_t)
    final MethodHandle eventElapsedTime;   // (float* ms, cudaEvent_t start, cudaEvent_t end)
    final MethodHandle eventDestroy;       // (cudaEvent_t)

    private CudaRuntimeBindings(String soname, SymbolLookup lookup) {
        this.soname = soname;
        Linker linker = Linker.nativeLinker();
        ValueLayout i = ValueLayout.JAVA_INT;
        ValueLayout a = ValueLayout.ADDRESS;
        ValueLayout l = ValueLayout.JAVA_LONG;
        getDeviceCount = bind(linker, lookup, "cudaGetDeviceCount", FunctionDescriptor.of(i, a));
        setDevice = bind(linker, lookup, "cudaSetDevice", FunctionDescriptor.of(i, i));
        getErrorName = bind(linker, lookup, "cudaGetErrorName", FunctionDescriptor.of(a, i));
        getErrorString = bind(linker, lookup, "cudaGetErrorString", FunctionDescriptor.of(a, i));
        runtimeGetVersion = bind(linker, lookup, "cudaRuntimeGetVersion", FunctionDescriptor.of(i, a));
        driverGetVersion = bind(linker, lookup, "cudaDriverGetVersion", FunctionDescriptor.of(i, a));
        hostRegister = bind(linker, lookup, "cudaHostRegister", FunctionDescriptor.of(i, a, l, i));
        hostUnregister = bind(linker, lookup, "cudaHostUnregister", FunctionDescriptor.of(i, a));
        ipcGetMemHandle = bind(linker, lookup, "cudaIpcGetMemHandle", FunctionDescriptor.of(i, a, a));
        ipcOpenMemHandle = bind(linker, lookup, "cudaIpcOpenMemHandle", FunctionDescriptor.of(i, a, IPC_HANDLE_LAYOUT, i));
        ipcCloseMemHandle = bind(linker, lookup, "cudaIpcCloseMemHandle", FunctionDescriptor.of(i, a));
        malloc = bind(linker, lookup, "cudaMalloc", FunctionDescriptor.of(i, a, l));
        free = bind(linker, lookup, "cudaFree", FunctionDescriptor.of(i, a));
        memcpy = bind(linker, lookup, "cudaMemcpy", FunctionDescriptor.of(i, a, a, l, i));
        memcpyAsync = bind(linker, lookup, "cudaMemcpyAsync", FunctionDescriptor.of(i, a, a, l, i, a));
        streamCreateWithFlags = bind(linker, lookup, "cudaStreamCreateWithFlags", FunctionDescriptor.of(i, a, i));
        streamSynchronize = bind(linker, lookup, "cudaStreamSynchronize", FunctionDescriptor.of(i, a));
        streamDestroy = bind(linker, lookup, "cudaStreamDestroy", FunctionDescriptor.of(i, a));
        eventCreateWithFlags = bind(linker, lookup, "cudaEventCreateWithFlags", FunctionDescriptor.of(i, a, i));
        eventRecord = bind(linker, lookup, "cudaEventRecord", FunctionDescriptor.of(i, a, a));
        eventSynchronize = bind(linker, lookup, "cudaEventSynchronize", FunctionDescriptor.of(i, a));
        eventQuery = bind(linker, lookup, "cudaEventQuery", FunctionDescriptor.of(i, a));
        eventElapsedTime = bind(linker, lookup, "cudaEventElapsedTime", FunctionDescriptor.of(i, a, a, a));
        eventDestroy = bind(linker, lookup, "cudaEventDestroy", FunctionDescriptor.of(i, a));
    }

    /**
     * Loads the first soname that exists into the global arena (the runtime is never unloaded: CUDA keeps process-wide
     * state) and links every function; throws {@link UnsatisfiedLinkError} naming what was missing.
     */
    static CudaRuntimeBindings load() {
        StringBuilder tried = new StringBuilder();
        for (String soname : SONAMES) {
            SymbolLookup lookup;
            try {
                lookup = SymbolLookup.libraryLookup(soname, Arena.global());
            } catch (IllegalArgumentException notFound) {
                tried.append(tried.isEmpty() ? "" : ", ").append(soname);
                continue;
            }
            return new CudaRuntimeBindings(soname, lookup);
        }
        throw new UnsatisfiedLinkError("CUDA runtime library not found (tried " + tried + ")");
    }

    private static MethodHandle bind(Linker linker, SymbolLookup lookup, String name, FunctionDescriptor descriptor) {
        MemorySegment symbol = lookup.find(name)
                .orElseThrow(() -> new UnsatisfiedLinkError("CUDA runtime symbol not found: " + name));
        return linker.downcallHandle(symbol, descriptor);
    }
}
