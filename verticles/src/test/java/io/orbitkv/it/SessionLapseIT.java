package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.nativeio.shm.SharedMemoryFile;
import io.orbitkv.protocol.engine.AllocatePublishReply;
import io.orbitkv.protocol.engine.AllocatePublishRequest;
import io.orbitkv.protocol.engine.EngineServiceGrpcClient;
import io.orbitkv.protocol.engine.GroupChain;
import io.orbitkv.protocol.engine.InstanceRole;
import io.orbitkv.protocol.engine.LeaseInvalidReason;
import io.orbitkv.protocol.engine.LeasedPage;
import io.orbitkv.protocol.engine.PageKey;
import io.orbitkv.protocol.engine.PoolDescriptor;
import io.orbitkv.protocol.engine.QueryReply;
import io.orbitkv.protocol.engine.QueryStatus;
import io.orbitkv.protocol.engine.RegisterReply;
import io.orbitkv.protocol.engine.RegisterRequest;
import io.orbitkv.protocol.engine.ReleaseLeaseReply;
import io.orbitkv.protocol.engine.ReleaseLeaseRequest;
import io.orbitkv.protocol.engine.SealPublishRequest;
import io.orbitkv.protocol.engine.SessionRef;
import io.orbitkv.protocol.engine.SubmitQueryRequest;
import io.orbitkv.protocol.engine.UnregisterRequest;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Issue 9 item 1, end to end through real gRPC and the real shared-memory pool: a session that ends while its engine
 * still holds a READY lease (it stalled past its ttl, or was unregistered or resumed) never makes that engine read
 * another engine's bytes. Its slots are quarantined while a second engine fills the pool, its release answers
 * {@code lease_valid = false, SESSION_ENDED}, and after the quarantine the slots are reused like any other.
 */
@Timeout(180)
class SessionLapseIT {
    static final int PAGE = 1 << 20;
    /** Long enough for the filling engine to cycle the pool several times on a loaded 2-core machine. */
    static final int QUARANTINE_MS = 6000;

    @RegisterExtension
    final RunningManager running = new RunningManager().with("pool.size", "16MiB").with("session.ttl-ms", "300")
            .with("session.quarantine-ms", Integer.toString(QUARANTINE_MS))
            .with("ssd.enabled", "false"); // evicted pages must really leave: their slots are what gets reused

    /** An engine without heartbeats: raw calls, its own mapping of the pool. Stalls by simply not calling. */
    record StalledEngine(OrbitKvClient client, SessionRef session, ByteString namespace, SharedMemoryFile pool) {
        static StalledEngine register(OrbitKvClient client) throws Exception {
            RegisterReply reply = client.call(EngineServiceGrpcClient.Register, RegisterRequest.newBuilder()
                    .setIdentity(RunningManager.identity("model-a", PAGE)).setRole(InstanceRole.DECODE).build()).await();
            SessionRef session = SessionRef.newBuilder().setInstanceId(reply.getInstanceId())
                    .setSessionEpoch(reply.getSessionEpoch()).build();
            return new StalledEngine(client, session, reply.getNamespaceId(),
                    SharedMemoryFile.map(Path.of(reply.getPool().getPath()), reply.getPool().getSizeBytes()));
        }

        MemorySegment slot(PoolDescriptor d) {
            return pool.segment().asSlice(d.getOffset(), d.getLength());
        }

        AllocatePublishReply allocate(List<ByteString> hashes) {
            AllocatePublishRequest.Builder request = AllocatePublishRequest.newBuilder().setSession(session)
                    .setNamespaceId(namespace);
            hashes.forEach(h -> request.addPages(PageKey.newBuilder().setGroupId(0).setBlockHash(h)));
            return client.call(EngineServiceGrpcClient.AllocatePublish, request.build()).await();
        }

        QueryReply queryReady(List<ByteString> hashes) {
            QueryReply reply = client.call(EngineServiceGrpcClient.SubmitQuery, SubmitQueryRequest.newBuilder()
                    .setSession(session).setNamespaceId(namespace)
                    .addGroups(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes)).build()).await();
            assertThat(reply.getStatus()).isEqualTo(QueryStatus.READY);
            return reply;
        }

