package io.orbitkv.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.orbitkv.clusterkit.LocalEtcd;
import com.google.protobuf.ByteString;
import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.model.cost.CostEstimateResult;
import io.orbitkv.model.cost.CostPath;
import io.orbitkv.peer.PeerException;
import io.orbitkv.peer.PeerExecutionOwner;
import io.orbitkv.peer.PeerSettings;
import io.orbitkv.peer.PeerTransport;
import io.orbitkv.peer.PeerCommands;
import io.orbitkv.peer.TcpPeerTransport;
import io.orbitkv.model.plan.AttemptWindow;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.model.plan.PlannedPage;
import io.orbitkv.model.plan.PlannedSegment;
import io.orbitkv.model.plan.PlanningException;
import io.orbitkv.model.plan.PlanningFailure;
import io.orbitkv.model.plan.ReplicaEvidence;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.model.plan.SegmentLease;
import io.orbitkv.model.plan.TimeEstimate;
import io.orbitkv.protocol.engine.InstanceIdentity;
import io.orbitkv.protocol.peer.PeerGrant;
import io.orbitkv.protocol.peer.PeerKey;
import io.orbitkv.protocol.peer.PeerRejection;
import io.orbitkv.protocol.peer.PeerReleaseRequest;
import io.orbitkv.protocol.peer.PeerReserveReply;
import io.orbitkv.protocol.peer.PeerReserveRequest;
import io.orbitkv.protocol.peer.PeerTransferGrpcClient;
import io.orbitkv.recovery.BlockRange;
import io.orbitkv.model.StateKey;
import io.orbitkv.storage.StorageCommands;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.HttpVersion;
import io.vertx.core.net.PemKeyCertOptions;
import io.vertx.core.net.PemTrustOptions;
import io.vertx.core.net.SocketAddress;
import io.vertx.grpc.client.GrpcClient;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.MemberRecord;

