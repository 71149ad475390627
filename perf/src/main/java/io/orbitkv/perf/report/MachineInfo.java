package io.orbitkv.perf.report;

import io.vertx.core.json.JsonObject;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * The machine a benchmark ran on, recorded with every report: a figure is meaningless without the cores, memory,
 * kernel and CPU behind it (the shared build machine has 2 cores; a GPU host has 16).
 *
 * <p>Design note: Linux facts come from {@code /proc} (no process spawn, no dependency); when a file is missing, the
 * field falls back to what the JVM knows and, failing that, to {@value #UNKNOWN}, so probing never fails a benchmark.
 *
 * @param cores              processors available to this JVM (respects cgroup CPU limits)
 * @param memoryBytes        physical memory ({@code MemTotal}), 0 when unknown
 * @param kernelRelease      e.g. {@code 6.1.0-18-amd64}
 * @param cpuModel           first {@code model name} of {@code /proc/cpuinfo}
 * @param javaVersion        {@link Runtime#version()}
 * @param javaVm             VM name and vendor
 * @param maxHeapBytes       {@link Runtime#maxMemory()}
 * @param os                 OS name and architecture
 */
public record MachineInfo(int cores, long memoryBytes, String kernelRelease, String cpuModel, String javaVersion,
                          String javaVm, long maxHeapBytes, String os) {

    public static final String UNKNOWN = "unknown";

    private static final Path PROC = Path.of("/proc");

    /** Probes this machine. */
    public static MachineInfo probe() {
        return probe(PROC);
    }

    /** Probes with {@code /proc} replaced by {@code procRoot}: for tests with canned files. */
    static MachineInfo probe(Path procRoot) {
        String kernel = read(procRoot.resolve("sys/kernel/osrelease")).map(String::strip).filter(s -> !s.isEmpty())
                .or(MachineInfo::unameRelease)
                .orElse(System.getProperty("os.version", UNKNOWN));
        String cpu = read(procRoot.resolve("cpuinfo")).flatMap(MachineInfo::cpuModel).orElse(UNKNOWN);
        long memory = read(procRoot.resolve("meminfo")).flatMap(MachineInfo::memTotalBytes)
                .orElseGet(MachineInfo::jvmReportedMemoryBytes);
        return new MachineInfo(
                Runtime.getRuntime().availableProcessors(),
                memory,
                kernel,
                cpu,
                Runtime.version().toString(),
                System.getProperty("java.vm.name", UNKNOWN) + " (" + System.getProperty("java.vm.vendor", UNKNOWN) + ")",
                Runtime.getRuntime().maxMemory(),
                System.getProperty("os.name", UNKNOWN) + " " + System.getProperty("os.arch", UNKNOWN));
    }

    /** The {@code model name} of the first processor in {@code /proc/cpuinfo} text (x86; arm64 uses other keys). */
    static Optional<String> cpuModel(String cpuinfo) {
        for (String line : cpuinfo.split("\n")) {
            int colon = line.indexOf(':');
            if (colon > 0) {
                String key = line.substring(0, colon).strip();
                if (key.equals("model name") || key.equals("Model") || key.equals("cpu model")) {
                    String value = line.substring(colon + 1).strip();
                    if (!value.isEmpty()) {
                        return Optional.of(value);
                    }
                }
            }
        }
        return Optional.empty();
    }

    /** {@code MemTotal} of {@code /proc/meminfo} text, which the kernel reports in KiB despite the "kB" label. */
    static Optional<Long> memTotalBytes(String meminfo) {
        for (String line : meminfo.split("\n")) {
            if (line.startsWith("MemTotal:")) {
                String[] parts = line.substring("MemTotal:".length()).strip().split("\\s+");
                try {
                    long value = Long.parseLong(parts[0]);
                    boolean kib = parts.length > 1 && parts[1].equalsIgnoreCase("kB");
                    return Optional.of(kib ? value * 1024 : value);
                } catch (NumberFormatException e) {
                    return Optional.empty();
                }
            }
        }
        return Optional.empty();
    }

    public JsonObject toJson() {
        return new JsonObject()
                .put("cores", cores)
                .put("memory_bytes", memoryBytes)
                .put("kernel_release", kernelRelease)
                .put("cpu_model", cpuModel)
                .put("java_version", javaVersion)
                .put("java_vm", javaVm)
                .put("max_heap_bytes", maxHeapBytes)
                .put("os", os);
    }

    private static Optional<String> read(Path file) {
        try {
            return Optional.of(Files.readString(file, StandardCharsets.UTF_8));
        } catch (IOException | SecurityException e) {
            return Optional.empty();
        }
    }

    private static Optional<String> unameRelease() {
        try {
            Process uname = new ProcessBuilder("uname", "-r").redirectErrorStream(true).start();
            String out = new String(uname.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
            if (uname.waitFor(5, TimeUnit.SECONDS) && uname.exitValue() == 0 && !out.isEmpty()) {
                return Optional.of(out);
            }
            uname.destroy();
            return Optional.empty();
        } catch (IOException e) {
            return Optional.empty();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Optional.empty();
        }
    }

    private static long jvmReportedMemoryBytes() {
        if (ManagementFactory.getOperatingSystemMXBean() instanceof com.sun.management.OperatingSystemMXBean os) {
            return os.getTotalMemorySize();
        }
        return 0;
    }
}
