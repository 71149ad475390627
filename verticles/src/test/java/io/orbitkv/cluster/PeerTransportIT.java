package io.orbitkv.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.orbitkv.clusterkit.ClusterCertificates;
import io.orbitkv.clusterkit.LocalCluster;
import io.orbitkv.clusterkit.LocalEtcd;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.StateKey;
import io.orbitkv.nativeio.mooncake.MooncakeTransferEngine;
import io.orbitkv.peer.MooncakePeerTransport;
import io.orbitkv.peer.PeerCommands;
import io.orbitkv.peer.PeerException;
import io.orbitkv.peer.PeerSettings;
import io.orbitkv.storage.StorageCommands;
import io.vertx.core.Future;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.AfterParameterizedClassInvocation;
import org.junit.jupiter.params.BeforeParameterizedClassInvocation;
import org.junit.jupiter.params.Parameter;
import org.junit.jupiter.params.ParameterizedClass;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * One body of peer-transfer cases run over every payload transport: the built-in one with mutual TLS, the built-in
 * one in plaintext, and Mooncake's Transfer Engine over its TCP transport ({@code mooncake-te}). Real processes: etcd
 * and the source Manager (manager-1) as processes, the requester (manager-2) in this JVM; each transport gets its own
 * cluster, started before and closed after that transport's invocation of this class (no shared statics). The source flips a byte of the 5th page it
 * serves. The faults hit the source after its lease was granted and the requester's transfer was submitted: SIGSTOP
 * (then SIGCONT), and SIGKILL (over the built-in transport half way through the payload, by its source's stall hook;
 * over TE with the batch in flight to the stopped source). The TE cases skip, saying why, only where the library did not load.
 */
@ParameterizedClass(name = "{0}")
@ValueSource(strings = {"plaintext", "tls", PeerSettings.MOONCAKE_TE})
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@Timeout(value = 150, unit = TimeUnit.SECONDS)
class PeerTransportIT {
    static final int PAGE = PeerITFixture.PAGE;
    static final Duration SOON = Duration.ofSeconds(20);

    @Parameter
    String transport;
    /** This transport's own directory (certificates, the Managers' data), removed at its end. */
    private Path dir;
    private PeerITFixture.SourceAndRequester rig;

    private boolean overTe() {
        return transport.equals(PeerSettings.MOONCAKE_TE);
    }

    @BeforeParameterizedClassInvocation
    void start() throws Exception {
        assumeTrue(LocalEtcd.installed(), "etcd is not installed (/usr/bin/etcd): install Debian's etcd-server");
        assumeTrue(!overTe() || MooncakeTransferEngine.isAvailable(), () -> "the Mooncake Transfer Engine did not load"
                + " (native/mooncake-te/build.sh builds it): " + MooncakeTransferEngine.unavailabilityCause());
        dir = Files.createTempDirectory("okv-" + transport.charAt(0)); // short: the engine socket's path is bounded
        ClusterCertificates.create(dir.resolve("certs"), 2, List.of("127.0.0.1", "localhost"), Duration.ofDays(1));
        Map<String, String> settings = new java.util.LinkedHashMap<>();
        settings.put("cluster.lease-ttl-s", "5");
        settings.put("cluster.prefix", "/orbitkv-peer-transport-" + transport);
        settings.put("ssd.enabled", "false");
        settings.put("session.ttl-ms", "60000");
        settings.put("peer.port", String.valueOf(LocalEtcd.freePort()));
        settings.put("peer.transfer-port", String.valueOf(LocalEtcd.freePort()));
        settings.put("peer.transport", transport);
        settings.put("peer.mooncake-te.trusted-network", "127.0.0.1/32");
        settings.put("fault-injection.peer.flip-page", "5");
        settings.put("fault-injection.peer.stall-lease-pages", "16");
        settings.put("peer.max-lease-ms", "30000");
        LocalCluster cluster = LocalCluster.start(new LocalCluster.Options(1, dir, ManagerProcessMain.command(), settings));
        try {
            rig = PeerITFixture.SourceAndRequester.start(dir, cluster, cluster.inProcessMember(2).peer(transport)
                    .set("peer.mooncake-te.trusted-network", "127.0.0.1/32")
                    // no warming: the source's flip hook counts every page it sends, a warming probe's page too
                    .set("peer.warm-connections", "0")
                    // the source's event-bus port as a seed too: a cold JVM's first etcd read can time out on a loaded
                    // host, and a requester seeded from etcd alone then forms an event-bus cluster of its own
                    .set("cluster.hazelcast-seeds", "127.0.0.1:"
                            + cluster.settingsOf(cluster.node(1), Map.of()).get("cluster.hazelcast-port"))
                    .settings(), 64L << 20,
                    PeerITFixture.identity("peer-transport-" + transport));
        } catch (Exception | Error e) {
            ClusterProcesses.closeAndAssertNoneLeft(cluster);
            throw e;
        }
    }

