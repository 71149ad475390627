package io.orbitkv.perf;

import io.orbitkv.perf.report.BenchReport;
import io.vertx.core.json.JsonObject;
import java.io.PrintStream;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Function;

/**
 * The registry behind {@code orbitkv bench NAME} (and {@code orbitkv replay}, registered here too). The contract every
 * benchmark keeps: it reads its options through {@link BenchArgs} and checks them before it measures, measures its
 * physical or peer baseline in the same run, prints progress to stderr, and returns one JSON object (figures,
 * baselines, ratios, config, machine, passed/failures) that {@link #runCommand} prints as the last line of stdout.
 */
public final class Benchmarks {
    /** Exit code of a run whose report says it did not pass (wrong bytes, leaked leases, a failed check). */
    public static final int EXIT_FAILED = 1;
    /** Exit code for an invalid option. */
    public static final int EXIT_USAGE = 2;

    private static final Map<String, Function<BenchArgs, JsonObject>> BENCHMARKS = new TreeMap<>();

    static {
        register("dram", io.orbitkv.perf.dram.DramBench::run);
        register("cost-overhead", io.orbitkv.perf.cost.CostOverheadBench::run);
        register("load", io.orbitkv.perf.load.LoadBench::run);
        register("jmh", io.orbitkv.perf.jmh.JmhBench::run);
        register("replay", io.orbitkv.perf.replay.ReplayCommand::run);
        register("gpu-restore", io.orbitkv.perf.gpu.GpuRestoreBench::run);
        register("peer", io.orbitkv.perf.peer.PeerBench::run);
        register("start", io.orbitkv.perf.start.StartBench::run);
        register("ssd", args -> {
            try {
                return io.orbitkv.perf.ssd.SsdBench.run(args);
            } catch (IllegalArgumentException | BenchArgs.HelpRequested e) {
                throw e;
            } catch (Exception e) {
                throw new IllegalStateException("ssd bench failed: " + e.getMessage(), e);
            }
        });
    }

    private Benchmarks() {}

    public static synchronized void register(String name, Function<BenchArgs, JsonObject> bench) {
        BENCHMARKS.put(name, bench);
    }

    /** Removes a bench (tests register short-lived ones). */
    static synchronized void unregister(String name) {
        BENCHMARKS.remove(name);
    }

    public static synchronized Map<String, Function<BenchArgs, JsonObject>> all() {
        return Map.copyOf(BENCHMARKS);
    }

    /**
     * Parses {@code args} with the one parser and runs the bench. An unknown or malformed option is an
     * {@link IllegalArgumentException} thrown before anything is measured; {@code --help} a
     * {@link BenchArgs.HelpRequested}.
     */
    public static JsonObject run(String name, String[] args) {
        Function<BenchArgs, JsonObject> bench = all().get(name);
        if (bench == null) {
            throw new IllegalArgumentException("unknown benchmark '" + name + "'; known: " + String.join(", ", all().keySet()));
        }
        BenchArgs parsed = BenchArgs.parse(args);
        JsonObject report = bench.apply(parsed);
        if (!parsed.checked()) {
            throw new IllegalStateException("bench " + name + " never checked its options (BenchArgs.requireAllUsed)");
        }
        return report;
    }

    /**
     * Runs a bench as a command: the report on the last stdout line; exit 0 when it passed, {@link #EXIT_FAILED} when
     * its report lists failures, {@link #EXIT_USAGE} for an invalid option ({@code --help}: the usage, exit 0).
     */
    public static int runCommand(String name, String[] args, PrintStream out, PrintStream err) {
        JsonObject report;
        try {
            report = run(name, args);
        } catch (BenchArgs.HelpRequested help) {
            out.println("orbitkv " + ("replay".equals(name) ? "replay" : "bench " + name) + " " + help.getMessage());
            return 0;
        } catch (IllegalArgumentException e) {
            err.println("orbitkv " + name + ": " + e.getMessage());
            return EXIT_USAGE;
        }
        out.flush();
        out.println(report.encode());
        out.flush();
        if (!BenchReport.passed(report)) {
            err.println("orbitkv " + name + ": FAILED: " + report.getJsonArray(BenchReport.FAILURES));
            return EXIT_FAILED;
        }
        return 0;
    }
}
