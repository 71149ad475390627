package io.orbitkv.clusterkit;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * A local etcd server (Debian's {@code etcd-server}, /usr/bin/etcd) on 127.0.0.1 with free ports and its own data
 * directory, started and stopped by pid: for {@code orbitkv cluster up|demo} and the cluster tests (which are skipped
 * with a clear message when etcd is not installed; {@code ./scripts/test} installs it when missing and run as root).
 *
 * <p>Design note (ownership): this object owns the etcd process it started; {@link #close} stops it (SIGTERM, then
 * SIGKILL after 10 s) and {@link #kill} kills it outright; both wait until it is gone. The data directory survives a
 * kill, so {@link #restart} brings back the same keys and leases.
 */
public final class LocalEtcd implements AutoCloseable {
    static final Path ETCD = Path.of(System.getenv().getOrDefault("ORBITKV_ETCD", "/usr/bin/etcd"));

    private final Path dataDir;
    private final int clientPort;
    private final int peerPort;
    private final Path log;
    private Process process;

    private LocalEtcd(Path dataDir, int clientPort, int peerPort) {
        this.dataDir = dataDir;
        this.clientPort = clientPort;
        this.peerPort = peerPort;
        this.log = dataDir.resolveSibling(dataDir.getFileName() + ".log");
    }

    public static boolean installed() {
        return Files.isExecutable(ETCD);
    }

    /** Starts etcd with its data in {@code parent/etcd-data} (and its log beside it); waits until it is healthy. */
    public static LocalEtcd start(Path parent) throws Exception {
        if (!installed()) {
            throw new IllegalStateException("etcd is not installed (" + ETCD + "): apt-get install etcd-server");
        }
        LocalEtcd etcd = new LocalEtcd(parent.resolve("etcd-data"), freePort(), freePort());
        etcd.launch();
        return etcd;
    }

    public String endpoint() {
        return "http://127.0.0.1:" + clientPort;
    }

    public long pid() {
        return process.pid();
    }

    public boolean alive() {
        return process != null && process.isAlive();
    }

    private void launch() throws Exception {
        String client = "http://127.0.0.1:" + clientPort;
        String peer = "http://127.0.0.1:" + peerPort;
        process = new ProcessBuilder(List.of(ETCD.toString(), "--name", "orbitkv-local", "--data-dir", dataDir.toString(),
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", "orbitkv-local=" + peer, "--log-level", "warn"))
                .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile())).start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (System.nanoTime() < deadline) {
            if (!process.isAlive()) {
                throw new IllegalStateException("etcd exited with " + process.exitValue() + ": " + Files.readString(log));
            }
            if (healthy()) {
                return;
            }
            Thread.sleep(50);
        }
        throw new IllegalStateException("etcd did not answer on " + client + " within 20 s");
    }

    private boolean healthy() {
        try {
            HttpResponse<String> r = HttpClient.newHttpClient().send(
                    HttpRequest.newBuilder(URI.create(endpoint() + "/health"))
                            .timeout(Duration.ofSeconds(1)).build(), HttpResponse.BodyHandlers.ofString());
            return r.statusCode() == 200 && r.body().contains("true");
        } catch (IOException e) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /** SIGKILL, then wait for the process to be gone. */
    public void kill() throws InterruptedException {
        process.destroyForcibly();
        process.waitFor(10, TimeUnit.SECONDS);
        awaitPortFree();
    }

    /** Starts it again on the same ports and data directory (its keys and leases survive). */
    public void restart() throws Exception {
        if (alive()) {
            kill();
        }
        launch();
    }

    private void awaitPortFree() throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (System.nanoTime() < deadline) {
            try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress("127.0.0.1", clientPort), 200);
            } catch (IOException refused) {
                return;
            }
            Thread.sleep(20);
        }
    }

    @Override
    public void close() throws InterruptedException {
        if (process != null && process.isAlive()) {
            process.destroy();
            if (!process.waitFor(10, TimeUnit.SECONDS)) {
                process.destroyForcibly();
                process.waitFor(10, TimeUnit.SECONDS);
            }
        }
    }

    /** Ports {@link #freePort} handed out in this JVM: never handed out twice (see there). */
    private static final Set<Integer> HANDED_OUT = ConcurrentHashMap.newKeySet();

    /** The lowest port {@link #freePort} hands out: above the ports services and default configurations use. */
    static final int LOWEST_HANDED_OUT = 10_000;

    /**
     * A port free now, below the kernel's ephemeral range and never one this JVM handed out before. Callers take
     * several before any is bound (etcd's two, a Manager's Hazelcast and peer ports) and bind them in other processes
     * seconds later: a port from the ephemeral range (what binding port 0 answers) can meanwhile become the local end
     * of any outgoing connection on the host (to etcd, between Managers), and the bind then fails. Ports below the
     * range are never taken that way; the random start keeps concurrent test JVMs apart.
     */
    public static int freePort() throws IOException {
        int[] range = ephemeralRange();
        int low = LOWEST_HANDED_OUT;
        int high = range[0] - 1;
        if (high - low < 1_000) { // an unusual ephemeral range: only the kernel's own choice is left
            return kernelChosenPort();
        }
        ThreadLocalRandom random = ThreadLocalRandom.current();
        for (int attempt = 0; attempt < 512; attempt++) {
            int port = low + random.nextInt(high - low + 1);
            if (!HANDED_OUT.contains(port) && bindable(port) && HANDED_OUT.add(port)) {
                return port;
            }
        }
        throw new IOException("no free port in " + low + "-" + high + " that was not handed out already (512 tries)");
    }

    /** The kernel's ephemeral port range ({@code ip_local_port_range}); Linux's default when it cannot be read. */
    static int[] ephemeralRange() {
        try {
            String[] bounds = Files.readString(Path.of("/proc/sys/net/ipv4/ip_local_port_range")).trim().split("\\s+");
            return new int[] {Integer.parseInt(bounds[0]), Integer.parseInt(bounds[1])};
        } catch (IOException | RuntimeException unreadable) {
            return new int[] {32_768, 60_999};
        }
    }

    private static boolean bindable(int port) {
        try (ServerSocket socket = new ServerSocket()) {
            socket.setReuseAddress(false);
            socket.bind(new InetSocketAddress(port)); // the wildcard address: free on every interface, 127.0.0.1 too
            return true;
        } catch (IOException taken) {
            return false;
        }
    }

    private static int kernelChosenPort() throws IOException {
        for (int attempt = 0; attempt < 256; attempt++) {
            try (ServerSocket socket = new ServerSocket(0)) {
                if (HANDED_OUT.add(socket.getLocalPort())) {
                    return socket.getLocalPort();
                }
            }
        }
        throw new IOException("no port free that was not handed out already (256 tries)");
    }
}
