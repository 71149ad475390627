package io.orbitkv.perf;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import io.orbitkv.perf.replay.ReplayCommand;
import io.orbitkv.perf.report.BenchReport;
import io.orbitkv.perf.report.MachineInfo;
import io.vertx.core.json.JsonObject;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** The one option parser every bench and the replay use, and the exit codes of a bench run as a command. */
class BenchArgsTest {

    @Test
    void everyRegisteredBenchRejectsAnUnknownOptionBeforeItMeasures() {
        assertThat(Benchmarks.all().keySet()).contains("dram", "load", "jmh", "ssd", "cost-overhead", "replay");
        for (String name : Benchmarks.all().keySet()) {
            // Before it measures: a bench that ignored the option would run for minutes, not answer within seconds.
            assertTimeoutPreemptively(Duration.ofSeconds(20), () ->
                    assertThatThrownBy(() -> Benchmarks.run(name, new String[] {"--no-such-option=1"}))
                            .as(name).isInstanceOf(IllegalArgumentException.class)
                            .hasMessageContaining("--no-such-option"), name);
        }
    }

    @Test
    void theReplayCommandUsesTheSameParser() {
        int exit = new CommandLine(new ReplayCommand()).execute("--trace", "no-such.jsonl", "--limt=4");
        assertThat(exit).isEqualTo(Benchmarks.EXIT_USAGE);
    }

    @Test
    void helpListsTheOptionsTheBenchReadsWithTheirDefaults() {
        assertThatThrownBy(() -> Benchmarks.run("dram", new String[] {"--help"}))
                .isInstanceOf(BenchArgs.HelpRequested.class)
                .hasMessageContaining("--rounds (15)").hasMessageContaining("--page-bytes (2MiB)");
        assertThatThrownBy(() -> Benchmarks.run("replay", new String[] {"--help"}))
                .isInstanceOf(BenchArgs.HelpRequested.class).hasMessageContaining("--trace (required)");
    }

    @Test
    void bothSpellingsFlagsSizesAndRequiredOptions() {
        BenchArgs args = BenchArgs.parse("--rounds=3", "--dir", "/tmp/x", "--keep", "--pool-size=64KiB");
        assertThat(args.integer("rounds", 1)).isEqualTo(3);
        assertThat(args.path("dir")).hasToString("/tmp/x");
        assertThat(args.flag("keep", false)).isTrue();
        assertThat(args.bytes("pool-size", "1GiB")).isEqualTo(64L << 10);
        assertThat(args.bytesOrZero("ssd-capacity")).isZero();
        assertThat(args.required("trace")).isEmpty();
        assertThatThrownBy(args::requireAllUsed).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("missing required option(s) [--trace]");
    }

    @Test
    void malformedDuplicatedAndLateOptionsAreRefused() {
        assertThatThrownBy(() -> BenchArgs.parse("rounds=3")).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> BenchArgs.parse("--rounds=3", "--rounds=4")).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("twice");
        assertThatThrownBy(() -> BenchArgs.parse("--rounds=many").integer("rounds", 1))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("--rounds takes an integer");
        assertThatThrownBy(() -> BenchArgs.parse("--keep=maybe").flag("keep", false))
                .isInstanceOf(IllegalArgumentException.class);
        BenchArgs args = BenchArgs.parse("--concurency=4");
        args.integers("concurrency", "1");
        assertThatThrownBy(args::requireAllUsed).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("--concurency").hasMessageContaining("known: [--concurrency]");
        // An option read after the check would escape it.
        assertThatThrownBy(() -> args.integer("rounds", 1)).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void aBenchThatNeverChecksItsOptionsIsRefused() {
        Benchmarks.register("test-unchecked", args -> new JsonObject());
        try {
            assertThatThrownBy(() -> Benchmarks.run("test-unchecked", new String[0])).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("never checked its options");
        } finally {
            Benchmarks.unregister("test-unchecked");
        }
    }

    @Test
    void aReportWithFailuresExitsNonZeroAfterPrintingItsJson() {
        MachineInfo machine = new MachineInfo(2, 1L << 30, "6", "cpu", "25", "vm", 1L << 30, "Linux");
        Benchmarks.register("test-verdict", args -> {
            boolean fail = args.flag("fail", false);
            args.requireAllUsed();
            return BenchReport.builder("test-verdict").figure("mismatched_pages", fail ? 3 : 0)
                    .check(!fail, "3 restored pages differ from what was published").machine(machine).build().toJson();
        });
        try {
            verdictExitCodes();
        } finally {
            Benchmarks.unregister("test-verdict");
        }
    }

    private static void verdictExitCodes() {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int failed = Benchmarks.runCommand("test-verdict", new String[] {"--fail"}, new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8));
        String[] lines = out.toString(StandardCharsets.UTF_8).strip().split("\n");
        JsonObject report = new JsonObject(lines[lines.length - 1]);
        assertThat(failed).isEqualTo(Benchmarks.EXIT_FAILED);
        assertThat(report.getBoolean("passed")).isFalse();
        assertThat(report.getJsonArray("failures").getString(0)).contains("restored pages differ");
        assertThat(err.toString(StandardCharsets.UTF_8)).contains("FAILED");

        PrintStream sink = new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8);
        assertThat(Benchmarks.runCommand("test-verdict", new String[0], sink, sink)).isZero();
        assertThat(Benchmarks.runCommand("test-verdict", new String[] {"--fial"}, sink, sink)).isEqualTo(Benchmarks.EXIT_USAGE);
        assertThat(Benchmarks.runCommand("test-verdict", new String[] {"--help"}, sink, sink)).isZero();
    }
}
