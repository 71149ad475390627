package io.orbitkv.perf.report;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

class MachineInfoTest {

    @Test
    void readsKernelCpuAndMemoryFromProcFiles(@TempDir Path proc) throws IOException {
        Files.createDirectories(proc.resolve("sys/kernel"));
        Files.writeString(proc.resolve("sys/kernel/osrelease"), "6.1.0-42-amd64\n");
        Files.writeString(proc.resolve("cpuinfo"), """
                processor\t: 0
                vendor_id\t: GenuineIntel
                model name\t: Intel(R) Xeon(R) Platinum 8480+
                flags\t\t: fpu vme

                processor\t: 1
                model name\t: Intel(R) Xeon(R) Platinum 8480+
                """);
        Files.writeString(proc.resolve("meminfo"), """
                MemTotal:       24591232 kB
                MemFree:         1234567 kB
                """);

        MachineInfo machine = MachineInfo.probe(proc);

        assertThat(machine.kernelRelease()).isEqualTo("6.1.0-42-amd64");
        assertThat(machine.cpuModel()).isEqualTo("Intel(R) Xeon(R) Platinum 8480+");
        assertThat(machine.memoryBytes()).isEqualTo(24_591_232L * 1024);
    }

    @Test
    void missingProcFilesFallBackWithoutFailing(@TempDir Path emptyProc) {
        MachineInfo machine = MachineInfo.probe(emptyProc);

        assertThat(machine.cpuModel()).isEqualTo(MachineInfo.UNKNOWN);
        assertThat(machine.kernelRelease()).isNotBlank();
        assertThat(machine.memoryBytes()).isPositive();
    }

    @Test
    void probesThisMachine() {
        MachineInfo machine = MachineInfo.probe();

        assertThat(machine.cores()).isEqualTo(Runtime.getRuntime().availableProcessors());
        assertThat(machine.memoryBytes()).isGreaterThan(machine.maxHeapBytes() / 2);
        assertThat(machine.kernelRelease()).isEqualTo(System.getProperty("os.version"));
        assertThat(machine.javaVersion()).isEqualTo(Runtime.version().toString());
        assertThat(machine.toJson().fieldNames()).contains(
                "cores", "memory_bytes", "kernel_release", "cpu_model", "java_version");
    }
}
