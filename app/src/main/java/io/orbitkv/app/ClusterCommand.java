package io.orbitkv.app;

import io.orbitkv.clusterkit.ClusterCertificates;
import io.orbitkv.clusterkit.LocalCluster;
import io.orbitkv.clusterkit.LocalEtcd;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code orbitkv cluster certs | up | demo}: certificates, a local cluster, and its scripted demo. */
@Command(name = "cluster", mixinStandardHelpOptions = true,
        description = "Cluster tools: certificates, a local cluster of Managers on 127.0.0.1, and its demo.",
        subcommands = {ClusterCommand.Certs.class, ClusterCommand.Up.class, ClusterCommand.Demo.class})
final class ClusterCommand implements Callable<Integer> {
    @Override
    public Integer call() {
        picocli.CommandLine.usage(this, System.out);
        return 0;
    }

    /** The command that runs one Manager from this very jar (or class path), taking {@code --set key=value}. */
    static List<String> managerCommand() {
        return managerCommand(ManagementFactory.getRuntimeMXBean().getInputArguments());
    }

    /** @param jvmArguments this JVM's own arguments: its start-up cache, if any, is passed on */
    static List<String> managerCommand(List<String> jvmArguments) {
        String java = ProcessHandle.current().info().command().orElse("java");
        List<String> command = new ArrayList<>(List.of(java, "--enable-native-access=ALL-UNNAMED",
                "--sun-misc-unsafe-memory-access=allow", "-Xmx512m"));
        // The launcher's start-up cache, when this JVM runs with it: same jar, so the Managers load from it too.
        jvmArguments.stream().filter(arg -> arg.startsWith("-XX:AOTCache=")).findFirst().ifPresent(command::add);
        command.addAll(List.of("-cp", System.getProperty("java.class.path"), OrbitKv.class.getName(), "manager"));
        return List.copyOf(command);
    }

    @Command(name = "certs", mixinStandardHelpOptions = true,
            description = "Create a cluster CA and a key and certificate per Manager (PEM; keys 0600) in DIR.")
    static final class Certs implements Callable<Integer> {
        @Option(names = "--dir", required = true, description = "Output directory (created 0700).")
        Path dir;
        @Option(names = "--managers", required = true, description = "How many Managers (manager-1 .. manager-N).")
        int managers;
        @Option(names = "--hosts", defaultValue = "127.0.0.1,localhost",
                description = "Subject alternative names of every Manager certificate (default 127.0.0.1,localhost).")
        String hosts;
        @Option(names = "--days", defaultValue = "365", description = "Validity in days (default 365).")
        int days;

        @Override
        public Integer call() throws Exception {
            if (managers < 1 || managers > 1000 || days < 1) {
                System.err.println("orbitkv cluster certs: --managers must be 1..1000 and --days positive");
                return OrbitKv.EXIT_CONFIG;
            }
            ClusterCertificates.Written written = ClusterCertificates.create(dir, managers,
                    Arrays.stream(hosts.split(",")).map(String::strip).filter(h -> !h.isEmpty()).toList(),
                    Duration.ofDays(days));
            System.out.println("cluster CA: " + written.ca() + " (its key " + written.caKey()
                    + " is only needed to add Managers: keep it off the hosts)");
            for (int i = 0; i < managers; i++) {
                System.out.printf("manager-%d: --set cluster.member-id=manager-%d --set cluster.tls.ca=%s --set cluster.tls.cert=%s --set cluster.tls.key=%s%n",
                        i + 1, i + 1, written.ca(), written.certificates().get(i), written.keys().get(i));
            }
            return 0;
        }
    }

    @Command(name = "up", mixinStandardHelpOptions = true,
            description = "Start etcd and N Managers on 127.0.0.1 (own ports, data directories, pools); stop them all on Ctrl-C.")
    static final class Up implements Callable<Integer> {
        @Option(names = "--managers", defaultValue = "3", description = "How many Managers (default 3).")
        int managers;
        @Option(names = "--dir", required = true, description = "Cluster directory: certs/, etcd-data/, manager-N/ and their logs.")
        Path dir;
        @Option(names = "--pool-size", defaultValue = "256MiB", description = "Each Manager's pool (default 256MiB).")
        String poolSize;
        @Option(names = "--set", description = "Any configuration key for every Manager: --set key=value (repeatable).")
        List<String> sets = new ArrayList<>();

