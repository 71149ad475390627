package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.OrbitKvException;
import io.orbitkv.common.ConfigException;
import io.orbitkv.manager.Manager;
import io.orbitkv.nativeio.libc.Libc;
import io.orbitkv.protocol.engine.ErrorReason;
import io.orbitkv.protocol.engine.InstanceRole;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Security at start: a token file others may read or replace stops startup with a clear error (the
 * configuration-error path, exit code 2 in {@code orbitkv manager}); the Unix socket is owner-only from its first
 * moment at its path; callers on it are checked by peer credentials against the allowed uids, in addition to the token.
 */
@Timeout(120)
class EngineSecurityIT {

    static Map<String, String> settings(Path data) {
        return Map.of("data-dir", data.toString(), "pool.size", "8MiB", "grpc.tcp-port", "0", "metrics.port", "0",
                "ssd.enabled", "false");
    }

    static Path tokenFile(Path data, String mode) throws Exception {
        Files.createDirectories(data);
        Path token = data.resolve("engine.token");
        Files.writeString(token, "0123456789abcdef0123456789abcdef\n");
        Files.setPosixFilePermissions(token, PosixFilePermissions.fromString(mode));
        return token;
    }

    static void assertStartRefused(Path data, String... messageParts) throws Exception {
        try {
            assertThatThrownBy(() -> Manager.start(RunningManager.config(settings(data))).await(60, TimeUnit.SECONDS))
                    .isInstanceOfSatisfying(ConfigException.class, e -> assertThat(e.getMessage())
                            .contains("auth.token-file").contains(messageParts));
            assertThat(Files.exists(data.resolve("engine.sock"))).as("nothing listens").isFalse();
        } finally {
            RunningManager.deleteTree(data);
        }
    }

    @Test
    void aTokenFileReadableByGroupOrOthersStopsStartup() throws Exception {
        Path data = Files.createTempDirectory("orbitkv-token-mode");
        tokenFile(data, "rw-r--r--");
        assertStartRefused(data, "rw-r--r--", "chmod 600");
    }

    @Test
    void aTokenFileOfAnotherUserStopsStartup() throws Exception {
        assumeTrue(Libc.effectiveUid() == 0, "only root can give a file to another user");
        Path data = Files.createTempDirectory("orbitkv-token-owner");
        Path token = tokenFile(data, "rw-------");
        Files.setAttribute(token, "unix:uid", 65534);
        assertStartRefused(data, "owned by uid 65534");
    }

    @Test
    void aTokenFileThatIsALinkStopsStartup() throws Exception {
        Path data = Files.createTempDirectory("orbitkv-token-link");
        Path real = Files.createTempFile("orbitkv-real-token", "");
        try {
            Files.writeString(real, "0123456789abcdef0123456789abcdef\n");
            Files.createSymbolicLink(data.resolve("engine.token"), real);
            assertStartRefused(data, "not a regular file");
        } finally {
            Files.deleteIfExists(real);
        }
    }

    @Test
    void theSocketIsOwnerOnlyAndCallersOfAnotherUidAreRefusedByPeerCredentials() throws Exception {
        int me = Libc.effectiveUid();
        int someoneElse = me == 0 ? 65534 : 0;
        Path data = Files.createTempDirectory("orbitkv-peer");
        Map<String, String> config = new HashMap<>(settings(data));
        config.put("grpc.allowed-uids", Integer.toString(someoneElse));
        try (Manager manager = Manager.start(RunningManager.config(config)).await(60, TimeUnit.SECONDS)) {
            assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(manager.unixSocket()))).isEqualTo("rw-------");
            try (Stream<Path> entries = Files.list(data)) {
                assertThat(entries.map(p -> p.getFileName().toString())).as("the private bind directory is gone")
                        .noneMatch(name -> name.startsWith(".bind-"));
            }
            // The right token is not enough on the Unix socket when the caller's uid is not allowed.
            try (OrbitKvClient unix = OrbitKvClient.connectUnix(manager.unixSocket(), manager.token());
                 OrbitKvClient tcp = OrbitKvClient.connectTcp("127.0.0.1", manager.grpcTcpPort(), manager.token())) {
                assertThatThrownBy(() -> unix.ping().await())
                        .isInstanceOfSatisfying(OrbitKvException.class, e -> {
                            assertThat(e.reason()).isEqualTo(ErrorReason.PEER_NOT_ALLOWED);
                            assertThat(e.grpcStatus()).isEqualTo("PERMISSION_DENIED");
                            assertThat(e.getMessage()).contains("uid " + me);
                        });
                assertThatThrownBy(() -> unix.register(RunningManager.identity("m", 4096).build(), InstanceRole.DECODE).await())
                        .isInstanceOfSatisfying(OrbitKvException.class, e -> assertThat(e.reason()).isEqualTo(ErrorReason.PEER_NOT_ALLOWED));
                // TCP carries no peer credentials: the token alone decides there.
                tcp.ping().await();
            }
            assertThat(scrape(manager)).contains("orbitkv_rejections_total{reason=\"peer_not_allowed\"} 2.0");
        } finally {
            RunningManager.deleteTree(data);
        }
        // With the default (the Manager's own uid) the same caller is let in.
        Path again = Files.createTempDirectory("orbitkv-peer-default");
        try (Manager manager = Manager.start(RunningManager.config(settings(again))).await(60, TimeUnit.SECONDS);
             OrbitKvClient unix = OrbitKvClient.connectUnix(manager.unixSocket(), manager.token())) {
            unix.ping().await();
        } finally {
            RunningManager.deleteTree(again);
        }
    }

    static String scrape(Manager manager) throws Exception {
        var client = HttpClient.newHttpClient();
        return client.send(HttpRequest.newBuilder(
                        URI.create("http://127.0.0.1:" + manager.metricsPort() + "/metrics")).build(),
                HttpResponse.BodyHandlers.ofString()).body();
    }
}
