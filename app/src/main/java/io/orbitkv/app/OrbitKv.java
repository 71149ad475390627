package io.orbitkv.app;

import io.orbitkv.client.sim.EngineSimulator;
import io.orbitkv.common.ConfigException;
import io.orbitkv.manager.ConfigSources;
import io.orbitkv.manager.Manager;
import io.orbitkv.manager.ManagerConfig;
import io.orbitkv.perf.Benchmarks;
import io.vertx.core.Vertx;
import io.vertx.core.json.JsonObject;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/** The one entry point of the fat jar: {@code orbitkv manager | sim | bench NAME | replay}. */
@Command(name = "orbitkv", mixinStandardHelpOptions = true, version = "OrbitKV 0.1.0",
        description = "KV-cache Cache Manager for LLM inference engines.",
        subcommands = {OrbitKv.ManagerCommand.class, OrbitKv.SimCommand.class, OrbitKv.BenchCommand.class})
public final class OrbitKv implements Callable<Integer> {
    /** Exit code for an invalid configuration or argument. */
    static final int EXIT_CONFIG = 2;

    public static void main(String[] args) {
        CommandLine commandLine = new CommandLine(new OrbitKv());
        for (Map.Entry<String, CommandLine> extra : ExtraCommands.all().entrySet()) {
            commandLine.addSubcommand(extra.getKey(), extra.getValue());
        }
        System.exit(commandLine.execute(args));
    }

    @Override
    public Integer call() {
        CommandLine.usage(this, System.out);
        return 0;
    }

    @Command(name = "manager", mixinStandardHelpOptions = true,
            description = "Run the Manager until interrupted. Settings: conf/orbitkv.yaml < ORBITKV_* environment < flags.")
    static final class ManagerCommand implements Callable<Integer> {
        @Option(names = "--config", description = "YAML configuration file (default: conf/orbitkv.yaml when present).")
        Path config;
        @Option(names = "--data-dir", description = "Data directory (token, socket, SSD files).")
        String dataDir;
        @Option(names = "--pool-size", description = "Shared-memory DRAM pool size, e.g. 1GiB.")
        String poolSize;
        @Option(names = "--grpc-port", description = "gRPC TCP port on grpc.tcp-host.")
        String grpcPort;
        @Option(names = "--metrics-port", description = "Prometheus /metrics and /health port.")
        String metricsPort;
        @Option(names = "--set", description = "Any configuration key: --set key=value (repeatable).")
        List<String> sets = new ArrayList<>();
        @Option(names = "--exit-when-ready", description = "Start, print the ready line, stop in order and exit "
                + "(start checks, `bench start`, and the launcher's start-up cache recording).")
        boolean exitWhenReady;
        @Option(names = "--exercise", defaultValue = "0", description = "With --exit-when-ready: before stopping, run "
                + "the engine simulator this many times against this Manager (the launcher's start-up cache recording "
                + "uses it, so that a Manager's first demand finds its classes loaded and its code profiled).")
        int exercise;

