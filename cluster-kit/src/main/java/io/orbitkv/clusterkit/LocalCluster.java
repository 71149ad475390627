package io.orbitkv.clusterkit;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalDouble;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A cluster on 127.0.0.1 made of real processes: one etcd and N Managers, each with its own ports, data directory,
 * pool and certificate ({@code orbitkv cluster up|demo} and the cluster fault tests).
 *
 * <p>Design note (ownership): this object owns every process it started and stops them all in {@link #close} (Managers
 * with SIGTERM, then SIGKILL after 15 s; then etcd), reporting nothing left behind. Each node keeps its Hazelcast port
 * across restarts, so a restarted Manager is found where etcd says it was. Each Manager's output goes to
 * {@code DIR/manager-N.log}; it is ready when its ready line appears there.
 */
public final class LocalCluster implements AutoCloseable {
    private static final Pattern READY = Pattern.compile(
            "OrbitKV Manager ready: grpc unix:(\\S+) and tcp [^:]+:(\\d+), metrics http://[^:]+:(\\d+)/metrics.*?"
                    + "(?:cluster member (\\S+) incarnation (\\d+))?$");

    /**
     * @param managerCommand the command that runs one Manager and takes {@code --set key=value} arguments (the fat
     *                       jar's {@code orbitkv manager}, or a test main)
     * @param settings       settings every Manager gets (beside the per-node ones set here)
     */
    public record Options(int managers, Path dir, List<String> managerCommand, Map<String, String> settings) {
        public Options {
            managerCommand = List.copyOf(managerCommand);
            settings = Map.copyOf(settings);
        }
    }

    /** One Manager process as the cluster started it. */
    public static final class Node {
        private final int index;
        private final String memberId;
        private final Path dataDir;
        private final Path log;
        private final int hazelcastPort;
        private final int peerPort;
        private final int peerTransferPort;
        private Process process;
        private String peerEndpoint;
        private int grpcPort;
        private int metricsPort;
        private long incarnation;
        private Path socket;
        private long logOffset;

        Node(int index, Path dir, int hazelcastPort) throws IOException {
            this.index = index;
            this.memberId = "manager-" + index;
            this.dataDir = dir.resolve(memberId);
            this.log = dir.resolve(memberId + ".log");
            this.hazelcastPort = hazelcastPort;
            this.peerPort = LocalEtcd.freePort();
            this.peerTransferPort = LocalEtcd.freePort();
        }

        public String memberId() {
            return memberId;
        }

        public long pid() {
            return process.pid();
        }

        public boolean alive() {
            return process != null && process.isAlive();
        }

        public int grpcPort() {
            return grpcPort;
        }

        public int metricsPort() {
            return metricsPort;
        }

        public long incarnation() {
            return incarnation;
        }

        public Path socket() {
            return socket;
        }

        public Path dataDir() {
            return dataDir;
        }

        public Path tokenFile() {
            return dataDir.resolve("engine.token");
        }

        public Path log() {
            return log;
        }

        @Override
        public String toString() {
            return memberId + " (pid " + (process == null ? "-" : process.pid()) + ", grpc tcp 127.0.0.1:" + grpcPort
                    + ", unix " + socket + ", metrics http://127.0.0.1:" + metricsPort + "/metrics, hazelcast 127.0.0.1:"
                    + hazelcastPort + (peerEndpoint == null ? "" : ", peer " + peerEndpoint) + ", incarnation " + incarnation + ", log " + log + ")";
        }
    }

    /**
     * {@code peer.port=auto} in the shared settings: every node runs the peer role on ports of its own (kept across its
     * restarts), for peer fetches between the Managers.
     */
    public static final String AUTO_PORT = "auto";

