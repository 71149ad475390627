package io.orbitkv.nativeio.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The CUDA façade. Here (runtime library, no driver, no GPU) the unavailable path is what runs: the probe keeps the
 * runtime's own error and every entry point refuses with it. On a machine with a GPU the real round trip runs instead.
 */
class CudaRuntimeTest {

    @AfterEach
    void nothingLeaks() {
        assertThat(CudaRuntime.liveResources().total()).as("live CUDA resources").isZero();
    }

    @Test
    void withoutADriverTheProbeKeepsTheRuntimesErrorAndEveryCallRefusesWithIt() {
        assumeFalse(CudaRuntime.isAvailable(), "a CUDA device is present");
        Throwable cause = CudaRuntime.unavailabilityCause();
        assertThat(cause).isNotNull();
        assertThat(CudaRuntime.deviceCount()).isZero();
        if (CudaRuntime.libraryLoaded() && CudaRuntime.driverVersion() == 0) {
            // This machine's case: libcudart.so.13 present, no libcuda: cudaGetDeviceCount answers 35.
            assertThat(cause).isInstanceOf(CudaException.class);
            CudaException error = (CudaException) cause;
            assertThat(error.code()).isEqualTo(CudaException.INSUFFICIENT_DRIVER);
            assertThat(error.errorName()).isEqualTo("cudaErrorInsufficientDriver");
            assertThat(error.operation()).isEqualTo("cudaGetDeviceCount");
            assertThat(CudaRuntime.runtimeVersion()).isGreaterThanOrEqualTo(12000);
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = arena.allocate(4096, 4096);
            assertRefused(() -> CudaRuntime.registerHost(host), cause);
            assertRefused(() -> CudaRuntime.openIpc(new byte[CudaRuntime.IPC_HANDLE_BYTES]), cause);
            assertRefused(() -> CudaRuntime.malloc(4096), cause);
            assertRefused(CudaRuntime::createStream, cause);
            assertRefused(() -> CudaRuntime.createEvent(false), cause);
            assertRefused(() -> CudaRuntime.setDevice(0), cause);
            assertRefused(() -> CudaRuntime.copy(0, host.address(), 16, CudaRuntime.MEMCPY_HOST_TO_DEVICE), cause);
        }
    }

    private static void assertRefused(Runnable call, Throwable cause) {
        assertThatThrownBy(call::run).isInstanceOf(CudaUnavailableException.class).hasCause(cause)
                .hasMessageContaining("CUDA unavailable");
    }

    @Test
    void onAGpuPinnedPagesCopyToTheDeviceAndBackThroughAStreamAndAnIpcHandleExports() {
        assumeTrue(CudaRuntime.isAvailable(), () -> "no CUDA device: " + CudaRuntime.unavailabilityCause());
        CudaRuntime.setDevice(0);
        long bytes = 2 << 20;
        try (Arena arena = Arena.ofShared()) {
            MemorySegment src = arena.allocate(bytes, 4096);
            MemorySegment back = arena.allocate(bytes, 4096);
            for (long i = 0; i < bytes; i += 8) {
                src.set(ValueLayout.JAVA_LONG, i, i * 0x9E3779B97F4A7C15L);
            }
            try (CudaRuntime.HostRegistration pinned = CudaRuntime.registerHost(src);
                 CudaRuntime.DeviceBuffer device = CudaRuntime.malloc(bytes);
                 CudaRuntime.CudaStream stream = CudaRuntime.createStream();
                 CudaRuntime.CudaEvent done = CudaRuntime.createEvent(false)) {
                stream.copyHostToDevice(device.address(), pinned.segment(), bytes);
                stream.record(done);
                done.synchronize();
                assertThat(done.isComplete()).isTrue();
                CudaRuntime.copy(back.address(), device.address(), bytes, CudaRuntime.MEMCPY_DEVICE_TO_HOST);
                assertThat(back.mismatch(src)).isEqualTo(-1);
                assertThat(CudaRuntime.ipcHandle(device)).hasSize(CudaRuntime.IPC_HANDLE_BYTES);
            }
        }
    }
}
