package io.orbitkv.nativeio.cufile;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.orbitkv.nativeio.cuda.CudaRuntime;
import io.orbitkv.nativeio.libc.Libc;
import io.orbitkv.nativeio.libc.NativeFileDescriptor;
import io.orbitkv.nativeio.libc.NativeIoException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The cuFile façade. Where the library is absent (this project's usual machines) the unavailable path runs: the kept
 * cause, every call refused with it. Where cuFile and a GPU are present, a real file is read straight into device
 * memory at two offsets and the bytes are compared after a copy back to the host.
 */
class CuFileTest {

    @Test
    void anAbsentLibraryIsTheKeptCauseAndEveryCallRefusesWithIt() {
        assumeFalse(CuFile.isAvailable(), "cuFile is installed and working here");
        Throwable cause = CuFile.unavailabilityCause();
        assertThat(cause).isNotNull();
        if (CuFile.libraryName() == null) {
            assertThat(cause).isInstanceOf(UnsatisfiedLinkError.class).hasMessageContaining("libcufile.so.0");
        }
        assertThatThrownBy(() -> CuFile.register(0)).isInstanceOf(CuFileUnavailableException.class).hasCause(cause)
                .hasMessageContaining("cuFile unavailable");
        assertThat(CuFile.liveHandles()).isZero();
    }

    @Test
    void onAGpuAFileIsReadStraightIntoDeviceMemoryAtTheOffsetsAsked(@TempDir Path dir) throws Exception {
        assumeTrue(CuFile.isAvailable(), () -> "cuFile unavailable: " + CuFile.unavailabilityCause());
        CudaRuntime.setDevice(0);
        int bytes = 4 << 20;
        byte[] content = new byte[bytes];
        new SplittableRandom(5).nextBytes(content);
        Path file = dir.resolve("extent");
        Files.write(file, content);
        int cudaBefore = CudaRuntime.liveResources().total();
        NativeFileDescriptor fd;
        boolean direct = true;
        try {
            fd = Libc.open(file, Libc.O_RDONLY | Libc.O_DIRECT | Libc.O_CLOEXEC, 0);
        } catch (NativeIoException e) {
            // a file system without O_DIRECT (tmpfs before 6.6): cuFile's compatibility mode reads it all the same
            direct = false;
            fd = Libc.open(file, Libc.O_RDONLY | Libc.O_CLOEXEC, 0);
        }
        try (NativeFileDescriptor open = fd; Arena arena = Arena.ofConfined();
             CudaRuntime.DeviceBuffer device = CudaRuntime.malloc(bytes);
             CuFile.FileHandle handle = CuFile.register(open.fd())) {
            assertThat(CuFile.liveHandles()).isEqualTo(1);
            // the whole file at device offset 0, then its second MiB again over the device's last MiB
            assertThat(handle.read(device.address(), bytes, 0, 0)).as("O_DIRECT " + direct).isEqualTo(bytes);
            assertThat(handle.read(device.address(), 1 << 20, 1 << 20, 3 << 20)).isEqualTo(1 << 20);
            MemorySegment back = arena.allocate(bytes, 4096);
            CudaRuntime.copy(back.address(), device.address(), bytes, CudaRuntime.MEMCPY_DEVICE_TO_HOST);
            MemorySegment expected = arena.allocate(bytes, 4096);
            MemorySegment.copy(content, 0, expected, ValueLayout.JAVA_BYTE, 0, 3 << 20);
            MemorySegment.copy(content, 1 << 20, expected, ValueLayout.JAVA_BYTE, 3 << 20, 1 << 20);
            assertThat(back.mismatch(expected)).as("first differing byte").isEqualTo(-1);
        }
        assertThat(CuFile.liveHandles()).isZero();
        assertThat(CudaRuntime.liveResources().total()).isEqualTo(cudaBefore);
    }
}