    private final Options options;
    private final Path certs;
    private final List<Node> nodes = new ArrayList<>();
    private final HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(2)).build();
    private LocalEtcd etcd;

    private LocalCluster(Options options) {
        this.options = options;
        this.certs = options.dir().resolve("certs");
    }

    /** Makes certificates (unless DIR/certs has them), starts etcd and every Manager; all or nothing. */
    public static LocalCluster start(Options options) throws Exception {
        return start(options, false);
    }

    /**
     * As {@link #start(Options)}; with {@code together}, every Manager process is started before any is awaited (they
     * all find no member in etcd yet), otherwise one after the other.
     */
    public static LocalCluster start(Options options, boolean together) throws Exception {
        LocalCluster cluster = new LocalCluster(options);
        try {
            Files.createDirectories(options.dir());
            if (!Files.isReadable(cluster.certs.resolve("manager-" + options.managers() + ".key"))) {
                ClusterCertificates.create(cluster.certs, options.managers(), List.of("127.0.0.1", "localhost"),
                        Duration.ofDays(365));
            }
            cluster.etcd = LocalEtcd.start(options.dir());
            for (int i = 1; i <= options.managers(); i++) {
                cluster.nodes.add(new Node(i, options.dir(), LocalEtcd.freePort()));
            }
            if (together) {
                for (Node node : cluster.nodes) {
                    cluster.spawn(node, Map.of());
                }
                for (Node node : cluster.nodes) {
                    cluster.awaitReady(node);
                }
            } else {
                for (Node node : cluster.nodes) {
                    cluster.launch(node, Map.of());
                }
            }
            return cluster;
        } catch (Exception e) {
            cluster.close();
            throw e;
        }
    }

    public LocalEtcd etcd() {
        return etcd;
    }

    public List<Node> nodes() {
        return List.copyOf(nodes);
    }

    public Node node(int index) {
        return nodes.get(index - 1);
    }

    public Path certificates() {
        return certs;
    }

    /** The settings of one node: the shared ones, the node's own, then {@code extra}. */
    public Map<String, String> settingsOf(Node node, Map<String, String> extra) {
        Map<String, String> s = new LinkedHashMap<>();
        s.put("data-dir", node.dataDir.toString());
        s.put("grpc.tcp-port", "0");
        s.put("metrics.port", "0");
        s.put("pool.size", "64MiB");
        s.put("ssd.capacity", "64MiB");
        s.put("ssd.preallocate", "false");
        s.put("cluster.enabled", "true");
        s.put("cluster.member-id", node.memberId);
        s.put("cluster.etcd-endpoints", etcd.endpoint());
        s.put("cluster.hazelcast-port", String.valueOf(node.hazelcastPort));
        s.put("cluster.tls.ca", certs.resolve("ca.pem").toString());
        s.put("cluster.tls.cert", certs.resolve(node.memberId + ".pem").toString());
        s.put("cluster.tls.key", certs.resolve(node.memberId + ".key").toString());
        s.putAll(options.settings());
        s.putAll(extra);
        if (AUTO_PORT.equals(s.get("peer.port"))) {
            // Each node its own peer ports, the same across its restarts.
            s.put("peer.port", String.valueOf(node.peerPort));
            s.put("peer.transfer-port", String.valueOf(node.peerTransferPort));
        }
        return s;
    }

    /**
     * Settings for a Manager that runs in the caller's JVM (a requester the caller drives directly) and joins this
     * cluster as member {@code manager-INDEX}: its own data directory under the cluster's, ephemeral gRPC and metrics
     * ports, a free Hazelcast port, the cluster's etcd, every {@code cluster.*} setting the processes share, and its
     * certificate from {@link #certificates()} (which must hold one for that member: {@link ClusterCertificates#create}
     * with enough members). The caller owns the Manager it starts with them.
     */
    public MemberConfig inProcessMember(int index) throws IOException {
        String memberId = "manager-" + index;
        if (!Files.isReadable(certs.resolve(memberId + ".key"))) {
            throw new IllegalStateException("no certificate for " + memberId + " in " + certs
                    + ": create the cluster's certificates for at least " + index + " members first");
        }
        return new MemberConfig(memberId);
    }

    /** A builder of one in-process member's settings ({@link #inProcessMember}); {@link #settings} answers them. */
    public final class MemberConfig {
        private final String memberId;
        private final Map<String, String> settings = new LinkedHashMap<>();

        private MemberConfig(String memberId) throws IOException {
            this.memberId = memberId;
            settings.put("data-dir", options.dir().resolve(memberId).toString());
            settings.put("grpc.tcp-port", "0");
            settings.put("metrics.port", "0");
            settings.put("pool.size", "64MiB");
            settings.put("ssd.enabled", "false");
            options.settings().forEach((k, v) -> {
                if (k.startsWith("cluster.")) {
                    settings.put(k, v);
                }
            });
            settings.put("cluster.enabled", "true");
            settings.put("cluster.member-id", memberId);
            settings.put("cluster.etcd-endpoints", etcd.endpoint());
            settings.put("cluster.hazelcast-port", String.valueOf(LocalEtcd.freePort()));
            settings.put("cluster.tls.ca", certs.resolve("ca.pem").toString());
            settings.put("cluster.tls.cert", certs.resolve(memberId + ".pem").toString());
            settings.put("cluster.tls.key", certs.resolve(memberId + ".key").toString());
        }

        public String memberId() {
            return memberId;
        }

        /** Serves the peer role on free ports, with {@code transport} ({@code tls} or {@code plaintext}). */
        public MemberConfig peer(String transport) throws IOException {
            settings.put("peer.port", String.valueOf(LocalEtcd.freePort()));
            settings.put("peer.transfer-port", String.valueOf(LocalEtcd.freePort()));
            settings.put("peer.transport", transport);
            return this;
        }

        public MemberConfig set(String key, String value) {
            settings.put(key, value);
            return this;
        }

        /** The settings (for {@code ManagerConfig.from}); creates the data directory. */
        public Map<String, String> settings() throws IOException {
            Files.createDirectories(Path.of(settings.get("data-dir")));
            return Map.copyOf(settings);
        }
    }

    /** Starts (or restarts) a node's Manager and waits for its ready line (60 s at most). */
    public void launch(Node node, Map<String, String> extra) throws Exception {
        spawn(node, extra);
        awaitReady(node);
    }

    private void spawn(Node node, Map<String, String> extra) throws IOException {
        List<String> command = new ArrayList<>(options.managerCommand());
        Map<String, String> settings = settingsOf(node, extra);
        node.peerEndpoint = settings.containsKey("peer.port") ? "127.0.0.1:" + settings.get("peer.port") + " (transfer "
                + settings.get("peer.transfer-port") + ")" : null;
        settings.forEach((k, v) -> {
            command.add("--set");
            command.add(k + "=" + v);
        });
        Files.createDirectories(node.dataDir);
        node.logOffset = Files.exists(node.log) ? Files.size(node.log) : 0;
        node.process = new ProcessBuilder(command).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(node.log.toFile())).start();
    }

    private void awaitReady(Node node) throws Exception {
        // -Dorbitkv.cluster.ready-seconds: longer on a machine so loaded that a Manager's start takes minutes
        long seconds = Long.getLong("orbitkv.cluster.ready-seconds", 60);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (System.nanoTime() < deadline) {
            Matcher ready = readyLine(node);
            if (ready != null) {
                node.socket = Path.of(ready.group(1));
                node.grpcPort = Integer.parseInt(ready.group(2));
                node.metricsPort = Integer.parseInt(ready.group(3));
                node.incarnation = ready.group(5) == null ? 0 : Long.parseLong(ready.group(5));
                return;
            }
            if (!node.process.isAlive()) {
                throw new IllegalStateException(node.memberId + " exited with " + node.process.exitValue()
                        + " before it was ready; see " + node.log + ":\n" + tail(node));
            }
            Thread.sleep(50);
        }
        node.process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        throw new IllegalStateException(node.memberId + " was not ready within " + seconds + " s; see " + node.log + ":\n" + tail(node));
    }

    private static Matcher readyLine(Node node) throws IOException {
        if (!Files.exists(node.log)) {
            return null;
        }
        String text = Files.readString(node.log);
        for (String line : text.substring((int) Math.min(node.logOffset, text.length())).split("\n")) {
            Matcher m = READY.matcher(line.strip());
            if (m.find()) {
                return m;
            }
        }
        return null;
    }

    private static String tail(Node node) {
        try {
            List<String> lines = Files.readAllLines(node.log);
            return String.join("\n", lines.subList(Math.max(0, lines.size() - 30), lines.size()));
        } catch (IOException e) {
            return "(no log: " + e.getMessage() + ")";
        }
    }

    /** SIGKILL: the Manager gets no chance to leave; its member key stays until its lease expires. */
    public void kill(Node node) throws InterruptedException {
        node.process.destroyForcibly();
        node.process.waitFor(20, TimeUnit.SECONDS);
    }

    /** SIGTERM and wait (15 s, then SIGKILL). */
    public void stop(Node node) throws InterruptedException {
        if (node.process == null || !node.process.isAlive()) {
            return;
        }
        node.process.destroy();
        if (!node.process.waitFor(15, TimeUnit.SECONDS)) {
            node.process.destroyForcibly();
            node.process.waitFor(10, TimeUnit.SECONDS);
        }
    }

    /** The node's Prometheus text, or empty when it does not answer. */
    public String metrics(Node node) {
        try {
            HttpResponse<String> r = http.send(HttpRequest.newBuilder(
                    URI.create("http://127.0.0.1:" + node.metricsPort + "/metrics")).timeout(Duration.ofSeconds(3)).build(),
                    HttpResponse.BodyHandlers.ofString());
            return r.statusCode() == 200 ? r.body() : "";
        } catch (IOException e) {
            return "";
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "";
        }
    }

    /** One sample of a metric ({@code name{labels}}, labels as written by Prometheus, or none) from a node. */
    public OptionalDouble metric(Node node, String name, String labels) {
        return sample(metrics(node), name, labels);
    }

    /** One sample from Prometheus text: the line starting with {@code name} and containing every given label. */
    public static OptionalDouble sample(String text, String name, String labels) {
        for (String line : text.split("\n")) {
            if (line.startsWith("#") || !line.startsWith(name)) {
                continue;
            }
            String rest = line.substring(name.length());
            if (!(rest.startsWith("{") || rest.startsWith(" "))) {
                continue;
            }
            boolean matches = true;
            if (labels != null && !labels.isEmpty()) {
                for (String label : labels.split(",")) {
                    if (!rest.contains(label)) {
                        matches = false;
                        break;
                    }
                }
            }
            if (matches) {
                String value = line.substring(line.lastIndexOf(' ') + 1);
                try {
                    return OptionalDouble.of(Double.parseDouble(value));
                } catch (NumberFormatException e) {
                    return OptionalDouble.empty();
                }
            }
        }
        return OptionalDouble.empty();
    }

    /** Stops every Manager, then etcd; waits until all are gone. */
    @Override
    public void close() throws InterruptedException {
        for (Node node : nodes) {
            if (node.process != null && node.process.isAlive()) {
                node.process.destroy();
            }
        }
        for (Node node : nodes) {
            stop(node);
        }
        if (etcd != null) {
            etcd.close();
        }
    }
}