/**
 * Peer transfer with real processes: one etcd and the source Manager (manager-1) as processes, the requester
 * (manager-2) a Manager in this JVM (so the test can call its peer role and read its pool), both cluster members with
 * mutual TLS ({@link PeerITFixture.SourceAndRequester}). One cluster per class; the source's test hooks flip a byte of
 * its 5th sent page and stall leases of 16+ pages half way; one test stops it with SIGSTOP mid-transfer, the last
 * SIGKILLs it mid-transfer. The requester checks received pages on 2 verifier threads ({@code peer.verify-threads}).
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@Timeout(value = 150, unit = TimeUnit.SECONDS)
class PeerTransferIT {
    static final int PAGE = PeerITFixture.PAGE;
    static final Duration SOON = Duration.ofSeconds(20);

    @TempDir
    static Path dir;
    static PeerITFixture.SourceAndRequester rig;

    @BeforeAll
    static void start() throws Exception {
        rig = PeerITFixture.SourceAndRequester.launch(dir, 3, "/orbitkv-peer-test",
                Map.of("fault-injection.peer.flip-page", "5", "fault-injection.peer.stall-lease-pages", "16"), "tls",
                // no warming: the source's flip hook counts every page it sends, and a warming probe's page would be one
                r -> r.set("cost.observations", "true").set("peer.verify-threads", "2")
                        .set("peer.warm-connections", "0"), identity());
    }

    @AfterAll
    static void stop() throws Exception {
        if (rig != null) {
            rig.close();
        }
    }

    static InstanceIdentity identity() {
        return PeerITFixture.identity("peer-test");
    }

    /** The expected bytes of page {@code i} of {@code seed}. */
    static void fill(MemorySegment target, String seed, int i) {
        PeerITFixture.fill(target, seed, i);
    }

    static PeerException failure(Future<?> fetch) {
        ExecutionException e = assertThrows(ExecutionException.class,
                () -> fetch.toCompletionStage().toCompletableFuture().get(60, TimeUnit.SECONDS));
        assertThat(e.getCause()).isInstanceOf(PeerException.class);
        return (PeerException) e.getCause();
    }

    @Test
    @Order(1)
    void aPeersPagesAreFetchedIntoLocalSlotsAndVerifiedBeforeReady() throws Exception {
        List<StateKey> keys = rig.publish("alpha", 4); // pages 1..4 the source sends
        PeerCommands.Fetched fetched = rig.peer().fetch(rig.owner(), rig.namespace, keys, rig.generations(keys), Duration.ofSeconds(20))
                .await(30, TimeUnit.SECONDS);
        assertThat(fetched.stages()).containsExactly(PeerCommands.Stage.CANDIDATE, PeerCommands.Stage.RESERVED,
                PeerCommands.Stage.RESIDENT, PeerCommands.Stage.READY);
        assertThat(fetched.local()).hasSize(4);
        assertThat(fetched.bytes()).isEqualTo(4L * PAGE);
        MemorySegment expected = java.lang.foreign.Arena.ofAuto().allocate(PAGE);
        for (int i = 0; i < 4; i++) {
            ImageRef ref = fetched.local().get(i);
            assertThat(ref.key()).isEqualTo(keys.get(i));
            fill(expected, "alpha", i);
            assertThat(rig.requesterPool.segment().asSlice(ref.offset(), PAGE).mismatch(expected)).as("page " + i).isEqualTo(-1);
        }
        // Verified by comparing the CRC32C the transport computed over each slot's bytes as they landed (the seal did
        // not read the slots again).
        assertThat(rig.requester.registry().get("orbitkv.seal.checksums.received").counter().count()).isEqualTo(1.0);
        assertThat(rig.requester.registry().get("orbitkv.seal.checksums.offloaded").counter().count()).isZero();
        // Sealed here (nothing unsealed or open), and the source's lease is released (pins and credits gone).
        StorageCommands.StorageStats stats = rig.requesterStorage();
        assertThat(stats.unsealedImages()).isZero();
        assertThat(stats.openPublishes()).isZero();
        await().atMost(SOON).until(() -> rig.sourceMetric("orbitkv_peer_source_leases") == 0.0);
        await().atMost(SOON).until(() -> rig.sourceMetric("orbitkv_images_pinned") == 0.0);
        // Cost samples keyed by the peer Manager's incarnation: the fetch operation and the complete host-ready route.
        for (CostPath path : List.of(CostPath.PEER_FETCH, CostPath.PEER_HOST_READY_ROUTE)) {
            CostEstimateResult estimate = rig.requester.cost().estimate(PeerCommands.costKey(path, rig.owner(), 4L * PAGE, 4))
                    .await(10, TimeUnit.SECONDS);
            assertThat(estimate instanceof CostEstimateResult.Usable
                    || (estimate instanceof CostEstimateResult.Unavailable u && u.sampleCount() >= 1
                    && u.reason() == CostEstimateResult.Reason.WARMING_UP)).as(path + ": " + estimate).isTrue();
        }
    }

    @Test
    @Order(2)
    void aByteFlippedInFlightIsAChecksumMismatchThatIsCountedAndNeverServed() throws Exception {
        List<StateKey> keys = rig.publish("beta", 1); // page 5: flipped by the source's test hook
        PeerException e = failure(rig.peer().fetch(rig.owner(), rig.namespace, keys, rig.generations(keys), Duration.ofSeconds(20)));
        assertThat(e.kind()).isEqualTo(PeerException.Kind.CHECKSUM_MISMATCH);
        assertThat(rig.requester.registry().get("orbitkv_peer_checksum_mismatches_total").counter().count()).isEqualTo(1.0);
        // the received pages were checked on the verifier threads, never on the transfer connection's event loop
        assertThat(verifiedBytes("verifier")).isGreaterThanOrEqualTo(5.0 * PAGE);
        assertThat(verifiedBytes("event_loop")).isZero();
        StorageCommands.StorageStats stats = rig.requesterStorage();
        assertThat(stats.unsealedImages()).isZero();
        assertThat(stats.openPublishes()).isZero();
        assertThat(rig.residentHere(keys)).isZero(); // nothing of it became resident
        await().atMost(SOON).until(() -> rig.sourceMetric("orbitkv_peer_source_leases") == 0.0);
    }

    @Test
    @Order(3)
    void staleIncarnationAndTheOtherRejectionsComeBeforeAnyPayloadAndPinNothing() throws Exception {
        List<StateKey> keys = rig.publish("delta", 2);
        List<Long> generations = rig.generations(keys);
        // The requester's own check: evidence from another incarnation of the owner is not even sent.
        PeerException local = failure(rig.peer().fetch(new PeerOwner(rig.source.memberId(), rig.source.incarnation() - 1), rig.namespace,
                keys, generations, Duration.ofSeconds(5)));
        assertThat(local.beforePayload()).isTrue();
        assertThat(local.rejection()).isEqualTo(PeerRejection.STALE_INCARNATION);
        // The source's checks, over its real mutual-TLS gRPC port with manager-2's certificate.
        double rejectedBefore = rig.sourceMetric("orbitkv_peer_rejections_total");
        Vertx vertx = Vertx.vertx();
        try {
            GrpcClient grpc = GrpcClient.client(vertx, new HttpClientOptions().setSsl(true).setUseAlpn(true)
                    .setProtocolVersion(HttpVersion.HTTP_2).setVerifyHost(true)
                    .setKeyCertOptions(new PemKeyCertOptions().setCertPath(dir.resolve("certs/manager-2.pem").toString())
                            .setKeyPath(dir.resolve("certs/manager-2.key").toString()))
                    .setTrustOptions(new PemTrustOptions().addCertPath(dir.resolve("certs/ca.pem").toString())));
            String endpoint = rig.requester.membershipRole().orElseThrow().members().get(rig.source.memberId()).endpoints().get("peer");
            PeerTransferGrpcClient client = PeerTransferGrpcClient.create(grpc, SocketAddress.inetSocketAddress(
                    Integer.parseInt(endpoint.substring(endpoint.lastIndexOf(':') + 1)), "127.0.0.1"));
            long me = rig.requester.membershipRole().orElseThrow().incarnation();
            assertThat(reserve(client, rig.namespace, rig.source.incarnation() - 1, me, keys, generations))
                    .isEqualTo(PeerRejection.STALE_INCARNATION);
            assertThat(reserve(client, rig.namespace, rig.source.incarnation(), me, keys,
                    List.of(generations.get(0), generations.get(1) + 1))).isEqualTo(PeerRejection.CHANGED_GENERATION);
            assertThat(reserve(client, rig.namespace, rig.source.incarnation(), me + 1, keys, generations))
                    .isEqualTo(PeerRejection.NOT_A_MEMBER);
            byte[] otherNamespace = rig.namespace.clone();
            otherNamespace[0] ^= 1;
            assertThat(reserve(client, otherNamespace, rig.source.incarnation(), me, keys, generations))
                    .isEqualTo(PeerRejection.UNKNOWN_NAMESPACE);
            assertThat(rig.sourceMetric("orbitkv_peer_source_leases")).isZero();
            assertThat(rig.sourceMetric("orbitkv_peer_rejections_total")).isEqualTo(rejectedBefore + 4);
        } finally {
            vertx.close().await(10, TimeUnit.SECONDS);
        }
    }

    static PeerRejection reserve(PeerTransferGrpcClient client, byte[] ns, long sourceIncarnation, long requesterIncarnation,
                                 List<StateKey> keys, List<Long> generations) throws Exception {
        PeerReserveRequest.Builder r = PeerReserveRequest.newBuilder().setNamespace(ByteString.copyFrom(ns))
                .setSourceIncarnation(sourceIncarnation).setRequesterIncarnation(requesterIncarnation).setLeaseMs(1000);
        for (int i = 0; i < keys.size(); i++) {
            r.addKeys(PeerKey.newBuilder().setGroupId(0).setBlockHash(ByteString.copyFrom(keys.get(i).blockHash()))
                    .setGeneration(generations.get(i)));
        }
        PeerReserveReply reply = client.reserve(r.build()).await(10, TimeUnit.SECONDS);
        assertThat(reply.hasReject()).as("rejected").isTrue();
        return reply.getReject().getReason();
    }

    @Test
    @Order(3)
    void thePlannersPeerDramPortAcquiresSubmitsPinsAndReleases() throws Exception {
        List<StateKey> keys = rig.publish("eta", 3);
        rig.generations(keys);
        List<PlannedPage> pages = new ArrayList<>();
        List<PlannedPage> stalePages = new ArrayList<>();
        for (int i = 0; i < keys.size(); i++) {
            ReplicaEvidence.PeerDram dram = (ReplicaEvidence.PeerDram) rig.requester.inventoryRole().orElseThrow()
                    .replicas(keys.get(i)).await(5, TimeUnit.SECONDS).peers().getFirst();
            pages.add(new PlannedPage(i, keys.get(i), dram));
            stalePages.add(new PlannedPage(i, keys.get(i), i < 2 ? dram : new ReplicaEvidence.PeerDram(dram.owner(),
                    dram.inventorySequence(), dram.ownerGeneration() + 1, dram.storedBytes(), dram.representation())));
        }
        PeerExecutionOwner owner = new PeerExecutionOwner(rig.requester.vertx(), rig.peerRole().settings());
        // Evidence whose generation changed: STALE_EVIDENCE before any payload, nothing held.
        PlannedSegment stale = new PlannedSegment(0, new BlockRange(0, 3), RouteTemplate.HOST_FROM_PEER_DRAM, stalePages,
                3L * PAGE, CompletionTarget.hostReady());
        ExecutionException e = assertThrows(ExecutionException.class, () -> owner.acquire(stale)
                .toCompletionStage().toCompletableFuture().get(30, TimeUnit.SECONDS));
        assertThat(PlanningException.failureOf(e.getCause())).isEqualTo(PlanningFailure.STALE_EVIDENCE);
        assertThat(owner.held()).isZero();

        PlannedSegment segment = new PlannedSegment(0, new BlockRange(0, 3), RouteTemplate.HOST_FROM_PEER_DRAM, pages,
                3L * PAGE, CompletionTarget.hostReady());
        // A demand whose waiting budget is already spent starts no peer attempt: refused before the source is asked
        // (no page named, so its owner is not avoided), nothing held on either side.
        double rejectedBefore = rig.sourceMetric("orbitkv_peer_rejections_total");
        ExecutionException spent = assertThrows(ExecutionException.class, () -> owner.acquire(segment,
                new AttemptWindow(0, TimeEstimate.UNKNOWN)).toCompletionStage().toCompletableFuture()
                .get(30, TimeUnit.SECONDS));
        assertThat(PlanningException.failureOf(spent.getCause())).isEqualTo(PlanningFailure.SOURCE_REJECTED);
        assertThat(((PlanningException) spent.getCause()).page()).isEmpty();
        assertThat(owner.held()).isZero();
        assertThat(rig.sourceMetric("orbitkv_peer_source_leases")).isZero();
        assertThat(rig.sourceMetric("orbitkv_peer_rejections_total")).isEqualTo(rejectedBefore);
        SegmentLease lease = owner.acquire(segment).await(30, TimeUnit.SECONDS);
        assertThat(lease.hostPages()).isEmpty();
        SegmentLease ready = owner.submit(lease).await(30, TimeUnit.SECONDS);
        assertThat(ready.hostPages()).hasSize(3);
        MemorySegment expected = java.lang.foreign.Arena.ofAuto().allocate(PAGE);
        for (int i = 0; i < 3; i++) {
            fill(expected, "eta", i);
            ImageRef ref = ready.hostPages().get(i);
            assertThat(rig.requesterPool.segment().asSlice(ref.offset(), PAGE).mismatch(expected)).isEqualTo(-1);
        }
        assertThat(rig.requesterStorage().pinnedImages()).isEqualTo(3); // host-ready: pinned for the lease
        assertThat(owner.release(ready).await(10, TimeUnit.SECONDS)).isTrue();
        assertThat(owner.release(ready).await(10, TimeUnit.SECONDS)).isFalse();
        assertThat(rig.requesterStorage().pinnedImages()).isZero();
        assertThat(rig.residentHere(keys)).isEqualTo(3);
        await().atMost(SOON).until(() -> rig.sourceMetric("orbitkv_peer_source_leases") == 0.0);
    }

    @Test
    @Order(3)
    void aFetchWhosePagesArePartlyResidentHereVerifiesOnlyItsNewSlots() throws Exception {
        List<StateKey> keys = rig.publish("partly-resident", 3);
        List<Long> generations = rig.generations(keys);
        double mismatches = rig.requester.registry().get("orbitkv_peer_checksum_mismatches_total").counter().count();
        rig.peer().fetch(rig.owner(), rig.namespace, keys.subList(0, 2), generations.subList(0, 2), Duration.ofSeconds(20))
                .await(30, TimeUnit.SECONDS);
        // keys 0 and 1 are resident here now: their bytes arrive into scratch, only key 2 gets a slot to verify
        PeerCommands.Fetched fetched = rig.peer().fetch(rig.owner(), rig.namespace, keys, generations, Duration.ofSeconds(20))
                .await(30, TimeUnit.SECONDS);
        assertThat(fetched.stages()).contains(PeerCommands.Stage.READY);
        assertThat(fetched.local()).extracting(ImageRef::key).containsExactly(keys.get(2));
        MemorySegment expected = java.lang.foreign.Arena.ofAuto().allocate(PAGE);
        fill(expected, "partly-resident", 2);
        assertThat(rig.requesterPool.segment().asSlice(fetched.local().getFirst().offset(), PAGE).mismatch(expected)).isEqualTo(-1);
        assertThat(rig.residentHere(keys)).isEqualTo(3);
        assertThat(rig.requester.registry().get("orbitkv_peer_checksum_mismatches_total").counter().count()).isEqualTo(mismatches);
        await().atMost(SOON).until(() -> rig.sourceMetric("orbitkv_peer_source_leases") == 0.0);
    }

    @Test
    @Order(4)
    void aLeaseTheRequesterNeverReleasesEndsAtItsExpiryAndUnpins() throws Exception {
        List<StateKey> keys = rig.publish("epsilon", 2);
        List<Long> generations = rig.generations(keys);
        double expiredBefore = rig.sourceMetric("orbitkv_peer_leases_expired_total");
        Vertx vertx = Vertx.vertx();
        try {
            PeerTransferGrpcClient client = rig.rawClient(vertx);
            PeerReserveRequest.Builder r = PeerReserveRequest.newBuilder().setNamespace(ByteString.copyFrom(rig.namespace))
                    .setSourceIncarnation(rig.source.incarnation())
                    .setRequesterIncarnation(rig.requester.membershipRole().orElseThrow().incarnation()).setLeaseMs(300);
            for (int i = 0; i < keys.size(); i++) {
                r.addKeys(PeerKey.newBuilder().setGroupId(0).setBlockHash(ByteString.copyFrom(keys.get(i).blockHash()))
                        .setGeneration(generations.get(i)));
            }
            PeerReserveReply reply = client.reserve(r.build()).await(10, TimeUnit.SECONDS);
            assertThat(reply.hasGrant()).isTrue();
            assertThat(reply.getGrant().getLeaseMs()).isEqualTo(300);
            assertThat(reply.getGrant().getPagesCount()).isEqualTo(2);
            // No transfer, no release: the source drops the pins at expiry on its own.
            await().atMost(SOON).until(() -> rig.sourceMetric("orbitkv_peer_leases_expired_total") == expiredBefore + 1);
            assertThat(rig.sourceMetric("orbitkv_peer_source_leases")).isZero();
        } finally {
            vertx.close().await(10, TimeUnit.SECONDS);
        }
    }

    @Test
    @Order(5)
    void aSourceStoppedWithSigstopTimesOutWithinTheBudgetBeforeAnyPayloadSoTheCallerMayReplan() throws Exception {
        List<StateKey> keys = rig.publish("zeta", 2);
        List<Long> generations = rig.generations(keys);
        Duration budget = Duration.ofSeconds(3);
        rig.signal("STOP");
        try {
            long started = System.nanoTime();
            PeerException e = failure(rig.peer().fetch(rig.owner(), rig.namespace, keys, generations, budget));
            assertThat(Duration.ofNanos(System.nanoTime() - started)).isLessThan(budget.plusSeconds(2));
            assertThat(e.kind()).isEqualTo(PeerException.Kind.UNREACHABLE); // the reserve got no answer in time
            assertThat(e.beforePayload()).isTrue(); // nothing was reserved here: replan (another peer, SSD) or MISS
            StorageCommands.StorageStats stats = rig.requesterStorage();
            assertThat(stats.unsealedImages()).isZero();
            assertThat(stats.openPublishes()).isZero();
            assertThat(rig.residentHere(keys)).isZero();
        } finally {
            rig.signal("CONT");
        }
        // Resumed: a member again, holding no lease for the reserve it answered too late (released or expired).
        await().atMost(SOON).until(() -> rig.requester.membershipRole().orElseThrow().members().containsKey(rig.source.memberId()));
        await().atMost(SOON).until(() -> rig.sourceMetric("orbitkv_peer_source_leases") == 0.0);
    }

    @Test
    @Order(4)
    void aRequesterThatLeavesMembershipLosesItsLeasesAtOnce() throws Exception {
        List<StateKey> keys = rig.publish("theta", 2);
        List<Long> generations = rig.generations(keys);
        double departedBefore = rig.sourceMetric("orbitkv_peer_leases_departed_total");
        // A third member (manager-3): its membership role alone, in this JVM, joined through the same etcd.
        ClusterSettings settings = new ClusterSettings("manager-3", List.of(java.net.URI.create(rig.cluster.etcd().endpoint())),
                "/orbitkv-peer-test", 2, "127.0.0.1", 0, LocalEtcd.freePort(), List.of(),
                dir.resolve("certs/ca.pem"), dir.resolve("certs/manager-3.pem"), dir.resolve("certs/manager-3.key"),
                50, 1024, 1024, 0);
        long incarnation = MemberRecord.newIncarnation(System.currentTimeMillis(), 12345);
        Vertx vertx = Vertx.vertx();
        try {
            MembershipRole third = new MembershipRole(settings, incarnation, Map.of(), List.of(),
                    new io.micrometer.core.instrument.simple.SimpleMeterRegistry());
            String deployment = vertx.deployVerticle(third).await(30, TimeUnit.SECONDS);
            await().atMost(SOON).until(() -> rig.sourceMetric("orbitkv_cluster_members") == 3.0);
            PeerTransferGrpcClient client = rig.rawClient(vertx, "manager-3");
            PeerReserveRequest.Builder r = PeerReserveRequest.newBuilder().setNamespace(ByteString.copyFrom(rig.namespace))
                    .setSourceIncarnation(rig.source.incarnation()).setRequesterIncarnation(incarnation).setLeaseMs(60_000);
            for (int i = 0; i < keys.size(); i++) {
                r.addKeys(PeerKey.newBuilder().setGroupId(0).setBlockHash(ByteString.copyFrom(keys.get(i).blockHash()))
                        .setGeneration(generations.get(i)));
            }
            assertThat(client.reserve(r.build()).await(10, TimeUnit.SECONDS).hasGrant()).isTrue();
            assertThat(rig.sourceMetric("orbitkv_peer_source_leases")).isEqualTo(1.0);
            vertx.undeploy(deployment).await(30, TimeUnit.SECONDS); // leaves: its member key's lease is revoked
            // Long before the 60 s lease expiry, the source sees the departure and drops the pins.
            await().atMost(SOON).until(() -> rig.sourceMetric("orbitkv_peer_source_leases") == 0.0);
            assertThat(rig.sourceMetric("orbitkv_peer_leases_departed_total")).isEqualTo(departedBefore + 1);
        } finally {
            vertx.close().await(10, TimeUnit.SECONDS);
        }
    }

    @Test
    @Order(4)
    void aReusedTransferConnectionCannotReadAnotherMembersLeaseEvenWithItsToken() throws Exception {
        List<StateKey> mine = rig.publish("iota", 2);
        List<StateKey> theirs = rig.publish("kappa", 2);
        List<Long> mineGenerations = rig.generations(mine);
        List<Long> theirGenerations = rig.generations(theirs);
        ClusterSettings settings = new ClusterSettings("manager-3", List.of(java.net.URI.create(rig.cluster.etcd().endpoint())),
                "/orbitkv-peer-test", 2, "127.0.0.1", 0, LocalEtcd.freePort(), List.of(),
                dir.resolve("certs/ca.pem"), dir.resolve("certs/manager-3.pem"), dir.resolve("certs/manager-3.key"),
                50, 1024, 1024, 0);
        long incarnation = MemberRecord.newIncarnation(System.currentTimeMillis(), 23456);
        Vertx vertx = Vertx.vertx();
        // manager-2's transfer transport (its certificate), driven directly on one context so it pools connections
        TcpPeerTransport transport = new TcpPeerTransport(vertx, new PeerSettings(-1, -1, false, 10_000, 256L << 20, 4096,
                0, 0, 64L << 20), dir.resolve("certs/ca.pem"), dir.resolve("certs/manager-2.pem"), dir.resolve("certs/manager-2.key"));
        try {
            MembershipRole third = new MembershipRole(settings, incarnation, Map.of(), List.of(),
                    new io.micrometer.core.instrument.simple.SimpleMeterRegistry());
            String deployment = vertx.deployVerticle(third).await(30, TimeUnit.SECONDS);
            await().atMost(SOON).until(() -> rig.sourceMetric("orbitkv_cluster_members") == 3.0);
            PeerTransferGrpcClient asManager2 = rig.rawClient(vertx);
            PeerGrant a = rig.grant(asManager2, mine, mineGenerations);
            PeerGrant b = rig.grant(rig.rawClient(vertx, "manager-3"), incarnation, theirs, theirGenerations);
            Context context = vertx.getOrCreateContext();
            List<PeerTransport.Destination> forA = PeerITFixture.destinations(2, PAGE);
            PeerITFixture.onContext(context, () -> transport.receive(a.getTransferEndpoint(), a.getLeaseId(),
                    a.getTransferToken().toByteArray(), forA, Duration.ofSeconds(10)).completion()).await(20, TimeUnit.SECONDS);
            MemorySegment expected = java.lang.foreign.Arena.ofAuto().allocate(PAGE);
            for (int i = 0; i < 2; i++) {
                fill(expected, "iota", i);
                assertThat(forA.get(i).slot().mismatch(expected)).isEqualTo(-1);
            }
            assertThat(transport.connectionsOpened()).isEqualTo(1);
            // manager-3's lease, with manager-3's own token, over manager-2's reused connection: the certificate
            // names another member, so the source refuses it without sending a byte.
            List<PeerTransport.Destination> forB = PeerITFixture.destinations(2, PAGE);
            ExecutionException e = assertThrows(ExecutionException.class, () -> PeerITFixture.onContext(context,
                    () -> transport.receive(b.getTransferEndpoint(), b.getLeaseId(), b.getTransferToken().toByteArray(),
                            forB, Duration.ofSeconds(10)).completion()).toCompletionStage().toCompletableFuture()
                    .get(20, TimeUnit.SECONDS));
            assertThat(e.getCause()).isInstanceOf(PeerException.class);
            assertThat(((PeerException) e.getCause()).kind()).isEqualTo(PeerException.Kind.TRANSFER_FAILED);
            for (PeerTransport.Destination d : forB) {
                assertThat(PeerITFixture.allZero(d.slot())).isTrue();
            }
            assertThat(rig.sourceMetric("orbitkv_peer_source_leases")).isEqualTo(2.0); // b is intact, a not yet released
            assertThat(asManager2.release(PeerReleaseRequest.newBuilder().setLeaseId(a.getLeaseId()).build())
                    .await(10, TimeUnit.SECONDS).getReleased()).isTrue();
            // manager-2 cannot release manager-3's lease either; manager-3 leaving membership drops it.
            assertThat(asManager2.release(PeerReleaseRequest.newBuilder().setLeaseId(b.getLeaseId()).build())
                    .await(10, TimeUnit.SECONDS).getReleased()).isFalse();
            vertx.undeploy(deployment).await(30, TimeUnit.SECONDS);
            await().atMost(SOON).until(() -> rig.sourceMetric("orbitkv_peer_source_leases") == 0.0);
        } finally {
            transport.close().await(10, TimeUnit.SECONDS);
            vertx.close().await(10, TimeUnit.SECONDS);
        }
    }

    static double verifiedBytes(String thread) {
        return rig.requester.registry().get("orbitkv_peer_verified_bytes_total").tag("thread", thread).counter().count();
    }

    @Test
    @Order(5)
    void aTimeoutWhileAVerifierHoldsAPageFreesTheSlotsOnlyAfterTheCheckLetGoAndLeaksNothing() throws Exception {
        List<StateKey> keys = rig.publish("held-check", 4);
        List<Long> generations = rig.generations(keys);
        StorageCommands.StorageStats before = rig.requesterStorage();
        TcpPeerTransport transport = rig.peerRole().transport();
        double timeouts = rig.requester.registry().get("orbitkv_peer_fetch_failures_total").tag("kind", "timeout")
                .counter().count();
        CountDownLatch holding = new CountDownLatch(1);
        CountDownLatch letGo = new CountDownLatch(1);
        AtomicInteger checks = new AtomicInteger();
        transport.beforeVerify(() -> {
            if (checks.getAndIncrement() == 0) { // the first page's check is held until the test lets it go
                holding.countDown();
                try {
                    letGo.await(60, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        });
        try {
            Future<PeerCommands.Fetched> fetch = rig.peer().fetch(rig.owner(), rig.namespace, keys, generations,
                    Duration.ofSeconds(2));
            assertThat(holding.await(20, TimeUnit.SECONDS)).as("a page landed and its check started").isTrue();
            // The budget passes while the check is held: the receive times out and the peer role fences it; the
            // fence waits for the check, so the slots are still held (the publish open) and the fetch has not ended.
            await().atMost(SOON).until(() -> transport.fencesWaitingForVerification() == 1);
            assertThat(fetch.isComplete()).isFalse();
            StorageCommands.StorageStats held = rig.requesterStorage();
            assertThat(held.openPublishes()).as("the fetch's slots, not freed under the verifier").isEqualTo(1);
            assertThat(held.requestedBytes()).as("pool bytes in slots").isEqualTo(before.requestedBytes() + 4L * PAGE);
            letGo.countDown();
            PeerException e = failure(fetch);
            assertThat(e.kind()).isEqualTo(PeerException.Kind.TIMEOUT);
            assertThat(rig.requester.registry().get("orbitkv_peer_fetch_failures_total").tag("kind", "timeout")
                    .counter().count()).isEqualTo(timeouts + 1);
        } finally {
            letGo.countDown();
            transport.beforeVerify(() -> {});
        }
        assertThat(transport.verificationsPending()).isZero();
        assertThat(transport.fencesWaitingForVerification()).isZero();
        StorageCommands.StorageStats after = rig.requesterStorage();
        assertThat(after.openPublishes()).isZero();
        assertThat(after.unsealedImages()).isZero();
        assertThat(after.requestedBytes()).as("pool bytes in slots back where they were").isEqualTo(before.requestedBytes());
        assertThat(after.slotBytes()).isEqualTo(before.slotBytes());
        assertThat(rig.residentHere(keys)).isZero();
        await().atMost(SOON).until(() -> rig.sourceMetric("orbitkv_peer_source_leases") == 0.0);
    }

    @Test
    @Order(6)
    void theSourceKilledMidTransferEndsTheFetchWithinItsBudgetAndItsSlotsAreReleased() throws Exception {
        List<StateKey> keys = rig.publish("gamma", 16); // a 16-page lease: the source sends 8 pages, then stalls
        List<Long> generations = rig.generations(keys);
        long before = rig.peerRole().transport().receivedBytes();
        Duration budget = Duration.ofSeconds(30);
        long started = System.nanoTime();
        Future<PeerCommands.Fetched> fetch = rig.peer().fetch(rig.owner(), rig.namespace, keys, generations, budget);
        await().atMost(SOON).until(() -> rig.peerRole().transport().receivedBytes() - before >= 8L * PAGE);
        assertThat(fetch.isComplete()).isFalse();
        rig.cluster.kill(rig.source); // SIGKILL mid-transfer
        PeerException e = failure(fetch);
        assertThat(Duration.ofNanos(System.nanoTime() - started)).isLessThan(budget);
        assertThat(e.kind()).isEqualTo(PeerException.Kind.TRANSFER_FAILED);
        assertThat(e.beforePayload()).isFalse();
        StorageCommands.StorageStats stats = rig.requesterStorage();
        assertThat(stats.unsealedImages()).isZero();
        assertThat(stats.openPublishes()).isZero();
        assertThat(rig.residentHere(keys)).isZero();
        assertThat(rig.source.alive()).isFalse();
    }

}
