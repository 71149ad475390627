package io.orbitkv.cluster;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.clusterkit.ClusterCertificates;
import io.vertx.core.Vertx;
import io.vertx.core.http.ClientAuth;
import io.vertx.core.net.NetClientOptions;
import io.vertx.core.net.NetServer;
import io.vertx.core.net.NetServerOptions;
import io.vertx.core.net.PemKeyCertOptions;
import io.vertx.core.net.PemTrustOptions;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code orbitkv cluster certs}: a CA, per-Manager keys and certificates that make a mutual-TLS connection. */
class ClusterCertificatesTest {
    @TempDir
    Path dir;

    @Test
    void createsACaAndAKeyAndCertificatePerManager() throws Exception {
        Path out = dir.resolve("certs");
        ClusterCertificates.Written written = ClusterCertificates.create(out, 3, List.of("127.0.0.1", "localhost"),
                Duration.ofDays(30));
        assertThat(written.certificates()).hasSize(3);
        assertThat(Files.getPosixFilePermissions(out)).isEqualTo(PosixFilePermissions.fromString("rwx------"));
        for (Path key : written.keys()) {
            assertThat(Files.getPosixFilePermissions(key)).isEqualTo(PosixFilePermissions.fromString("rw-------"));
            assertThat(Files.readString(key)).startsWith("-----BEGIN PRIVATE KEY-----");
        }
        assertThat(Files.getPosixFilePermissions(written.caKey())).isEqualTo(PosixFilePermissions.fromString("rw-------"));
        X509Certificate ca = read(written.ca());
        X509Certificate m2 = read(out.resolve("manager-2.pem"));
        m2.verify(ca.getPublicKey());
        m2.checkValidity();
        assertThat(m2.getSubjectX500Principal().getName()).contains("CN=manager-2");
        assertThat(m2.getExtendedKeyUsage()).contains("1.3.6.1.5.5.7.3.1", "1.3.6.1.5.5.7.3.2");
        assertThat(m2.getSubjectAlternativeNames().stream().map(n -> String.valueOf(n.get(1))).toList()).contains("manager-2", "127.0.0.1", "localhost");
        assertThat(ca.getBasicConstraints()).isGreaterThanOrEqualTo(0);
        assertThat(m2.getBasicConstraints()).isEqualTo(-1);
    }

    @Test
    void mutualTlsAcceptsAClusterCertificateAndRefusesNoneOrAForeignOne() throws Exception {
        Path certs = dir.resolve("certs");
        Path foreign = dir.resolve("foreign");
        ClusterCertificates.create(certs, 2, List.of("127.0.0.1"), Duration.ofDays(1));
        ClusterCertificates.create(foreign, 1, List.of("127.0.0.1"), Duration.ofDays(1));
        Vertx vertx = Vertx.vertx();
        try {
            NetServer server = vertx.createNetServer(new NetServerOptions().setHost("127.0.0.1").setPort(0).setSsl(true)
                    .setKeyCertOptions(keyCert(certs, "manager-1")).setTrustOptions(trust(certs))
                    .setClientAuth(ClientAuth.REQUIRED));
            server.connectHandler(socket -> socket.handler(buffer -> socket.write("ok")));
            server.listen().await(10, TimeUnit.SECONDS);
            int port = server.actualPort();
            assertThat(exchange(vertx, port, new NetClientOptions().setSsl(true).setTrustOptions(trust(certs))
                    .setKeyCertOptions(keyCert(certs, "manager-2")))).isEqualTo("ok");
            assertThat(exchange(vertx, port, new NetClientOptions().setSsl(true).setTrustOptions(trust(certs))))
                    .as("a node without a certificate gets nothing").isNull();
            assertThat(exchange(vertx, port, new NetClientOptions().setSsl(true).setTrustAll(true)
                    .setKeyCertOptions(keyCert(foreign, "manager-1"))))
                    .as("a certificate from another CA gets nothing").isNull();
        } finally {
            vertx.close().await(10, TimeUnit.SECONDS);
        }
    }

    /** Sends a line and returns the answer, or null when the handshake or the exchange fails. */
    private static String exchange(Vertx vertx, int port, NetClientOptions options) throws Exception {
        options.setHostnameVerificationAlgorithm("").setConnectTimeout(2000);
        // Held until the end: an unreachable NetClient is closed by its cleaner, connections and all.
        io.vertx.core.net.NetClient client = vertx.createNetClient(options);
        try {
            return client.connect(port, "127.0.0.1").compose(socket -> {
                io.vertx.core.Promise<String> answer = io.vertx.core.Promise.promise();
                socket.handler(b -> answer.tryComplete(b.toString()));
                socket.closeHandler(v -> answer.tryFail("closed"));
                socket.exceptionHandler(answer::tryFail);
                socket.write("hello");
                return answer.future();
            }).await(5, TimeUnit.SECONDS);
        } catch (Exception refused) {
            return null;
        } finally {
            client.close();
        }
    }

    static PemKeyCertOptions keyCert(Path dir, String id) {
        return new PemKeyCertOptions().setCertPath(dir.resolve(id + ".pem").toString())
                .setKeyPath(dir.resolve(id + ".key").toString());
    }

    static PemTrustOptions trust(Path dir) {
        return new PemTrustOptions().addCertPath(dir.resolve("ca.pem").toString());
    }

    private static X509Certificate read(Path pem) throws Exception {
        try (InputStream in = Files.newInputStream(pem)) {
            return (X509Certificate) CertificateFactory.getInstance("X.509").generateCertificate(in);
        }
    }
}
