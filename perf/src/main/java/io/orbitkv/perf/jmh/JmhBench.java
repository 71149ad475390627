package io.orbitkv.perf.jmh;

import io.orbitkv.perf.BenchArgs;
import io.orbitkv.perf.report.BenchReport;
import io.vertx.core.json.JsonObject;
import java.util.Collection;
import java.util.Locale;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.RunnerException;
import org.openjdk.jmh.runner.format.OutputFormatFactory;
import org.openjdk.jmh.runner.options.ChainedOptionsBuilder;
import org.openjdk.jmh.runner.options.OptionsBuilder;
import org.openjdk.jmh.runner.options.TimeValue;
import org.openjdk.jmh.runner.options.VerboseMode;

/**
 * {@code orbitkv bench jmh}: the hot-path microbenchmarks of this module through JMH's Runner API, with short
 * defaults (1 fork, 2 warm-up and 3 measurement iterations of 1 s). JMH's own log goes to stderr; the scores (ns/op
 * with their 99.9 % error) are the figures. Baselines: memcpy of the same 2 MiB (checksums), java.util.zip.CRC32 as
 * the JDK reference next to CRC32C.
 *
 * <p>Options: {@code --include=REGEX} (default: every benchmark of this module; the benchmark of a package-private
 * class lives in that class's package), {@code --forks}, {@code --warmup}, {@code --iterations}, {@code --seconds}
 * (per iteration).
 */
public final class JmhBench {
    private JmhBench() {}

    public static JsonObject run(BenchArgs a) {
        String include = a.string("include", "io\\.orbitkv\\..*Benchmark.*");
        int forks = a.integer("forks", 1);
        int warmup = a.integer("warmup", 2);
        int iterations = a.integer("iterations", 3);
        double seconds = a.decimal("seconds", 1);
        a.requireAllUsed();
        TimeValue iterationTime = TimeValue.milliseconds((long) (seconds * 1000));
        ChainedOptionsBuilder options = new OptionsBuilder().include(include).forks(forks)
                .warmupIterations(warmup).warmupTime(iterationTime)
                .measurementIterations(iterations).measurementTime(iterationTime)
                .jvmArgsAppend("--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow")
                .shouldFailOnError(true);
        Collection<RunResult> results;
        try {
            results = new Runner(options.build(), OutputFormatFactory.createFormatInstance(System.err, VerboseMode.NORMAL)).run();
        } catch (RunnerException e) {
            throw new IllegalStateException("JMH failed: " + e.getMessage(), e);
        }
        if (results.isEmpty()) {
            throw new IllegalArgumentException("no JMH benchmark matches '" + include + "' (is META-INF/BenchmarkList on the class path?)");
        }
        BenchReport.Builder report = BenchReport.builder("jmh");
        JsonObject scores = new JsonObject();
        Double crc32c = null;
        Double crc32 = null;
        Double memcpy = null;
        for (RunResult result : results) {
            String name = result.getParams().getBenchmark();
            String shortName = name.substring(name.lastIndexOf('.', name.lastIndexOf('.') - 1) + 1);
            double score = result.getPrimaryResult().getScore();
            double error = result.getPrimaryResult().getScoreError();
            JsonObject entry = new JsonObject().put("score", score)
                    .put("error", Double.isFinite(error) ? error : 0.0) // NaN with a single sample: no interval
                    .put("unit", result.getPrimaryResult().getScoreUnit())
                    .put("samples", result.getPrimaryResult().getStatistics().getN());
            for (String key : result.getParams().getParamsKeys()) {
                entry.put("param_" + key, result.getParams().getParam(key));
            }
            switch (shortName) {
                case "ChecksumBenchmark.crc32c2MiB" -> crc32c = score;
                case "ChecksumBenchmark.crc32Reference2MiB" -> crc32 = score;
                case "ChecksumBenchmark.memcpyBaseline2MiB" -> memcpy = score;
                default -> { }
            }
            if (shortName.startsWith("ChecksumBenchmark.") && score > 0) {
                entry.put("bytes_per_second", ChecksumBenchmark.BYTES * 1e9 / score);
            }
            if (shortName.equals("ChecksumBenchmark.crc32Reference2MiB") || shortName.equals("ChecksumBenchmark.memcpyBaseline2MiB")) {
                report.baseline(shortName, entry);
            } else {
                scores.put(shortName, entry);
            }
            System.err.printf(Locale.ROOT, "jmh: %s = %.1f ± %.1f %s%n", shortName, score, entry.getDouble("error"), entry.getString("unit"));
        }
        report.figure("benchmarks", scores);
        if (crc32c != null && crc32 != null) {
            report.ratio("crc32c_time_over_crc32_time", crc32c / crc32);
        }
        if (crc32c != null && memcpy != null) {
            report.topLevelRatio("crc32c_time_over_memcpy_time", crc32c / memcpy);
        }
        return report.config("include", include).config("forks", forks).config("warmup_iterations", warmup)
                .config("measurement_iterations", iterations).config("iteration_seconds", seconds)
                .config("mode", "average time, ns/op; error = 99.9% confidence half-width")
                .build().toJson();
    }
}