        @Override
        public Integer call() throws Exception {
            if (!LocalEtcd.installed()) {
                System.err.println("orbitkv cluster up: etcd is not installed (/usr/bin/etcd): apt-get install etcd-server");
                return 1;
            }
            if (managers < 1 || managers > 16) {
                System.err.println("orbitkv cluster up: --managers must be 1..16");
                return OrbitKv.EXIT_CONFIG;
            }
            Map<String, String> settings = new LinkedHashMap<>();
            settings.put("pool.size", poolSize);
            settings.put("ssd.capacity", "256MiB");
            settings.put("peer.port", LocalCluster.AUTO_PORT); // peer fetches between the Managers
            for (String set : sets) {
                int eq = set.indexOf('=');
                if (eq <= 0) {
                    System.err.println("orbitkv cluster up: --set takes key=value, got '" + set + "'");
                    return OrbitKv.EXIT_CONFIG;
                }
                settings.put(set.substring(0, eq).strip(), set.substring(eq + 1).strip());
            }
            LocalCluster cluster = LocalCluster.start(new LocalCluster.Options(managers, dir.toAbsolutePath(),
                    managerCommand(), settings));
            CountDownLatch stopped = new CountDownLatch(1);
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                try {
                    cluster.close();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                stopped.countDown();
            }, "orbitkv-cluster-stop"));
            System.out.println("etcd: " + cluster.etcd().endpoint() + " (pid " + cluster.etcd().pid() + ", data "
                    + dir.resolve("etcd-data") + ")");
            for (LocalCluster.Node node : cluster.nodes()) {
                System.out.println(node);
            }
            System.out.println("certificates: " + cluster.certificates() + "; Ctrl-C stops everything");
            System.out.flush();
            stopped.await();
            return 0;
        }
    }

    @Command(name = "demo", mixinStandardHelpOptions = true,
            description = "Run a scripted scenario on a local cluster (publish on one Manager, observe evidence on the "
                    + "others, kill one, restart it), stop everything, print one JSON object last.")
    static final class Demo implements Callable<Integer> {
        @Option(names = "--managers", defaultValue = "3", description = "How many Managers (default 3, at least 2).")
        int managers;
        @Option(names = "--dir", description = "Cluster directory (default: a fresh temporary one, removed after).")
        Path dir;
        @Option(names = "--pages", defaultValue = "64", description = "Pages published on manager-1 (default 64).")
        int pages;

        @Override
        public Integer call() throws Exception {
            if (!LocalEtcd.installed()) {
                System.err.println("orbitkv cluster demo: etcd is not installed (/usr/bin/etcd): apt-get install etcd-server");
                return 1;
            }
            if (managers < 2 || managers > 8 || pages < 1 || pages > 4096) {
                System.err.println("orbitkv cluster demo: --managers must be 2..8 and --pages 1..4096");
                return OrbitKv.EXIT_CONFIG;
            }
            boolean temporary = dir == null;
            Path where = temporary ? Files.createTempDirectory("orbitkv-cluster-demo") : dir.toAbsolutePath();
            try {
                ClusterDemo.Report report = ClusterDemo.run(where, managers, pages, managerCommand(), System.err::println);
                System.out.println(report.toJson().encode());
                return report.passed() ? 0 : 1;
            } finally {
                if (temporary) {
                    deleteTree(where);
                }
            }
        }
    }

    static void deleteTree(Path root) {
        try (var paths = Files.walk(root)) {
            paths.sorted(Comparator.reverseOrder()).forEach(p -> {
                try {
                    Files.deleteIfExists(p);
                } catch (IOException ignored) {
                    // best effort: a temporary directory
                }
            });
        } catch (IOException ignored) {
            // best effort
        }
    }
}
