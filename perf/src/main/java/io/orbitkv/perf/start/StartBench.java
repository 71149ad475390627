package io.orbitkv.perf.start;

import io.orbitkv.perf.BenchArgs;
import io.orbitkv.perf.report.BenchReport;
import io.orbitkv.perf.report.Bootstrap;
import io.orbitkv.perf.report.MachineInfo;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * {@code orbitkv bench start}: how long a single-host Manager takes from {@code java} being started to its ready line,
 * on an empty data directory with the default configuration ({@code conf/orbitkv.yaml} when present; ports 0), against
 * the JVM's own start of a trivial main ({@link TrivialMain}) from the same jar with the same flags. Each round starts
 * the trivial main, the Manager without the start-up cache and, when the jar has one, the Manager with it (the
 * launcher's default), in an order that rotates per round; every Manager runs {@code --exit-when-ready} (stops in order
 * and exits). Per start: the wall time from spawn to the line as this harness sees it, the {@code ready in N ms} the
 * Manager reports (JVM start to ready), its {@code Manager start} and the CPU time the process had used by then
 * ({@code /proc}: robust to a loaded machine, where wall times swing). Headline: {@code start_ratio}, the median
 * launcher-default start over the median trivial JVM start.
 */
public final class StartBench {
    static final Pattern READY_IN = Pattern.compile("OrbitKV Manager ready: .*, ready in (\\d+) ms \\(Manager start (\\d+) ms\\)");
    static final double TARGET_MS = 1500;
    private static final long CLOCK_TICKS_PER_SECOND = 100; // USER_HZ on Linux/x86-64

    private StartBench() {}

    /** What a Manager's ready line says about its start; empty when the line does not carry it. */
    record Reported(long readyInMillis, long managerStartMillis) {
        static Optional<Reported> parse(String line) {
            Matcher m = READY_IN.matcher(line);
            return m.find() ? Optional.of(new Reported(Long.parseLong(m.group(1)), Long.parseLong(m.group(2))))
                    : Optional.empty();
        }
    }

    /** One start: the harness's wall time to the awaited line, the CPU time used by then (-1 unknown), the line. */
    record Start(double wallMillis, double cpuMillis, String line) {}

    public static JsonObject run(BenchArgs args) {
        int runs = args.integer("runs", 5);
        Path jar = args.has("jar") ? args.path("jar") : runningJar();
        Path cache = args.has("aot-cache") ? args.path("aot-cache") : jar.resolveSibling("orbitkv.aot");
        args.requireAllUsed();
        if (runs < 1) {
            throw new IllegalArgumentException("--runs must be at least 1, got " + runs);
        }
        if (!Files.isRegularFile(jar)) {
            throw new IllegalArgumentException("no jar at " + jar + ": run from the fat jar or pass --jar");
        }
        boolean cached = Files.isRegularFile(cache) && cacheNewerThan(cache, jar);
        BenchReport.Builder report = BenchReport.builder("start").machine(MachineInfo.probe())
                .config("runs", runs).config("jar", jar.toString()).config("aot_cache", cached ? cache.toString() : "none")
                .config("available_processors", Runtime.getRuntime().availableProcessors());
        List<Start> trivial = new ArrayList<>();
        List<Start> plain = new ArrayList<>();
        List<Start> withCache = new ArrayList<>();
        List<Reported> reported = new ArrayList<>();
        for (int round = 0; round < runs; round++) {
            for (int step = 0; step < 3; step++) {
                int which = (round + step) % 3; // rotate the order per round
                try {
                    switch (which) {
                        case 0 -> trivial.add(start(jvm(List.of("-cp", jar.toString(), TrivialMain.class.getName())),
                                TrivialMain.LINE, report));
                        case 1 -> plain.add(manager(jar, List.of(), report, reported));
                        default -> {
                            if (cached) {
                                withCache.add(manager(jar, List.of("-XX:AOTCache=" + cache), report, reported));
                            }
                        }
                    }
                } catch (IOException | InterruptedException e) {
                    report.failure("a start failed: " + e);
                }
            }
        }
        List<Start> launcherDefault = cached ? withCache : plain;
        double trivialMs = median(trivial, Start::wallMillis);
        double defaultMs = median(launcherDefault, Start::wallMillis);
        if (trivialMs > 0 && defaultMs > 0) {
            report.topLevelRatio("start_ratio", defaultMs, trivialMs);
        }
        report.figure("ready_ms_median", defaultMs)
                .figure("ready_cpu_ms_median", median(launcherDefault, Start::cpuMillis))
                .figure("ready_ms_median_without_cache", median(plain, Start::wallMillis))
                .figure("ready_cpu_ms_median_without_cache", median(plain, Start::cpuMillis))
                .figure("reported_ready_in_ms_median", Bootstrap.median(reported.stream()
                        .mapToDouble(Reported::readyInMillis).toArray()))
                .figure("reported_manager_start_ms_median", Bootstrap.median(reported.stream()
                        .mapToDouble(Reported::managerStartMillis).toArray()))
                .figure("ready_ms", new JsonArray(launcherDefault.stream().map(s -> (Object) s.wallMillis()).toList()))
                .figure("ready_ms_without_cache", new JsonArray(plain.stream().map(s -> (Object) s.wallMillis()).toList()))
                .baseline("jvm_trivial_main_ms_median", trivialMs)
                .baseline("jvm_trivial_main_cpu_ms_median", median(trivial, Start::cpuMillis))
                .figure("target_ms", TARGET_MS)
                .figure("target_met", defaultMs > 0 && defaultMs < TARGET_MS);
        if (cached && !plain.isEmpty()) {
            report.ratio("cache_speedup", median(plain, Start::wallMillis), defaultMs);
        }
        return report.build().toJson();
    }

