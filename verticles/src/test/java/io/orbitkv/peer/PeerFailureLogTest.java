package io.orbitkv.peer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertThrows;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.cluster.ClusterSettings;
import io.orbitkv.cluster.MembershipRole;
import io.orbitkv.clusterkit.ClusterCertificates;
import io.orbitkv.common.Ticker;
import io.orbitkv.manager.Manager;
import io.orbitkv.model.StateKey;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.nativeio.shm.SharedMemoryFile;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.net.NetClient;
import io.vertx.core.net.NetClientOptions;
import io.vertx.core.net.NetSocket;
import io.vertx.core.net.PemKeyCertOptions;
import io.vertx.core.net.PemTrustOptions;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.slf4j.LoggerFactory;

/**
 * The peer role's failures leave one WARN line each, rate-limited per kind and member, naming no request: a failed
 * fetch attempt (requester) and a refused TLS handshake on the transfer port (source), over real sockets.
 */
class PeerFailureLogTest {
    @TempDir
    Path dir;
    Vertx vertx;
    final ListAppender<ILoggingEvent> seen = new ListAppender<>();
    Logger captured;

    @AfterEach
    void close() throws Exception {
        if (captured != null) {
            captured.detachAppender(seen);
        }
        if (vertx != null) {
            vertx.close().await(10, TimeUnit.SECONDS);
        }
    }

    private void capture(Class<?> owner) {
        captured = (Logger) LoggerFactory.getLogger(owner);
        seen.start();
        captured.addAppender(seen);
    }

    private List<ILoggingEvent> warnings() {
        return seen.list.stream().filter(e -> e.getLevel() == Level.WARN).toList();
    }

    @Test
    void aFailedAttemptIsOneWarnLineWithItsKindAndMemberAndNoRequestIdentity() throws Exception {
        capture(PeerRequester.class);
        vertx = Manager.newVertx(1);
        ClusterSettings settings = new ClusterSettings("manager-1", List.of(URI.create("http://127.0.0.1:1")),
                "/orbitkv-log-test", 2, "127.0.0.1", 0, 1, List.of(), null, null, null, 50, 1024, 1024, 0);
        // not deployed: no member is current, so every attempt is refused before anything is sent
        MembershipRole membership = new MembershipRole(settings, 1, java.util.Map.of(), List.of(), new SimpleMeterRegistry());
        Context context = vertx.getOrCreateContext();
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        PeerRequester requester = new PeerRequester(context, membership, null, null, null, null, null, registry,
                Ticker.SYSTEM);
        byte[] namespace = new byte[StateKey.NAMESPACE_BYTES];
        java.util.Arrays.fill(namespace, (byte) 0x3C);
        byte[] hash = new byte[32];
        java.util.Arrays.fill(hash, (byte) 0x7E);
        PeerCommands.Pages pages = new PeerCommands.Pages(new PeerOwner("manager-7", 42), namespace,
                List.of(StateKey.of(namespace, 0, hash)), List.of(99L), List.of(), Duration.ofSeconds(5));
        for (int i = 0; i < 5; i++) {
            Future<PeerCommands.Acquired> attempt = Future.<Future<PeerCommands.Acquired>>future(p -> context.runOnContext(
                    v -> p.complete(requester.acquire(pages)))).await(10, TimeUnit.SECONDS);
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> attempt.toCompletionStage().toCompletableFuture().get(10, TimeUnit.SECONDS));
            assertThat(((PeerException) e.getCause()).kind()).isEqualTo(PeerException.Kind.REJECTED);
        }
        assertThat(registry.get("orbitkv_peer_fetch_failures_total").tag("kind", "rejected").counter().count())
                .isEqualTo(5.0);
        assertThat(warnings()).as("five failures of one kind and member within the interval: one line").hasSize(1);
        String line = warnings().getFirst().getFormattedMessage();
        assertThat(line).contains("peer fetch rejected", "member manager-7", "stale_incarnation");
        assertThat(line).doesNotContain(HexFormat.of().formatHex(namespace), HexFormat.of().formatHex(hash), "3c3c",
                "7e7e", "99", "42");
    }

    @Test
    void aRefusedTlsHandshakeOnTheTransferPortIsOneWarnLinePerInterval() throws Exception {
        capture(TransferServer.class);
        ClusterCertificates.create(dir.resolve("certs"), 1, List.of("127.0.0.1", "localhost"), Duration.ofDays(1));
        ClusterCertificates.create(dir.resolve("rogue"), 1, List.of("127.0.0.1", "localhost"), Duration.ofDays(1));
        Path certs = dir.resolve("certs");
        vertx = Manager.newVertx(1);
        PeerSettings settings = new PeerSettings(1, 1, false, 10_000, 1L << 30, 64, 0, 0, 0);
        TcpPeerTransport source = new TcpPeerTransport(vertx, settings, new SimpleMeterRegistry(), certs.resolve("ca.pem"),
                certs.resolve("manager-1.pem"), certs.resolve("manager-1.key"), "log-source", Ticker.SYSTEM);
        Path poolPath = Path.of("/dev/shm", "orbitkv-log-test-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        try (SharedMemoryFile pool = SharedMemoryFile.create(poolPath, 1L << 20)) {
            Context owner = vertx.getOrCreateContext();
            TcpPeerTransport.Source grants = new TcpPeerTransport.Source() {
                @Override
                public List<TcpPeerTransport.PageSlice> begin(long leaseId, byte[] token, String peerMemberId) {
                    return null;
                }

                @Override
                public void finished(long leaseId, boolean sent) {}
            };
            int port = Future.<Integer>future(p -> owner.runOnContext(v ->
                    source.serve("127.0.0.1", 0, poolPath, pool.segment(), grants).onComplete(p))).await(10, TimeUnit.SECONDS);
            // a client with a certificate from another CA (it trusts the source, the source does not trust it)
            Path rogue = dir.resolve("rogue");
            NetClient client = vertx.createNetClient(new NetClientOptions().setSsl(true).setHostnameVerificationAlgorithm("")
                    .setKeyCertOptions(new PemKeyCertOptions().setCertPath(rogue.resolve("manager-1.pem").toString())
                            .setKeyPath(rogue.resolve("manager-1.key").toString()))
                    .setTrustOptions(new PemTrustOptions().addCertPath(certs.resolve("ca.pem").toString())));
            for (int i = 0; i < 3; i++) {
                try {
                    NetSocket socket = client.connect(port, "127.0.0.1").await(10, TimeUnit.SECONDS);
                    Future<Void> closed = Future.future(p -> socket.closeHandler(v -> p.tryComplete()));
                    socket.write("x"); // TLS 1.3: the server judges the client's certificate after the client's finish
                    closed.await(10, TimeUnit.SECONDS);
                } catch (Exception refusedAtConnect) {
                    // refused during the handshake on the client's side as well
                }
            }
            String kind = "peer transfer tls handshake refused";
            await().atMost(Duration.ofSeconds(10)).until(() -> source.refusals().occurrences(kind, null) == 3);
            assertThat(warnings()).as("three refusals within the interval: one line").hasSize(1);
            assertThat(warnings().getFirst().getFormattedMessage()).startsWith(kind + " (member (unknown)): ");
            client.close().await(10, TimeUnit.SECONDS);
        } finally {
            source.close().await(10, TimeUnit.SECONDS);
            Files.deleteIfExists(poolPath);
        }
    }
}
