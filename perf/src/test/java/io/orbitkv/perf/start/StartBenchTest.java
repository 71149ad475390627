package io.orbitkv.perf.start;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.perf.engine.InProcessManager;
import io.orbitkv.perf.report.BenchReport;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import org.junit.jupiter.api.Test;

/**
 * The start line reports the start, and the bench reads it: a real Manager's ready line carries its start time, the
 * bench's parser reads both figures back, and the bench's harness times a real child JVM to its line.
 */
class StartBenchTest {
    @Test
    void theReadyLineReportsTheStartAndTheBenchReadsIt() throws Exception {
        long before = System.nanoTime();
        try (InProcessManager m = InProcessManager.start("orbitkv-start-test", 8L << 20, 1L << 20, Map.of())) {
            long waitedMillis = (System.nanoTime() - before) / 1_000_000;
            long startMillis = m.manager().startDuration().toMillis();
            assertThat(startMillis).isPositive().isLessThanOrEqualTo(waitedMillis);
            String line = m.manager().readyLine(OptionalLong.of(4321));
            assertThat(line).startsWith("OrbitKV Manager ready: ")
                    .contains(", bridge off, ready in 4321 ms (Manager start " + startMillis + " ms)");
            StartBench.Reported reported = StartBench.Reported.parse(line).orElseThrow();
            assertThat(reported.readyInMillis()).isEqualTo(4321);
            assertThat(reported.managerStartMillis()).isEqualTo(startMillis);
            // without the launcher's figure the line says the Manager's own start only, and the bench flags it
            String own = m.manager().readyLine();
            assertThat(own).endsWith(", Manager start " + startMillis + " ms");
            assertThat(StartBench.Reported.parse(own)).isEmpty();
        }
    }

    @Test
    void theHarnessTimesAChildJvmToItsLineWithItsCpuTime() throws Exception {
        BenchReport.Builder report = BenchReport.builder("start-test");
        List<String> command = new ArrayList<>(StartBench.jvm(List.of("-cp", System.getProperty("java.class.path"),
                TrivialMain.class.getName())));
        StartBench.Start start = StartBench.start(command, TrivialMain.LINE, report);
        assertThat(start.line()).isEqualTo(TrivialMain.LINE);
        assertThat(start.wallMillis()).isPositive();
        assertThat(report.build().toJson().getBoolean(BenchReport.PASSED)).isTrue();
        // a line that never comes fails the run instead of timing nothing
        BenchReport.Builder missing = BenchReport.builder("start-test");
        StartBench.start(command, "OrbitKV Manager ready:", missing);
        assertThat(missing.build().toJson().getBoolean(BenchReport.PASSED)).isFalse();
    }
}
