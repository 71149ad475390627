package io.orbitkv.perf.rdma;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code perf/rdma/te-rdma.sh}: the checks that stop it, each with its reason and exit status 2, before any Manager
 * starts. The RDMA device directory and the library are the script's test seams, so the absent paths are exercised
 * here whatever this host has.
 */
class TeRdmaScriptTest {
    private static final Path SCRIPT = Path.of("rdma/te-rdma.sh").toAbsolutePath();

    private record Outcome(int status, String stderr) {}

    private static Outcome run(Map<String, String> env, String... args) throws Exception {
        List<String> command = new java.util.ArrayList<>(List.of("bash", SCRIPT.toString()));
        command.addAll(List.of(args));
        ProcessBuilder builder = new ProcessBuilder(command).redirectOutput(ProcessBuilder.Redirect.DISCARD);
        builder.environment().putAll(env);
        Process process = builder.start();
        String stderr = new String(process.getErrorStream().readAllBytes());
        assertThat(process.waitFor(30, TimeUnit.SECONDS)).isTrue();
        return new Outcome(process.exitValue(), stderr);
    }

    @Test
    void withoutAnRdmaDeviceItStopsSayingWhatItNeeds(@TempDir Path dir) throws Exception {
        Outcome outcome = run(Map.of("ORBITKV_INFINIBAND_SYSFS", dir.resolve("none").toString()), "--check");
        assertThat(outcome.status()).isEqualTo(2);
        assertThat(outcome.stderr()).contains("no RDMA device").contains("soft-RoCE").contains("rdma_rxe");
    }

    @Test
    void withADeviceButNoTransferEngineBuiltItStopsSayingSo(@TempDir Path dir) throws Exception {
        Path sysfs = Files.createDirectories(dir.resolve("infiniband/mlx5_0"));
        Outcome outcome = run(Map.of("ORBITKV_INFINIBAND_SYSFS", sysfs.getParent().toString(),
                "ORBITKV_MOONCAKE_LIB", dir.resolve("libtransfer_engine.so").toString()), "--check");
        assertThat(outcome.status()).isEqualTo(2);
        assertThat(outcome.stderr()).contains("mlx5_0").contains("not built").contains("build.sh");
    }

    @Test
    void aLibraryWithoutVerbsIsRefused(@TempDir Path dir) throws Exception {
        Path sysfs = Files.createDirectories(dir.resolve("infiniband/rxe0"));
        Path notVerbs = dir.resolve("libtransfer_engine.so");
        Files.writeString(notVerbs, "not a library");
        Outcome outcome = run(Map.of("ORBITKV_INFINIBAND_SYSFS", sysfs.getParent().toString(),
                "ORBITKV_MOONCAKE_LIB", notVerbs.toString()), "--check");
        assertThat(outcome.status()).isEqualTo(2);
        assertThat(outcome.stderr()).contains("not linked with libibverbs");
    }

    @Test
    void softRoceOnLoopbackIsRefused() throws Exception {
        Outcome outcome = run(Map.of(), "--soft-roce", "lo", "--check");
        assertThat(outcome.status()).isEqualTo(2);
        assertThat(outcome.stderr()).containsAnyOf("needs root", "cannot use the loopback interface");
    }
}
