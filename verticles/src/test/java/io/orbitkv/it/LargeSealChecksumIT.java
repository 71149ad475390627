package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.OrbitKvException;
import io.orbitkv.protocol.engine.AllocatePublishReply;
import io.orbitkv.protocol.engine.ErrorReason;
import io.orbitkv.protocol.engine.InstanceRole;
import io.orbitkv.protocol.engine.PageKey;
import io.orbitkv.protocol.engine.QueryReply;
import io.orbitkv.protocol.engine.QueryStatus;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Seals of large publishes with checksums (16 MiB: verified on a worker, not on the storage role's loop) decide as
 * small ones do: a wrong CRC32C aborts the whole publish and frees its slots, the right ones seal it, and every byte
 * served afterwards is the published one. A blocked event loop would fail this test (BlockedThreadWatch).
 */
@Timeout(120)
class LargeSealChecksumIT {
    static final int PAGE = 1 << 20;
    static final int PAGES = 16;

    @RegisterExtension
    final RunningManager running = new RunningManager().with("pool.size", "64MiB").with("ssd.enabled", "false");

    @Test
    void aLargePublishIsVerifiedOffTheLoopAndAWrongChecksumAbortsIt() throws Exception {
        try (OrbitKvClient client = running.unixClient();
             EngineSession session = client.register(RunningManager.identity("model-a", PAGE).build(), InstanceRole.DECODE).await()) {
            List<ByteString> hashes = PublishQueryRestoreIT.chain("large", PAGES);
            List<PageKey> keys = hashes.stream().map(h -> PageKey.newBuilder().setGroupId(0).setBlockHash(h).build()).toList();
            double requestedBefore = running.metric("orbitkv_pool_requested_bytes");

            AllocatePublishReply first = session.allocate(keys).await();
            List<Integer> crcs = fill(session, first);
            List<Integer> wrong = new ArrayList<>(crcs);
            wrong.set(PAGES - 1, crcs.get(PAGES - 1) ^ 1);
            OrbitKvException refused = catchThrowableOfType(OrbitKvException.class,
                    () -> session.seal(first.getPublishId(), wrong).await());
            assertThat(refused.reason()).isEqualTo(ErrorReason.MALFORMED_REQUEST);
            assertThat(running.metric("orbitkv_pool_requested_bytes")).as("the aborted publish freed its slots").isEqualTo(requestedBefore);
            assertThat(session.query(List.of(SsdTierIT.chain(hashes))).await().getStatus()).isEqualTo(QueryStatus.MISS);

            AllocatePublishReply second = session.allocate(keys).await();
            session.seal(second.getPublishId(), fill(session, second)).await();
            QueryReply ready = session.query(List.of(SsdTierIT.chain(hashes))).await();
            assertThat(ready.getStatus()).isEqualTo(QueryStatus.READY);
            assertThat(ready.getReadyBlocks()).isEqualTo(PAGES);
            SsdTierIT.verify(session, ready, "large");
            assertThat(running.metric("orbitkv_seal_checksums_offloaded_total")).as("both seals checked on a worker")
                    .isEqualTo(2.0);
            session.release(ready.getLease().getLeaseId()).await();
        }
    }

    /** Writes the ("large" + position) pattern into every slot and answers the slots' CRC32C. */
    static List<Integer> fill(EngineSession session, AllocatePublishReply allocated) {
        List<Integer> crcs = new ArrayList<>();
        for (int i = 0; i < allocated.getSlotsCount(); i++) {
            MemorySegment slot = session.slot(allocated.getSlots(i).getSlot());
            PublishQueryRestoreIT.fill(slot, ("large" + i).hashCode());
            crcs.add(PublishQueryRestoreIT.crc(slot));
        }
        return crcs;
    }
}
