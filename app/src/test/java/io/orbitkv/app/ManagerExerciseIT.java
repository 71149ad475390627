package io.orbitkv.app;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code manager --exit-when-ready --exercise N}, what the launcher's start-up cache recording runs: the Manager
 * starts, the engine simulator publishes, queries, copies out and verifies against it N times, and the Manager stops in
 * order with exit 0, in its own process.
 */
class ManagerExerciseIT {
    @TempDir
    Path dir;

    @Test
    void theExerciseRunsTheSimulatorAgainstTheManagerBeforeItStops() throws Exception {
        List<String> command = new ArrayList<>(ClusterCommand.managerCommand());
        command.addAll(List.of("--exit-when-ready", "--exercise", "2", "--data-dir", dir.resolve("data").toString(),
                "--pool-size", "64MiB", "--grpc-port", "0", "--metrics-port", "0"));
        Path err = dir.resolve("err");
        Path out = dir.resolve("out");
        Process process = new ProcessBuilder(command).redirectError(err.toFile()).redirectOutput(out.toFile()).start();
        try {
            assertThat(process.waitFor(120, TimeUnit.SECONDS)).as("the Manager exits").isTrue();
        } finally {
            process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        }
        String stderr = Files.readString(err, StandardCharsets.UTF_8);
        assertThat(process.exitValue()).as(stderr).isZero();
        // Two rounds of 16 pages of 64 KiB, each round's three READY prefixes (16, 8, 1 pages) and the longer chain.
        assertThat(stderr).contains("exercised 2 rounds, " + 2L * (16 + 8 + 1 + 16) * 64 * 1024 + " bytes verified");
        assertThat(Files.readString(out, StandardCharsets.UTF_8)).contains("ready");
    }
}
