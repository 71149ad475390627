package io.orbitkv.app;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code scripts/orbitkv} rebuilds the jar only for real source changes and never while another build of the tree
 * (scripts/test) holds the build lock: runs {@code scripts/tests/launcher-build-test.sh}, which checks both on a
 * scratch copy of the scripts with stand-ins for java and mvn.
 */
class LauncherScriptTest {
    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void theLauncherRebuildsOnlyForSourcesAndNeverUnderAnotherBuild() throws Exception {
        Path script = Path.of("..", "scripts", "tests", "launcher-build-test.sh").toAbsolutePath().normalize();
        assertThat(script).exists();
        Path output = Files.createTempFile("launcher-build-test", ".out");
        try {
            ProcessBuilder builder = new ProcessBuilder("bash", script.toString()).redirectErrorStream(true)
                    .redirectOutput(output.toFile());
            builder.environment().remove("ORBITKV_BUILD_LOCK_HELD"); // the suite itself may run under scripts/test
            Process process = builder.start();
            boolean exited = process.waitFor(100, TimeUnit.SECONDS);
            if (!exited) {
                process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            }
            String text = Files.readString(output, StandardCharsets.UTF_8);
            assertThat(exited).as(text).isTrue();
            assertThat(process.exitValue()).as(text).isZero();
            assertThat(text).contains("launcher-build-test: ok");
        } finally {
            Files.deleteIfExists(output);
        }
    }
}