    @AfterParameterizedClassInvocation
    void stop() throws Exception {
        if (rig != null) {
            rig.close();
            rig = null;
        }
        if (dir != null) {
            try (var paths = Files.walk(dir)) {
                for (Path p : paths.sorted(java.util.Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(p);
                }
            }
        }
        if (overTe() && MooncakeTransferEngine.isAvailable()) {
            // the requester's engine was destroyed with its role: nothing of TE is left in this JVM
            assertThat(MooncakeTransferEngine.liveResources().total()).isZero();
        }
    }

    private static PeerException failure(Future<?> fetch) {
        ExecutionException e = assertThrows(ExecutionException.class,
                () -> fetch.toCompletionStage().toCompletableFuture().get(60, TimeUnit.SECONDS));
        assertThat(e.getCause()).isInstanceOf(PeerException.class);
        return (PeerException) e.getCause();
    }

    /** Payload bytes the requester's transport placed into destinations. */
    private long received() {
        return overTe() ? te().receivedBytes() : rig.peerRole().transport().receivedBytes();
    }

    private MooncakePeerTransport te() {
        return (MooncakePeerTransport) rig.peerRole().peerTransport();
    }

    private int batchesInFlight() {
        return overTe() ? te().batchesInFlight() : 0;
    }

    /** Nothing held on either side: no slot, publish or pin here, no TE batch, no lease or pin on the source. */
    private void awaitNothingHeld() {
        await().atMost(SOON).untilAsserted(() -> {
            StorageCommands.StorageStats stats = rig.requesterStorage();
            assertThat(stats.unsealedImages()).as("unsealed images here").isZero();
            assertThat(stats.openPublishes()).as("open publishes here").isZero();
            assertThat(stats.pinnedImages()).as("pinned images here").isZero();
            assertThat(batchesInFlight()).as("TE batches").isZero();
            if (overTe()) {
                assertThat(te().slotsRegistered()).as("slots registered with TE here").isZero();
                assertThat(rig.sourceMetric("orbitkv_peer_te_exposed_pages")).as("source pages registered").isZero();
            }
            assertThat(rig.sourceMetric("orbitkv_peer_source_leases")).as("source leases").isZero();
            assertThat(rig.sourceMetric("orbitkv_images_pinned")).as("source pins").isZero();
        });
    }

    private double mismatches() {
        return rig.requester.registry().get("orbitkv_peer_checksum_mismatches_total").counter().count();
    }

    @Test
    @Order(1)
    void aPeersPagesLandInLocalSlotsVerifiedAgainstTheKeysBytes() throws Exception {
        List<StateKey> keys = rig.publish("alpha", 3); // the source's pages 1..3
        long before = received();
        long connections = rig.peerRole().transferConnectionsOpened();
        PeerCommands.Fetched fetched = rig.peer().fetch(rig.owner(), rig.namespace, keys, rig.generations(keys),
                Duration.ofSeconds(20)).await(30, TimeUnit.SECONDS);
        assertThat(fetched.stages()).containsExactly(PeerCommands.Stage.CANDIDATE, PeerCommands.Stage.RESERVED,
                PeerCommands.Stage.RESIDENT, PeerCommands.Stage.READY);
        assertThat(fetched.bytes()).isEqualTo(3L * PAGE);
        MemorySegment expected = Arena.ofAuto().allocate(PAGE);
        for (int i = 0; i < 3; i++) {
            ImageRef ref = fetched.local().get(i);
            assertThat(ref.key()).isEqualTo(keys.get(i));
            PeerITFixture.fill(expected, "alpha", i); // from the key's seed: an independent path from the transport
            assertThat(rig.requesterPool.segment().asSlice(ref.offset(), PAGE).mismatch(expected)).as("page " + i)
                    .isEqualTo(-1);
        }
        assertThat(received() - before).as("bytes this transport moved").isEqualTo(3L * PAGE);
        if (overTe()) {
            assertThat(rig.peerRole().transferConnectionsOpened()).as("no transfer-port connection").isEqualTo(connections);
        }
        assertThat(mismatches()).isZero();
        awaitNothingHeld();
    }

    @Test
    @Order(2)
    void aPageCorruptedInFlightIsAMismatchCountedAndNeverServed() throws Exception {
        List<StateKey> keys = rig.publish("beta", 2); // the source's pages 4 and 5: the 5th is served with a byte flipped
        double before = mismatches();
        PeerException e = failure(rig.peer().fetch(rig.owner(), rig.namespace, keys, rig.generations(keys),
                Duration.ofSeconds(20)));
        assertThat(e.kind()).isEqualTo(PeerException.Kind.CHECKSUM_MISMATCH);
        assertThat(mismatches()).isEqualTo(before + 1);
        assertThat(rig.residentHere(keys)).isZero(); // nothing of it became resident
        awaitNothingHeld();
    }

    @Test
    @Order(3)
    void overTheTransferEngineAnyProcessCanReadALeasedPageButNothingOnceTheLeaseEnds() throws Exception {
        assumeTrue(overTe(), "what TE exposes: a Transfer Engine case");
        List<StateKey> keys = rig.publish("exposed", 1);
        List<Long> generations = rig.generations(keys);
        io.vertx.core.Vertx vertx = io.vertx.core.Vertx.vertx();
        // a stranger: an engine of its own, no certificate, no lease, no token; it reaches the source's TE port
        MooncakeTransferEngine stranger = MooncakeTransferEngine.startTcp("127.0.0.1");
        MemorySegment into = Arena.ofShared().allocate(PAGE, 4096);
        var registration = stranger.register(into);
        try {
            io.orbitkv.protocol.peer.PeerTransferGrpcClient grpc = rig.rawClient(vertx);
            io.orbitkv.protocol.peer.PeerGrant grant = rig.grant(grpc, keys, generations);
            assertThat(rig.sourceMetric("orbitkv_peer_te_exposed_pages")).isEqualTo(1.0);
            var segment = stranger.openSegment(grant.getTeSegment());
            long address = grant.getPages(0).getTeAddress();
            // while the lease lives, its page is readable by whoever reaches the port: the trust boundary
            assertThat(read(stranger, into, segment, address)).isEqualTo(
                    io.orbitkv.nativeio.mooncake.TransferState.COMPLETED);
            MemorySegment expected = Arena.ofAuto().allocate(PAGE);
            PeerITFixture.fill(expected, "exposed", 0);
            assertThat(into.mismatch(expected)).isEqualTo(-1);
            // one byte before it (another page of the pool, not leased) is not registered: refused
            assertThat(read(stranger, into.asSlice(0, 1), segment, address - 1))
                    .isNotEqualTo(io.orbitkv.nativeio.mooncake.TransferState.COMPLETED);
            assertThat(grpc.release(io.orbitkv.protocol.peer.PeerReleaseRequest.newBuilder()
                    .setLeaseId(grant.getLeaseId()).build()).await(10, TimeUnit.SECONDS).getReleased()).isTrue();
            await().atMost(SOON).until(() -> rig.sourceMetric("orbitkv_peer_te_exposed_pages") == 0.0);
            // the lease ended: the page is no longer registered, the same read is refused
            assertThat(read(stranger, into, segment, address))
                    .isNotEqualTo(io.orbitkv.nativeio.mooncake.TransferState.COMPLETED);
        } finally {
            registration.close();
            stranger.close();
            vertx.close().await(10, TimeUnit.SECONDS);
        }
        awaitNothingHeld();
    }

    /** One TE read of {@code into.byteSize()} bytes at {@code address} of {@code segment}, polled to its end. */
    private static io.orbitkv.nativeio.mooncake.TransferState read(MooncakeTransferEngine engine, MemorySegment into,
            io.orbitkv.nativeio.mooncake.RemoteSegment segment, long address) {
        try (var batch = engine.allocateBatch(1)) {
            try {
                batch.submit(io.orbitkv.nativeio.mooncake.TransferRequest.read(into, segment, address));
            } catch (io.orbitkv.nativeio.mooncake.MooncakeException refused) {
                return io.orbitkv.nativeio.mooncake.TransferState.FAILED; // refused at submission: nothing read
            }
            await().atMost(SOON).pollInterval(Duration.ofMillis(5)).until(batch::pollAll);
            return batch.states().getFirst();
        }
    }

    @Test
    @Order(4)
    void aSourceStoppedMidBatchIsAMissWithinTheBudgetAndNothingIsLeftOnceItResumes() throws Exception {
        List<StateKey> keys = rig.publish("sigstop", 4);
        List<Long> generations = rig.generations(keys);
        Duration budget = Duration.ofSeconds(4);
        long started = System.nanoTime();
        PeerCommands.Acquired acquired = rig.peer().acquire(rig.owner(), rig.namespace, keys, generations, budget)
                .await(10, TimeUnit.SECONDS);
        rig.signal("STOP"); // leased and granted; the batch goes to a stopped source
        try {
            PeerException e = failure(rig.peer().submit(acquired));
            assertThat(Duration.ofNanos(System.nanoTime() - started)).isLessThan(budget.plusSeconds(2));
            assertThat(e.kind()).isEqualTo(PeerException.Kind.TIMEOUT);
            assertThat(e.beforePayload()).isFalse();
            assertThat(rig.residentHere(keys)).isZero();
            StorageCommands.StorageStats stats = rig.requesterStorage();
            if (overTe()) {
                // TE's reads cannot be cancelled: the batch stays in flight and the slots stay the batch's until TE
                // reports it terminal; they are not served meanwhile
                assertThat(te().batchesInFlight()).isEqualTo(1);
                assertThat(stats.openPublishes()).isEqualTo(1);
            } else {
                // the built-in transport closes its connection: the slots are freed while the source is stopped
                assertThat(stats.openPublishes()).isZero();
                assertThat(stats.unsealedImages()).isZero();
            }
        } finally {
            rig.signal("CONT");
        }
        // Resumed: the batch ends (its bytes are dropped), the slots go, the lease is released; nothing served.
        awaitNothingHeld();
        assertThat(rig.residentHere(keys)).isZero();
        assertThat(rig.requester.membershipRole().orElseThrow().members()).containsKey(rig.source.memberId());
    }

    @Test
    @Order(5)
    void aSourceKilledMidBatchIsAMissWithinTheBudgetAndLeavesNothingOnTheRequester() throws Exception {
        List<StateKey> keys = rig.publish("sigkill", 16);
        List<Long> generations = rig.generations(keys);
        Duration budget = Duration.ofSeconds(30);
        long started = System.nanoTime();
        Future<PeerCommands.Fetched> fetch;
        if (overTe()) {
            // held still while its batch is submitted, so that it dies with the batch in flight
            PeerCommands.Acquired acquired = rig.peer().acquire(rig.owner(), rig.namespace, keys, generations, budget)
                    .await(10, TimeUnit.SECONDS);
            rig.signal("STOP");
            fetch = rig.peer().submit(acquired);
            await().atMost(SOON).until(() -> te().batchesInFlight() == 1);
        } else {
            // the built-in source's stall hook: a 16-page lease sends 8 pages, then stalls
            long before = received();
            fetch = rig.peer().fetch(rig.owner(), rig.namespace, keys, generations, budget);
            await().atMost(SOON).until(() -> received() - before >= 8L * PAGE);
        }
        assertThat(fetch.isComplete()).isFalse();
        rig.cluster.kill(rig.source); // SIGKILL
        PeerException e = failure(fetch);
        assertThat(Duration.ofNanos(System.nanoTime() - started)).isLessThan(budget);
        assertThat(e.kind()).isEqualTo(PeerException.Kind.TRANSFER_FAILED);
        assertThat(e.beforePayload()).isFalse();
        assertThat(rig.source.alive()).isFalse();
        await().atMost(SOON).untilAsserted(() -> {
            StorageCommands.StorageStats stats = rig.requesterStorage();
            assertThat(stats.unsealedImages()).isZero();
            assertThat(stats.openPublishes()).isZero();
            assertThat(stats.pinnedImages()).isZero();
            assertThat(batchesInFlight()).isZero();
        });
        assertThat(rig.residentHere(keys)).isZero();
    }
}