        @Override
        public Integer call() throws Exception {
            Map<String, String> overrides = new LinkedHashMap<>();
            put(overrides, "data-dir", dataDir);
            put(overrides, "pool.size", poolSize);
            put(overrides, "grpc.tcp-port", grpcPort);
            put(overrides, "metrics.port", metricsPort);
            for (String set : sets) {
                int eq = set.indexOf('=');
                if (eq <= 0) {
                    System.err.println("orbitkv: --set takes key=value, got '" + set + "'");
                    return EXIT_CONFIG;
                }
                overrides.put(set.substring(0, eq).strip(), set.substring(eq + 1).strip());
            }
            Path yaml = config != null ? config : (Files.isReadable(Path.of("conf/orbitkv.yaml")) ? Path.of("conf/orbitkv.yaml") : null);
            ManagerConfig managerConfig;
            Vertx configVertx = Vertx.vertx();
            try {
                managerConfig = ManagerConfig.from(ConfigSources.gather(configVertx, yaml, System.getenv(), overrides)
                        .await(30, TimeUnit.SECONDS));
            } catch (ConfigException e) {
                System.err.println("orbitkv: " + e.getMessage());
                return EXIT_CONFIG;
            } finally {
                configVertx.close();
            }
            Manager manager;
            try {
                manager = Manager.start(managerConfig).await(120, TimeUnit.SECONDS);
            } catch (ConfigException e) {
                System.err.println("orbitkv: " + e.getMessage());
                return EXIT_CONFIG;
            } catch (Exception e) {
                System.err.println("orbitkv: the Manager could not start: " + e.getMessage());
                return 1;
            }
            String ready = manager.readyLine(processToReadyMillis());
            if (exitWhenReady) {
                if (exercise > 0 && !exercise(managerConfig.dataDir())) {
                    manager.close();
                    return 1;
                }
                System.out.println(ready);
                System.out.flush();
                manager.close();
                return 0;
            }
            CountDownLatch stopped = new CountDownLatch(1);
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                try {
                    manager.close();
                } catch (Exception e) {
                    System.err.println("orbitkv: stop failed: " + e);
                }
                stopped.countDown();
            }, "orbitkv-shutdown"));
            System.out.println(ready);
            System.out.flush();
            stopped.await();
            return 0;
        }

        /** Runs the engine simulator {@code exercise} times over the Unix socket (16 pages of 64 KiB, a seed each). */
        private boolean exercise(Path dataDir) throws Exception {
            long verified = 0;
            for (int round = 0; round < exercise; round++) {
                EngineSimulator.Result result = EngineSimulator.run(
                        new EngineSimulator.Options(dataDir, null, 16, 64 * 1024, round + 1), progress -> {});
                if (!result.ok()) {
                    System.err.println("orbitkv: the exercise failed: " + result.toJson().encode());
                    return false;
                }
                verified += result.verifiedBytes();
            }
            System.err.println("orbitkv: exercised " + exercise + " rounds, " + verified + " bytes verified");
            return true;
        }

        /** From this JVM's start (as the JVM recorded it, at millisecond resolution) to now. */
        private static OptionalLong processToReadyMillis() {
            return OptionalLong.of(java.lang.management.ManagementFactory.getRuntimeMXBean().getUptime());
        }

        private static void put(Map<String, String> map, String key, String value) {
            if (value != null) {
                map.put(key, value);
            }
        }
    }

    @Command(name = "sim", mixinStandardHelpOptions = true,
            description = "Engine simulator: register, publish synthetic KV, query prefixes, copy READY pages out, verify every byte, release.")
    static final class SimCommand implements Callable<Integer> {
        @Option(names = "--data-dir", defaultValue = "./data", description = "The Manager's data directory (socket and token). Default ./data")
        Path dataDir;
        @Option(names = "--tcp", description = "host:port instead of the Unix socket.")
        String tcp;
        @Option(names = "--pages", defaultValue = "64", description = "Pages to publish (default 64).")
        int pages;
        @Option(names = "--page-bytes", defaultValue = "262144", description = "Bytes per page (default 256 KiB).")
        long pageBytes;
        @Option(names = "--seed", defaultValue = "1", description = "Synthetic KV seed.")
        long seed;

        @Override
        public Integer call() throws Exception {
            EngineSimulator.Options options = new EngineSimulator.Options(dataDir, tcp, pages, pageBytes, seed);
            EngineSimulator.Result result;
            try {
                result = EngineSimulator.run(options, System.err::println);
            } catch (io.orbitkv.client.OrbitKvException e) {
                System.err.println("orbitkv sim: the Manager refused a call: " + e.getMessage());
                return 1;
            } catch (java.nio.file.NoSuchFileException e) {
                System.err.println("orbitkv sim: no Manager data directory here (" + e.getMessage()
                        + "): start ./scripts/orbitkv manager, or pass --data-dir");
                return 1;
            }
            System.out.println(result.toJson().encode());
            return result.ok() ? 0 : 1;
        }
    }

    @Command(name = "bench", mixinStandardHelpOptions = true,
            description = "Run a benchmark; its last stdout line is one JSON object with figures, baselines and ratios.")
    static final class BenchCommand implements Callable<Integer> {
        @Parameters(index = "0", description = "Benchmark name: ${COMPLETION-CANDIDATES}", completionCandidates = BenchNames.class)
        String name;
        @CommandLine.Unmatched
        List<String> args = new ArrayList<>();

        @Override
        public Integer call() {
            // The bench's own options go through the one bench parser (unknown ones refused, --help lists them).
            return Benchmarks.runCommand(name, args.toArray(String[]::new), System.out, System.err);
        }
    }

    static final class BenchNames implements Iterable<String> {
        @Override
        public java.util.Iterator<String> iterator() {
            return Benchmarks.all().keySet().iterator();
        }
    }
}