        ReleaseLeaseReply release(long leaseId) {
            return client.call(EngineServiceGrpcClient.ReleaseLease, ReleaseLeaseRequest.newBuilder().setSession(session)
                    .setLeaseId(leaseId).build()).await();
        }
    }

    @Test
    void aStalledEngineNeverSeesItsSlotsReusedInsideTheQuarantineAndIsToldToDiscardItsCopy() throws Exception {
        try (OrbitKvClient client = running.unixClient();
             Arena arena = Arena.ofConfined()) {
            EngineSession filler = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.PREFILL).await();
            StalledEngine stalled = StalledEngine.register(client);
            try {
                // The stalled engine publishes 4 pages with checksums, holds a READY lease on them, and has one more
                // page open (allocated, written, never sealed).
                List<ByteString> hashes = PublishQueryRestoreIT.chain("stalled", 4);
                AllocatePublishReply published = stalled.allocate(hashes);
                SealPublishRequest.Builder seal = SealPublishRequest.newBuilder().setSession(stalled.session())
                        .setPublishId(published.getPublishId());
                for (int i = 0; i < 4; i++) {
                    MemorySegment slot = stalled.slot(published.getSlots(i).getSlot());
                    PublishQueryRestoreIT.fill(slot, 1000 + i);
                    seal.addCrc32C(PublishQueryRestoreIT.crc(slot));
                }
                client.call(EngineServiceGrpcClient.SealPublish, seal.build()).await();
                QueryReply lease = stalled.queryReady(hashes);
                assertThat(lease.getLease().getPagesCount()).isEqualTo(4);
                AllocatePublishReply open = stalled.allocate(PublishQueryRestoreIT.chain("stalled-open", 1));
                PoolDescriptor openSlot = open.getSlots(0).getSlot();
                PublishQueryRestoreIT.fill(stalled.slot(openSlot), 2000);

                // What the stalled engine holds, as it is now: every leased page carries its CRC32C.
                List<PoolDescriptor> held = new ArrayList<>();
                List<MemorySegment> expected = new ArrayList<>();
                for (LeasedPage page : lease.getLease().getPagesList()) {
                    assertThat(page.hasCrc32C()).as("a page sealed with a checksum is leased with it").isTrue();
                    assertThat(page.getCrc32C()).isEqualTo(PublishQueryRestoreIT.crc(stalled.slot(page.getSlot())));
                    held.add(page.getSlot());
                }
                held.add(openSlot);
                for (PoolDescriptor d : held) {
                    expected.add(arena.allocate(d.getLength()).copyFrom(stalled.slot(d)));
                }

                // It stalls: no call, no heartbeat. Its session lapses; its five slots go into quarantine.
                await().atMost(Duration.ofSeconds(20)).until(() -> running.metric("orbitkv_instances") == 1.0
                        && running.metric("orbitkv_quarantine_slots") == 5.0);
                assertThat(running.metric("orbitkv_leases_active")).as("the lapsed lease ended").isZero();
                assertThat(running.metric("orbitkv_quarantine_bytes")).isEqualTo(5.0 * PAGE);

                // Meanwhile the other engine fills the pool three times over, forcing eviction.
                double evictionsBefore = running.metric("orbitkv_evictions_total");
                List<PoolDescriptor> fillerSlots = fill(filler, "fill-1", 33);
                assertThat(running.metric("orbitkv_evictions_total") - evictionsBefore).as("the pool was under pressure")
                        .isGreaterThanOrEqualTo(20.0);
                assertThat(running.metric("orbitkv_quarantine_slots")).as("still inside the quarantine (raise "
                        + "QUARANTINE_MS if this machine is slower)").isEqualTo(5.0);
                for (PoolDescriptor taken : fillerSlots) {
                    for (PoolDescriptor mine : held) {
                        assertThat(overlaps(taken, mine)).as("slot %d reused inside the quarantine", mine.getOffset()).isFalse();
                    }
                }
                // The stalled engine's copy, made now, still reads exactly its own bytes.
                for (int i = 0; i < held.size(); i++) {
                    assertThat(stalled.slot(held.get(i)).mismatch(expected.get(i))).as("page %d", i).isEqualTo(-1L);
                }

                // Its release says: discard what you copied.
                double invalidatedBefore = running.metric("orbitkv_leases_invalidated_total");
                ReleaseLeaseReply released = stalled.release(lease.getLease().getLeaseId());
                assertThat(released.getLeaseValid()).isFalse();
                assertThat(released.getInvalidReason()).isEqualTo(LeaseInvalidReason.SESSION_ENDED);
                assertThat(running.metric("orbitkv_leases_invalidated_total")).isEqualTo(invalidatedBefore + 1);

                // After the quarantine the slots are ordinary again: bytes held return to zero and get reused.
                await().atMost(Duration.ofSeconds(QUARANTINE_MS / 1000 + 30)).until(
                        () -> running.metric("orbitkv_quarantine_slots") == 0.0 && running.metric("orbitkv_quarantine_bytes") == 0.0);
                List<PoolDescriptor> afterwards = fill(filler, "fill-2", 32);
                assertThat(held).as("the held slots are reusable after the quarantine")
                        .anyMatch(mine -> afterwards.stream().anyMatch(taken -> overlaps(taken, mine)));
                assertThat(running.metric("orbitkv_quarantine_events_total")).isEqualTo(5.0);
            } finally {
                stalled.pool().close();
                filler.close();
            }
            assertThat(running.metric("orbitkv_pool_requested_bytes")).as("only sealed pages remain")
                    .isEqualTo(running.metric("orbitkv_images") * PAGE);
        }
    }

    @Test
    void theJavaClientDiscardsACopyWhoseLeaseEndedWithAResumeOrAnUnregister() throws Exception {
        try (OrbitKvClient client = running.unixClient()) {
            EngineSession engine = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await();
            List<ByteString> hashes = PublishQueryRestoreIT.publish(engine, "resume", 3);
            QueryReply ready = engine.query(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes).build())).await();
            assertThat(ready.getStatus()).isEqualTo(QueryStatus.READY);

            // A kept copy first: a valid lease, every page checked against its CRC32C.
            QueryReply again = engine.query(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes).build())).await();
            EngineSession.LeaseCopy kept = copy(engine, again, false);
            assertThat(kept.keep()).isTrue();
            assertThat(kept.pages()).isEqualTo(3);
            // A copy that does not match its checksum is discarded even though the lease stayed valid.
            QueryReply third = engine.query(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes).build())).await();
            EngineSession.LeaseCopy corrupt = copy(engine, third, true);
            assertThat(corrupt.keep()).isFalse();
            assertThat(corrupt.checksumMismatches()).isEqualTo(3);

            // The engine restarts and resumes its instance while the old session still holds `ready`.
            RegisterReply resumed = client.call(EngineServiceGrpcClient.Register, RegisterRequest.newBuilder()
                    .setIdentity(engine.identity()).setRole(InstanceRole.DECODE).setResumeInstanceId(engine.instanceId())
                    .build()).await();
            EngineSession.LeaseCopy discarded = copy(engine, ready, false);
            assertThat(discarded.keep()).isFalse();
            assertThat(discarded.invalidReason()).isEqualTo(LeaseInvalidReason.SESSION_ENDED);
            assertThat(engine.invalidReleases()).isEqualTo(1);
            assertThat(engine.discardedCopies()).isEqualTo(2);

            // The resumed session holds a lease and unregisters: its late release is told the same.
            SessionRef fresh = SessionRef.newBuilder().setInstanceId(resumed.getInstanceId())
                    .setSessionEpoch(resumed.getSessionEpoch()).build();
            QueryReply held = client.call(EngineServiceGrpcClient.SubmitQuery, SubmitQueryRequest.newBuilder()
                    .setSession(fresh).setNamespaceId(resumed.getNamespaceId())
                    .addGroups(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes)).build()).await();
            assertThat(held.getStatus()).isEqualTo(QueryStatus.READY);
            assertThat(client.call(EngineServiceGrpcClient.Unregister, UnregisterRequest.newBuilder().setSession(fresh).build())
                    .await().getReleasedLeases()).isEqualTo(1);
            ReleaseLeaseReply late = client.call(EngineServiceGrpcClient.ReleaseLease, ReleaseLeaseRequest.newBuilder()
                    .setSession(fresh).setLeaseId(held.getLease().getLeaseId()).build()).await();
            assertThat(late.getLeaseValid()).isFalse();
            assertThat(late.getInvalidReason()).isEqualTo(LeaseInvalidReason.SESSION_ENDED);
            engine.abandon();
            assertThat(running.metric("orbitkv_quarantine_slots")).as("two ended leases on the same 3 pages").isEqualTo(3.0);
            await().atMost(Duration.ofSeconds(QUARANTINE_MS / 1000 + 30))
                    .until(() -> running.metric("orbitkv_quarantine_bytes") == 0.0);
        }
    }

    /** Copies a READY lease page by page into fresh memory (corrupting each copy when asked), then releases. */
    static EngineSession.LeaseCopy copy(EngineSession engine, QueryReply reply, boolean corrupt) {
        try (Arena arena = Arena.ofConfined()) {
            return engine.copyThenRelease(reply, (page, slot) -> {
                MemorySegment copy = arena.allocate(slot.byteSize()).copyFrom(slot);
                if (corrupt) {
                    copy.set(ValueLayout.JAVA_BYTE, 0, (byte) (copy.get(ValueLayout.JAVA_BYTE, 0) ^ 1));
                }
                return copy;
            }).await();
        }
    }

    /** Publishes {@code pages} pages in sealed batches of 4; returns every slot it was given. */
    static List<PoolDescriptor> fill(EngineSession engine, String seed, int pages) throws Exception {
        List<PoolDescriptor> slots = new ArrayList<>();
        List<ByteString> hashes = PublishQueryRestoreIT.chain(seed, pages);
        for (int start = 0; start < pages; start += 4) {
            List<PageKey> keys = hashes.subList(start, Math.min(pages, start + 4)).stream()
                    .map(h -> PageKey.newBuilder().setGroupId(0).setBlockHash(h).build()).toList();
            AllocatePublishReply allocated = engine.allocate(keys).await();
            List<Integer> crcs = new ArrayList<>();
            for (int i = 0; i < allocated.getSlotsCount(); i++) {
                PoolDescriptor slot = allocated.getSlots(i).getSlot();
                PublishQueryRestoreIT.fill(engine.slot(slot), seed.hashCode() + start + i);
                crcs.add(PublishQueryRestoreIT.crc(engine.slot(slot)));
                slots.add(slot);
            }
            engine.seal(allocated.getPublishId(), crcs).await();
        }
        return slots;
    }

    static boolean overlaps(PoolDescriptor a, PoolDescriptor b) {
        return a.getOffset() < b.getOffset() + b.getLength() && b.getOffset() < a.getOffset() + a.getLength();
    }
}
