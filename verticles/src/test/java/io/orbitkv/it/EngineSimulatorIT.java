package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.client.sim.EngineSimulator;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/** {@code orbitkv sim} against a real Manager: it follows the lease contract and verifies every kept byte. */
@Timeout(120)
class EngineSimulatorIT {
    @RegisterExtension
    final RunningManager running = new RunningManager();

    @Test
    void theSimulatorKeepsOnlyCopiesWhoseLeaseStayedValidAndVerifiesThem() throws Exception {
        List<String> progress = new ArrayList<>();
        EngineSimulator.Result result = EngineSimulator.run(
                new EngineSimulator.Options(running.dataDir(), null, 16, 64 * 1024, 7), progress::add);
        assertThat(result.problems()).isEmpty();
        assertThat(result.ok()).isTrue();
        assertThat(result.readyQueries()).isEqualTo(4);
        assertThat(result.discardedLeases()).isZero();
        assertThat(result.verifiedBytes()).as("16 + 8 + 1 + 16 pages").isEqualTo(41L * 64 * 1024);
        assertThat(progress).anyMatch(line -> line.contains("still valid"));
    }
}
