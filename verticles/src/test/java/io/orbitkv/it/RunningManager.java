package io.orbitkv.it;

import java.util.List;
import java.util.ArrayList;
import java.nio.charset.StandardCharsets;
import java.security.NoSuchAlgorithmException;
import java.security.MessageDigest;
import com.google.protobuf.ByteString;
import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.manager.Manager;
import io.orbitkv.manager.ManagerConfig;
import io.orbitkv.protocol.engine.GroupKind;
import io.orbitkv.protocol.engine.GroupSpec;
import io.orbitkv.protocol.engine.InstanceIdentity;
import io.orbitkv.protocol.engine.QueryReply;
import io.orbitkv.protocol.engine.QueryStatus;
import io.orbitkv.protocol.engine.Representation;
import io.orbitkv.protocol.engine.StatsReply;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * A real Manager for one test: its own data directory, a small pool in /dev/shm, gRPC on a Unix socket and an
 * ephemeral TCP port, metrics on an ephemeral port. After the test it checks that nothing leaked (no leases, no pool
 * bytes, no pinned images), stops the Manager and checks that its pool file and socket are gone.
 */
public final class RunningManager implements BeforeEachCallback, AfterEachCallback {
    private final Map<String, String> overrides = new HashMap<>();
    private Path dataDir;
    private Manager manager;
    private io.orbitkv.restore.RestoreVerticle.CopyGate restoreGate = io.orbitkv.restore.RestoreVerticle.CopyGate.OPEN;

    /** Restore workers pass {@code gate} before each copy batch (to hold copies in flight). */
    public RunningManager withRestoreGate(io.orbitkv.restore.RestoreVerticle.CopyGate gate) {
        this.restoreGate = gate;
        return this;
    }

    /**
     * The system property through which the build runs the integration suite again with several event loops
     * ({@code manager.event-loop-threads}); unset, the configured default (one loop).
     */
    public static final String EVENT_LOOPS_PROPERTY = "orbitkv.it.event-loop-threads";

    /**
     * A Manager configuration for an integration test: {@code settings}, plus the event-loop count the build asks for
     * ({@value #EVENT_LOOPS_PROPERTY}) unless the test sets one itself. Every IT builds its Managers through this.
     */
    public static ManagerConfig config(Map<String, String> settings) {
        Map<String, String> all = new HashMap<>(settings);
        String loops = System.getProperty(EVENT_LOOPS_PROPERTY, "");
        if (!loops.isBlank()) {
            all.putIfAbsent("manager.event-loop-threads", loops.strip());
        }
        return ManagerConfig.from(all);
    }

    /** Event loops this run of the integration suite asks for (1 unless the build says otherwise). */
    public static int eventLoops() {
        String loops = System.getProperty(EVENT_LOOPS_PROPERTY, "");
        return loops.isBlank() ? 1 : Integer.parseInt(loops.strip());
    }

    public RunningManager with(String key, String value) {
        overrides.put(key, value);
        return this;
    }

    @Override
    public void beforeEach(ExtensionContext context) throws Exception {
        dataDir = Files.createTempDirectory("orbitkv-it-");
        Map<String, String> settings = new HashMap<>();
        settings.put("data-dir", dataDir.toString());
        settings.put("pool.size", "64MiB");
        settings.put("grpc.tcp-port", "0");
        settings.put("metrics.port", "0");
        settings.put("ssd.capacity", "64MiB");
        settings.putAll(overrides);
        manager = Manager.start(config(settings), restoreGate).await(60, TimeUnit.SECONDS);
    }

    @Override
    public void afterEach(ExtensionContext context) throws Exception {
        // Nothing a test did may leave a lease, a pinned byte or an outstanding query behind.
        if (context.getExecutionException().isEmpty()) {
            assertThat(metric("orbitkv_leases_active")).as("leases left").isZero();
            assertThat(metric("orbitkv_leases_bytes")).as("leased bytes left").isZero();
            assertThat(metric("orbitkv_images_pinned")).as("pinned images left").isZero();
            assertThat(metric("orbitkv_queries_outstanding")).as("outstanding queries left").isZero();
        }
        Path pool = manager.poolPath();
        Path socket = manager.unixSocket();
        manager.close();
        assertThat(Files.exists(pool)).as("pool file removed on stop").isFalse();
        assertThat(Files.exists(socket)).as("socket removed on stop").isFalse();
        deleteTree(dataDir);
    }

    /** Stops the Manager now (a test that restarts on the same data directory uses {@link #restart}). */
    public Manager restart(Map<String, String> more) throws Exception {
        manager.close();
        Map<String, String> settings = new HashMap<>();
        settings.put("data-dir", dataDir.toString());
        settings.put("pool.size", "64MiB");
        settings.put("grpc.tcp-port", "0");
        settings.put("metrics.port", "0");
        settings.put("ssd.capacity", "64MiB");
        settings.putAll(overrides);
        settings.putAll(more);
        manager = Manager.start(config(settings), restoreGate).await(60, TimeUnit.SECONDS);
        return manager;
    }

