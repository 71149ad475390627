package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.protocol.engine.*;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

@Timeout(120)
class PublishQueryRestoreIT {
    static final int PAGE = 64 * 1024;

    @RegisterExtension
    final RunningManager running = new RunningManager();

    static List<ByteString> chain(String seed, int n) {
        return RunningManager.chain(seed, n);
    }

    static void fill(MemorySegment slot, long seed) {
        long x = seed * 0x9E3779B97F4A7C15L + 1;
        for (long off = 0; off < slot.byteSize(); off += 8) {
            x ^= x << 13;
            x ^= x >>> 7;
            x ^= x << 17;
            slot.set(ValueLayout.JAVA_LONG_UNALIGNED, off, x);
        }
    }

    static int crc(MemorySegment slot) {
        CRC32C c = new CRC32C();
        c.update(slot.asByteBuffer());
        return (int) c.getValue();
    }

    /** Publishes n pages of group 0 and returns the chain. */
    static List<ByteString> publish(EngineSession session, String seed, int n) throws Exception {
        List<ByteString> hashes = chain(seed, n);
        List<PageKey> keys = hashes.stream().map(h -> PageKey.newBuilder().setGroupId(0).setBlockHash(h).build()).toList();
        AllocatePublishReply allocated = session.allocate(keys).await();
        List<Integer> crcs = new ArrayList<>();
        for (int i = 0; i < allocated.getSlotsCount(); i++) {
            PublishSlot slot = allocated.getSlots(i);
            if (slot.getStatus() == SlotStatus.ALLOCATED) {
                MemorySegment target = session.slot(slot.getSlot());
                fill(target, (seed + i).hashCode());
                crcs.add(crc(target));
            }
        }
        if (!crcs.isEmpty()) {
            session.seal(allocated.getPublishId(), crcs).await();
        }
        return hashes;
    }

    @Test
    void publishQueryRestoreReleaseOverTheUnixSocketVerifiesEveryByteAndLeaksNothing() throws Exception {
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(running.manager().unixSocket())))
                .isEqualTo("rw-------");
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(running.manager().poolPath())))
                .isEqualTo("rw-------");
        try (OrbitKvClient client = running.unixClient();
             EngineSession session = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.PREFILL_AND_DECODE).await()) {
            List<ByteString> hashes = publish(session, "doc", 8);
            // Query a longer chain: the first 8 blocks are resident, the rest unknown.
            List<ByteString> longer = new ArrayList<>(hashes);
            longer.addAll(chain("other", 4));
            QueryReply reply = session.query(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(longer).build())).await();
            assertThat(reply.getStatus()).isEqualTo(QueryStatus.READY);
            assertThat(reply.getReadyBlocks()).isEqualTo(8);
            assertThat(reply.getLease().getPagesCount()).isEqualTo(8);
            for (LeasedPage page : reply.getLease().getPagesList()) {
                MemorySegment copy = MemorySegment.ofArray(new byte[PAGE]);
                copy.copyFrom(session.slot(page.getSlot()));
                MemorySegment expected = MemorySegment.ofArray(new byte[PAGE]);
                fill(expected, ("doc" + page.getPosition()).hashCode());
                assertThat(copy.mismatch(expected)).as("page %d bytes", page.getPosition()).isEqualTo(-1);
            }
            assertThat(session.stats().await().getActiveLeases()).isEqualTo(1);
            assertThat(session.release(reply.getLease().getLeaseId()).await().getReleasedPages()).isEqualTo(8);
            RunningManager.assertNoLeases(session);
            assertThat(running.metric("orbitkv_queries_total{outcome=\"ready\"}")).isEqualTo(1.0);
            assertThat(running.metric("orbitkv_published_bytes_total")).isEqualTo(8.0 * PAGE);
            assertThat(running.metric("orbitkv_images")).isEqualTo(8.0);
            assertThat(running.health()).contains("\"status\":\"UP\"");
        }
    }

    @Test
    void tcpWorksTooAndAMissIsAMiss() throws Exception {
        try (OrbitKvClient client = running.tcpClient();
             EngineSession session = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await()) {
            QueryReply reply = session.query(List.of(GroupChain.newBuilder().setGroupId(0)
                    .addAllBlockHashes(chain("never", 3)).build())).await();
            assertThat(reply.getStatus()).isEqualTo(QueryStatus.MISS);
            RunningManager.assertNoLeases(session);
        }
    }

    @Test
    void equalIdentitiesSharePrefixesAndADifferentLayoutOrModelNever() throws Exception {
        try (OrbitKvClient client = running.unixClient();
             EngineSession a = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.PREFILL).await();
             EngineSession b = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await();
             EngineSession otherLayout = client.register(RunningManager.identity("model-a", PAGE).setLayout("test:HND").build(), InstanceRole.DECODE).await();
             EngineSession otherModel = client.register(RunningManager.identity("model-b", PAGE).build(), InstanceRole.DECODE).await()) {
            assertThat(a.namespace()).isEqualTo(b.namespace());
            assertThat(a.namespace()).isNotEqualTo(otherLayout.namespace()).isNotEqualTo(otherModel.namespace());
            List<ByteString> hashes = publish(a, "shared", 4);
            GroupChain chain = GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes).build();
            QueryReply shared = b.query(List.of(chain)).await();
            assertThat(shared.getStatus()).isEqualTo(QueryStatus.READY);
            assertThat(shared.getReadyBlocks()).isEqualTo(4);
            b.release(shared.getLease().getLeaseId()).await();
            assertThat(otherLayout.query(List.of(chain)).await().getStatus()).isEqualTo(QueryStatus.MISS);
            assertThat(otherModel.query(List.of(chain)).await().getStatus()).isEqualTo(QueryStatus.MISS);
            // Publishing the same chain again from b writes nothing: every page is already present.
            List<PageKey> again = hashes.stream().map(h -> PageKey.newBuilder().setGroupId(0).setBlockHash(h).build()).toList();
            AllocatePublishReply dup = b.allocate(again).await();
            assertThat(dup.getSlotsList()).allMatch(s -> s.getStatus() == SlotStatus.ALREADY_PRESENT);
            RunningManager.assertNoLeases(a);
        }
    }

    @Test
    void unregisterAndSessionLossReleaseEverythingTheSessionHeld() throws Exception {
        try (OrbitKvClient client = running.unixClient()) {
            EngineSession holder = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await();
            List<ByteString> hashes = publish(holder, "held", 4);
            QueryReply reply = holder.query(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(hashes).build())).await();
            assertThat(reply.getStatus()).isEqualTo(QueryStatus.READY);
            // An unsealed publish too.
            AllocatePublishReply open = holder.allocate(chain("open", 2).stream()
                    .map(h -> PageKey.newBuilder().setGroupId(0).setBlockHash(h).build()).toList()).await();
            assertThat(open.getSlotsCount()).isEqualTo(2);
            UnregisterReply gone = holder.unregister().await();
            holder.close();
            assertThat(gone.getReleasedLeases()).isEqualTo(1);
            assertThat(gone.getAbortedPublishes()).isEqualTo(1);
            try (EngineSession observer = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await()) {
                RunningManager.assertNoLeases(observer);
                assertThat(running.metric("orbitkv_images_pinned")).isZero();
                // The ended session's six slots (4 leased, 2 open) are quarantined (session.quarantine-ms): the
                // open publish's slots stay allocated until then.
                assertThat(running.metric("orbitkv_quarantine_bytes")).isEqualTo(6.0 * PAGE);
                assertThat(running.metric("orbitkv_pool_requested_bytes")).isEqualTo(6.0 * PAGE);
            }
        }
    }
}
