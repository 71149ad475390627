package io.orbitkv.perf;

import io.vertx.core.json.JsonObject;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Function;

/**
 * The registry behind {@code orbitkv bench NAME}. The contract every benchmark keeps: it measures its physical or
 * peer baseline in the same run, prints progress to stderr, and returns one JSON object (figures, baselines, ratios,
 * config, machine) that the launcher prints as the last line of stdout.
 */
public final class Benchmarks {
    private static final Map<String, Function<String[], JsonObject>> BENCHMARKS = new TreeMap<>();

    static {
        register("dram", io.orbitkv.perf.dram.DramBench::run);
        register("cost-overhead", io.orbitkv.perf.cost.CostOverheadBench::run);
        register("load", io.orbitkv.perf.load.LoadBench::run);
        register("jmh", io.orbitkv.perf.jmh.JmhBench::run);
        register("ssd", args -> {
            try {
                return io.orbitkv.perf.ssd.SsdBench.run(args);
            } catch (Exception e) {
                throw new IllegalStateException("ssd bench failed: " + e.getMessage(), e);
            }
        });
    }

    private Benchmarks() {}

    public static synchronized void register(String name, Function<String[], JsonObject> bench) {
        BENCHMARKS.put(name, bench);
    }

    public static synchronized Map<String, Function<String[], JsonObject>> all() {
        return Map.copyOf(BENCHMARKS);
    }

    public static JsonObject run(String name, String[] args) {
        Function<String[], JsonObject> bench = all().get(name);
        if (bench == null) {
            throw new IllegalArgumentException("unknown benchmark '" + name + "'; known: " + String.join(", ", all().keySet()));
        }
        return bench.apply(args);
    }
}
