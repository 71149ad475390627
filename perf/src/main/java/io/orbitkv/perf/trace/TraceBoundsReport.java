package io.orbitkv.perf.trace;

import io.orbitkv.perf.report.BenchReport;
import io.orbitkv.perf.report.MachineInfo;
import io.orbitkv.perf.report.Plots;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * Offline bounds of a trace as a bench report: the infinite-cache hit ratio and the LRU curve over the given
 * capacities ({@link CacheBounds}), written as {@code bounds.json} (a {@link BenchReport} named
 * {@value #BENCH_NAME}) and {@code hit_ratio_vs_capacity.png} in an output directory.
 *
 * <p>Figures carry the exact ratios (fractions in [0, 1]); {@code *_percent} companions are rounded to 0.1 as the
 * traces README quotes them, so the report can be checked against the README by eye.
 */
public final class TraceBoundsReport {

    public static final String BENCH_NAME = "trace-bounds";
    public static final String BOUNDS_FILE = "bounds.json";
    public static final String PLOT_FILE = "hit_ratio_vs_capacity.png";

    /** The capacities the traces README quotes, in blocks. */
    public static final long[] README_CAPACITIES_BLOCKS = {2_000, 5_000, 10_000, 20_000, 50_000};

    private TraceBoundsReport() {
    }

    /**
     * Simulates {@code trace} (streamed once), writes {@code bounds.json} and the plot into {@code outDir} and returns
     * the report object (the same content as the file; print it with {@code encode()} as the bench's last line).
     */
    public static JsonObject run(Path trace, long[] capacitiesBlocks, Path outDir) {
        try {
            long[] capacities = Arrays.stream(capacitiesBlocks).sorted().distinct().toArray();
            CacheBounds.Bounds bounds = CacheBounds.simulate(trace, capacities);
            BenchReport report = report(trace, bounds, MachineInfo.probe());
            report.writeTo(outDir, BOUNDS_FILE);
            plot(bounds, trace.getFileName().toString(), outDir.resolve(PLOT_FILE));
            return report.toJson();
        } catch (IOException e) {
            throw new UncheckedIOException("trace bounds of " + trace + " into " + outDir, e);
        }
    }

    static BenchReport report(Path trace, CacheBounds.Bounds bounds, MachineInfo machine) {
        JsonArray lru = new JsonArray();
        for (CacheBounds.HitRatio point : bounds.lru()) {
            lru.add(new JsonObject()
                    .put("capacity_blocks", point.capacityBlocks())
                    .put("hit_blocks", point.hitBlocks())
                    .put("hit_ratio", point.ratio())
                    .put("hit_ratio_percent", point.percentRounded()));
        }
        JsonArray capacities = new JsonArray();
        bounds.lru().forEach(point -> capacities.add(point.capacityBlocks()));
        return BenchReport.builder(BENCH_NAME)
                .figure("requests", bounds.requests())
                .figure("block_references", bounds.blockReferences())
                .figure("unique_blocks", bounds.uniqueBlocks())
                .figure("infinite_hit_blocks", bounds.infinite().hitBlocks())
                .figure("infinite_hit_ratio", bounds.infinite().ratio())
                .figure("infinite_hit_ratio_percent", bounds.infinite().percentRounded())
                .figure("lru", lru)
                .config("trace", trace.toString())
                .config("capacities_blocks", capacities)
                .config("block_tokens", TraceRequest.BLOCK_TOKENS)
                .config("counting", "per request: hits = leading run of blocks cached at arrival; then every block "
                        + "touched in order (LRU refresh or insert, evicting least recent)")
                .machine(machine)
                .build();
    }

    private static void plot(CacheBounds.Bounds bounds, String traceName, Path png) throws IOException {
        List<CacheBounds.HitRatio> lru = bounds.lru();
        List<Plots.Series> series = new ArrayList<>();
        double maxCapacity = Math.max(bounds.uniqueBlocks(),
                lru.stream().mapToLong(CacheBounds.HitRatio::capacityBlocks).max().orElse(0));
        if (!lru.isEmpty()) {
            // The curve starts at the origin: a cache of no blocks hits nothing.
            double[] x = new double[lru.size() + 1];
            double[] y = new double[lru.size() + 1];
            for (int i = 0; i < lru.size(); i++) {
                x[i + 1] = lru.get(i).capacityBlocks();
                y[i + 1] = lru.get(i).ratio();
            }
            series.add(Plots.Series.measured("LRU", x, y));
        }
        series.add(Plots.Series.horizontal(
                String.format(Locale.ROOT, "infinite cache (%.1f%%)", bounds.infinite().ratio() * 100), bounds.infinite().ratio(),
                0, maxCapacity));
        Plots.hitRatioVsCapacity(png, "Prefix-block hit ratio vs capacity: " + traceName, series,
                Plots.DEFAULT_WIDTH, Plots.DEFAULT_HEIGHT);
    }
}