    public Path dataDir() {
        return dataDir;
    }

    static void deleteTree(Path dir) throws IOException {
        try (var paths = Files.walk(dir)) {
            for (Path p : paths.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }

    public Manager manager() {
        return manager;
    }

    public OrbitKvClient unixClient() {
        return OrbitKvClient.connectUnix(manager.unixSocket(), manager.token());
    }

    public OrbitKvClient tcpClient() {
        return OrbitKvClient.connectTcp("127.0.0.1", manager.grpcTcpPort(), manager.token());
    }

    public static InstanceIdentity.Builder identity(String model, long bytesPerPage) {
        return InstanceIdentity.newBuilder().setModelFingerprint(model).setRepresentation(Representation.RAW)
                .setLayout("test:NHD").setGeometry("layers=2;kv_heads=2;head_dim=64;dtype=bf16").setPageSizeTokens(16)
                .setTpRank(0).setTpSize(1).setPpRank(0).setPpSize(1)
                .addGroups(GroupSpec.newBuilder().setGroupId(0).setKind(GroupKind.FULL_ATTENTION).setBytesPerPage(bytesPerPage));
    }

    /** Asserts, through a live session, that no lease or pinned byte remains and the pool holds only sealed images. */
    public static void assertNoLeases(EngineSession session) {
        StatsReply stats = session.stats().await();
        assertThat(stats.getActiveLeases()).as("active leases").isZero();
        assertThat(stats.getSessionOutstandingQueries()).as("outstanding queries").isZero();
    }

    /** Releases the given READY leases, then asserts that no lease remains. */
    public static void assertNoLeasesAfter(EngineSession session, QueryReply... replies) {
        for (QueryReply reply : replies) {
            if (reply.getStatus() == QueryStatus.READY) {
                session.release(reply.getLease().getLeaseId()).await();
            }
        }
        assertNoLeases(session);
    }

    /** Reads a metric value from the real /metrics endpoint. */
    public double metric(String nameAndLabels) throws Exception {
        String body = scrape();
        for (String line : body.split("\n")) {
            if (line.startsWith(nameAndLabels + " ")) {
                return Double.parseDouble(line.substring(nameAndLabels.length() + 1).trim());
            }
        }
        throw new AssertionError("metric " + nameAndLabels + " not found in scrape:\n" + body);
    }

    /** GET of a path on the metrics server (e.g. /health); fails unless 200. */
    public String scrapePath(String path) throws Exception {
        var client = java.net.http.HttpClient.newBuilder().version(java.net.http.HttpClient.Version.HTTP_1_1)
                .connectTimeout(java.time.Duration.ofSeconds(5)).build();
        var response = client.send(java.net.http.HttpRequest.newBuilder(
                java.net.URI.create("http://127.0.0.1:" + manager.metricsPort() + path))
                        .timeout(java.time.Duration.ofSeconds(20)).build(),
                java.net.http.HttpResponse.BodyHandlers.ofString());
        assertThat(response.statusCode()).isEqualTo(200);
        return response.body();
    }

    public String scrape() throws Exception {
        var client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(Duration.ofSeconds(5)).build();
        var response = client.send(HttpRequest.newBuilder(
                URI.create("http://127.0.0.1:" + manager.metricsPort() + "/metrics"))
                        .timeout(Duration.ofSeconds(20)).build(),
                HttpResponse.BodyHandlers.ofString());
        assertThat(response.statusCode()).isEqualTo(200);
        return response.body();
    }

    public String health() throws Exception {
        var client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(Duration.ofSeconds(5)).build();
        return client.send(HttpRequest.newBuilder(
                URI.create("http://127.0.0.1:" + manager.metricsPort() + "/health"))
                        .timeout(Duration.ofSeconds(20)).build(),
                HttpResponse.BodyHandlers.ofString()).body();
    }

    /**
     * The test chain of {@code n} block hashes for {@code seed}: SHA-256 over the previous hash and "seed:i" (the one
     * helper the integration and cluster tests share, so a key published in one test reads the same in another).
     */
    public static List<ByteString> chain(String seed, int n) {
        List<ByteString> hashes = new ArrayList<>();
        byte[] prev = new byte[0];
        try {
            for (int i = 0; i < n; i++) {
                MessageDigest sha = MessageDigest.getInstance("SHA-256");
                sha.update(prev);
                sha.update((seed + ":" + i).getBytes(StandardCharsets.UTF_8));
                prev = sha.digest();
                hashes.add(ByteString.copyFrom(prev));
            }
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is part of every JDK", e);
        }
        return hashes;
    }
}
