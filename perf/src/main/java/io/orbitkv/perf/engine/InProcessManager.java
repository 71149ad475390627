package io.orbitkv.perf.engine;

import io.orbitkv.manager.Manager;
import io.orbitkv.manager.ManagerConfig;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A Manager started inside the bench JVM with a temporary data directory and ephemeral TCP/metrics ports, so a bench
 * never collides with a Manager already running on the host. {@link #close()} stops it and deletes the directory.
 */
public final class InProcessManager implements AutoCloseable {
    private final Path dataDir;
    private final ManagerConfig config;
    private final Manager manager;

    private InProcessManager(Path dataDir, ManagerConfig config, Manager manager) {
        this.dataDir = dataDir;
        this.config = config;
        this.manager = manager;
    }

    /** Starts a Manager with {@code poolBytes} of DRAM pool cut into {@code chunkBytes} chunks, plus any extra settings. */
    public static InProcessManager start(String prefix, long poolBytes, long chunkBytes, Map<String, String> extra)
            throws Exception {
        Path dataDir = Files.createTempDirectory(prefix);
        Map<String, String> settings = new HashMap<>();
        settings.put("data-dir", dataDir.toString());
        settings.put("pool.size", Long.toString(poolBytes));
        settings.put("pool.chunk", Long.toString(chunkBytes));
        settings.put("grpc.tcp-port", "0");
        settings.put("metrics.port", "0");
        // The DRAM-only figures stay DRAM-only unless a bench asks for the SSD tier (ssd.enabled=true plus a capacity).
        settings.put("ssd.enabled", "false");
        settings.putAll(extra);
        try {
            ManagerConfig config = ManagerConfig.from(settings);
            Manager manager = Manager.start(config).await(120, TimeUnit.SECONDS);
            return new InProcessManager(dataDir, config, manager);
        } catch (Exception e) {
            deleteTree(dataDir);
            throw e;
        }
    }

    public Manager manager() {
        return manager;
    }

    public ManagerConfig config() {
        return config;
    }

    public Path unixSocket() {
        return manager.unixSocket();
    }

    public String token() {
        return manager.token();
    }

    @Override
    public void close() throws Exception {
        try {
            manager.close();
        } finally {
            deleteTree(dataDir);
        }
    }

    static void deleteTree(Path dir) {
        try (var paths = Files.walk(dir)) {
            paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException ignored) {
            // Best effort: a temporary directory.
        }
    }
}
