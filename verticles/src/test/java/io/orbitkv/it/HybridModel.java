package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvException;
import io.orbitkv.protocol.engine.*;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

/**
 * A hybrid layout for the demand tests: page size 16 tokens; group 0 full attention, group 1 sliding window of 32
 * tokens (2 pages), group 2 recurrent with a checkpoint every 64 tokens (4 pages). Every group keys its pages by the
 * same chained block hashes (the group id is part of the state key). Helpers publish pages and build demands.
 */
final class HybridModel {
    static final int P = 16;
    static final int PAGE_BYTES = 16 * 1024;
    static final int FULL = 0;
    static final int WINDOW = 1;
    static final int RECURRENT = 2;

    private HybridModel() {}

    static InstanceIdentity identity() {
        return InstanceIdentity.newBuilder().setModelFingerprint("hybrid-model").setRepresentation(Representation.RAW)
                .setLayout("test:NHD").setGeometry("layers=6;mixed").setPageSizeTokens(P)
                .setTpRank(0).setTpSize(1).setPpRank(0).setPpSize(1)
                .addGroups(GroupSpec.newBuilder().setGroupId(FULL).setKind(GroupKind.FULL_ATTENTION).setBytesPerPage(PAGE_BYTES))
                .addGroups(GroupSpec.newBuilder().setGroupId(WINDOW).setKind(GroupKind.SLIDING_WINDOW).setBytesPerPage(PAGE_BYTES)
                        .setWindowTokens(2 * P))
                .addGroups(GroupSpec.newBuilder().setGroupId(RECURRENT).setKind(GroupKind.RECURRENT).setBytesPerPage(PAGE_BYTES)
                        .setCheckpointIntervalTokens(4 * P))
                .build();
    }

    /** Full attention only, for the budget tests. */
    static InstanceIdentity fullAttention() {
        return RunningManager.identity("budget-model", PAGE_BYTES).build();
    }

    static long seed(int group, int position, String doc) {
        return (doc + "/" + group + "/" + position).hashCode();
    }

    /** Allocates, fills and (when {@code seal}) seals the pages of {@code group} at {@code positions}; returns the publish id. */
    static long publish(EngineSession session, String doc, List<ByteString> chain, int group, List<Integer> positions,
                        boolean seal) {
        List<PageKey> keys = positions.stream()
                .map(p -> PageKey.newBuilder().setGroupId(group).setBlockHash(chain.get(p)).build()).toList();
        AllocatePublishReply allocated = session.allocate(keys).await();
        List<Integer> crcs = new ArrayList<>();
        for (int i = 0; i < allocated.getSlotsCount(); i++) {
            PublishSlot slot = allocated.getSlots(i);
            assertThat(slot.getStatus()).isEqualTo(SlotStatus.ALLOCATED);
            MemorySegment target = session.slot(slot.getSlot());
            PublishQueryRestoreIT.fill(target, seed(group, positions.get(i), doc));
            crcs.add(PublishQueryRestoreIT.crc(target));
        }
        if (seal) {
            session.seal(allocated.getPublishId(), crcs).await();
        }
        return allocated.getPublishId();
    }

    static List<Integer> range(int from, int to) {
        List<Integer> positions = new ArrayList<>();
        for (int p = from; p < to; p++) {
            positions.add(p);
        }
        return positions;
    }

    static BlockSpan span(int start, int end) {
        return BlockSpan.newBuilder().setStart(start).setEnd(end).build();
    }

    /** A demand from origin 0 to {@code endPages}, every group declaring [0, endPages). */
    static Demand.Builder demand(String request, long revision, long operation, List<ByteString> chain, int endPages) {
        Demand.Builder demand = Demand.newBuilder().setRequestId(request).setRevision(revision).setOperationId(operation)
                .setPageSizeTokens(P).setValidPrefixTokens(0).setSelectedEndTokens((long) endPages * P)
                .setSelectedGroupId(FULL).setPriority(1).setConfidence(0.9f).setFirstUseMicros(20_000);
        demand.addGroups(GroupDemand.newBuilder().setGroupId(FULL).addAllBlockHashes(chain.subList(0, endPages))
                .addRanges(span(0, endPages)));
        demand.addGroups(GroupDemand.newBuilder().setGroupId(WINDOW).addRanges(span(0, endPages)));
        demand.addGroups(GroupDemand.newBuilder().setGroupId(RECURRENT).addRanges(span(0, endPages)));
        return demand;
    }

    /** Positions per group of the lease, and every leased byte checked against what was published. */
    static Map<Integer, List<Integer>> verifyLease(EngineSession session, QueryReply reply, String doc) {
        Map<Integer, List<Integer>> positions = new java.util.TreeMap<>();
        for (LeasedPage page : reply.getLease().getPagesList()) {
            positions.computeIfAbsent(page.getGroupId(), g -> new ArrayList<>()).add(page.getPosition());
            MemorySegment copy = MemorySegment.ofArray(new byte[(int) page.getSlot().getLength()]);
            copy.copyFrom(session.slot(page.getSlot()));
            MemorySegment expected = MemorySegment.ofArray(new byte[(int) page.getSlot().getLength()]);
            PublishQueryRestoreIT.fill(expected, seed(page.getGroupId(), page.getPosition(), doc));
            assertThat(copy.mismatch(expected)).as("group %d page %d bytes", page.getGroupId(), page.getPosition()).isEqualTo(-1);
        }
        return positions;
    }

    /** Runs a call that must be refused and returns the refusal. */
    static OrbitKvException refused(Supplier<io.vertx.core.Future<?>> call) {
        OrbitKvException e = catchThrowableOfType(OrbitKvException.class, () -> call.get().await());
        assertThat(e).as("the call was refused").isNotNull();
        return e;
    }

    /** No lease, outstanding query or pinned image remains: through Stats and the real /metrics endpoint. */
    static void assertNothingHeld(RunningManager running, EngineSession session) throws Exception {
        StatsReply stats = session.stats().await();
        assertThat(stats.getActiveLeases()).as("active leases").isZero();
        assertThat(stats.getSessionOutstandingQueries()).as("outstanding queries").isZero();
        assertThat(running.metric("orbitkv_leases_active")).as("orbitkv_leases_active").isZero();
        assertThat(running.metric("orbitkv_images_pinned")).as("orbitkv_images_pinned").isZero();
        assertThat(running.metric("orbitkv_leases_bytes")).as("orbitkv_leases_bytes").isZero();
    }
}