    private static Start manager(Path jar, List<String> extra, BenchReport.Builder report, List<Reported> reported)
            throws IOException, InterruptedException {
        Path dir = Files.createTempDirectory("orbitkv-start-bench");
        try {
            List<String> args = new ArrayList<>(extra);
            args.addAll(List.of("-jar", jar.toString(), "manager", "--exit-when-ready", "--data-dir",
                    dir.resolve("data").toString(), "--grpc-port", "0", "--metrics-port", "0"));
            Start s = start(jvm(args), "OrbitKV Manager ready:", report);
            Optional<Reported> r = Reported.parse(s.line());
            report.check(r.isPresent(), "the ready line does not say how long the start took: " + s.line());
            r.ifPresent(reported::add);
            return s;
        } finally {
            try (Stream<Path> files = Files.walk(dir)) {
                for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(p);
                }
            }
        }
    }

    /** {@code java} of this JVM with the launcher's flags, JVM log warnings on stderr, then {@code args}. */
    static List<String> jvm(List<String> args) {
        String java = ProcessHandle.current().info().command().orElse(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        List<String> command = new ArrayList<>(List.of(java, "--enable-native-access=ALL-UNNAMED",
                "--sun-misc-unsafe-memory-access=allow", "-Xlog:disable", "-Xlog:all=warning:stderr"));
        command.addAll(args);
        return command;
    }

    /**
     * Starts {@code command}, waits for a stdout line starting with {@code awaited} (60 s at most), reads its CPU time
     * at that moment, then waits for it to exit (it must exit 0).
     */
    static Start start(List<String> command, String awaited, BenchReport.Builder report)
            throws IOException, InterruptedException {
        long spawned = System.nanoTime();
        Process process = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.DISCARD).start();
        try {
            String line = null;
            double wall = -1;
            double cpu = -1;
            try (BufferedReader out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                for (String l; (l = out.readLine()) != null; ) {
                    if (line == null && l.startsWith(awaited)) {
                        wall = (System.nanoTime() - spawned) / 1e6;
                        cpu = cpuMillis(process.pid()).orElse(-1);
                        line = l;
                    }
                }
            }
            boolean exited = process.waitFor(60, TimeUnit.SECONDS);
            report.check(line != null, "no line '" + awaited + "' from " + String.join(" ", command));
            report.check(exited && process.exitValue() == 0, "did not exit 0: " + String.join(" ", command));
            return new Start(wall, cpu, line == null ? "" : line);
        } finally {
            process.destroyForcibly();
            process.waitFor(10, TimeUnit.SECONDS);
        }
    }

    /** User + system CPU time of a running process from {@code /proc/PID/stat}; empty when it cannot be read. */
    static OptionalLong cpuMillis(long pid) {
        try {
            String stat = Files.readString(Path.of("/proc", Long.toString(pid), "stat"));
            String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
            long ticks = Long.parseLong(fields[11]) + Long.parseLong(fields[12]); // utime, stime (fields 14, 15)
            return OptionalLong.of(ticks * 1000 / CLOCK_TICKS_PER_SECOND);
        } catch (IOException | RuntimeException e) {
            return OptionalLong.empty();
        }
    }

    private static double median(List<Start> starts, java.util.function.ToDoubleFunction<Start> figure) {
        double[] values = starts.stream().mapToDouble(figure).filter(v -> v >= 0).toArray();
        return values.length == 0 ? -1 : Bootstrap.median(values);
    }

    private static boolean cacheNewerThan(Path cache, Path jar) {
        try {
            return Files.getLastModifiedTime(cache).compareTo(Files.getLastModifiedTime(jar)) > 0;
        } catch (IOException e) {
            return false;
        }
    }

    /** The jar this class was loaded from (the fat jar when run by {@code orbitkv bench start}). */
    private static Path runningJar() {
        try {
            return Path.of(StartBench.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        } catch (Exception e) {
            throw new IllegalArgumentException("cannot tell which jar runs this bench; pass --jar", e);
        }
    }
}
