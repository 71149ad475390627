package io.orbitkv.restore;

import io.orbitkv.protocol.engine.RestoreRoute;
import java.lang.foreign.MemorySegment;
import java.util.List;
import io.orbitkv.model.plan.RestoreTarget;
import io.orbitkv.model.plan.Restored;

/** Messages of the restore role and its per-device workers. Local records only. */
public final class RestoreCommands {
    private RestoreCommands() {}

    public enum DestinationKind { HOST_REGION, CUDA_IPC }

    /** One Manager-executed restore route's availability on this process; {@code cause} is empty when available. */
    public record RouteStatus(RestoreRoute route, boolean available, String cause) {}

    /** Where destination page i of a group lies: {@code baseOffset + i * strideBytes}, {@code pageBytes} long. */
    public record GroupLayout(int groupId, long baseOffset, long strideBytes, int pageCount, long pageBytes) {
        public long offsetOf(int pageIndex) {
            return baseOffset + pageIndex * strideBytes;
        }
    }

    /** A destination an engine registered, checked against its registration (groups, sizes, extents). */
    public record DestinationSpec(int id, DestinationKind kind, String hostPath, byte[] ipcHandle, int cudaDevice,
                                  long sizeBytes, List<GroupLayout> groups) {
        public DestinationSpec {
            groups = List.copyOf(groups);
        }

        public GroupLayout layout(int groupId) {
            for (GroupLayout g : groups) {
                if (g.groupId() == groupId) {
                    return g;
                }
            }
            return null;
        }

        public RestoreRoute nativeRoute() {
            return kind == DestinationKind.HOST_REGION ? RestoreRoute.HOST_REGION : RestoreRoute.CUDA_IPC;
        }
    }

    public record RegisterDestinations(long instance, List<DestinationSpec> destinations) {}

    public record Registered(List<RouteStatus> routes) {}

    /** One leased source page: its pool slot. */
    public record SourcePage(int groupId, int position, long poolOffset, long lengthBytes) {}

    /** Copy {@code sources} into the destination named by {@code target}; the future completes when all are terminal. */
    public record Execute(long instance, long ticket, RestoreTarget target, List<SourcePage> sources) {}

    public record Cancel(long instance, long ticket) {}

    public record ReleaseInstance(long instance) {}

    public record GetStats() {}

    /**
     * One device lane's admission: in flight now, the most ever, the bound, copies waiting, copies done; and where its
     * restores' time went ({@link LaneTimings}).
     */
    public record LaneStats(String device, int inFlight, int peakInFlight, int maxInFlight, int queuedCopies,
                            long completedCopies, LaneTimings timings) {}

    /**
     * Cumulative time of a lane's restores, on the role's clock (nanoseconds; divide by the counts). Per restore:
     * {@code executionNanos} from execute to terminal and {@code firstCopyNanos} from execute to its first batch
     * starting on the worker. Per batch: {@code handoffNanos} from the role sending it to the worker starting it,
     * {@code submitNanos} queueing its copies (each page's {@code cudaMemcpyAsync}; on the host lane the copies
     * themselves), {@code waitNanos} waiting for the stream's event after the last copy. {@code ipcImportNanos} sums
     * the CUDA IPC imports of destinations registered on the lane.
     */
    public record LaneTimings(long restores, long executionNanos, long firstCopyNanos, long batches, long copies,
                              long handoffNanos, long submitNanos, long waitNanos, long ipcImports,
                              long ipcImportNanos) {}

    /**
     * {@code poolRegistrationNanos}: how long pinning the pool mapping ({@code cudaHostRegister}, once at start) took;
     * -1 when the pool is not registered (no CUDA).
     */
    public record RestoreStats(List<LaneStats> lanes, int activeRestores, int cancellingRestores,
                               int mappedHostRegions, List<RouteStatus> routes, long poolRegistrationNanos) {
        public LaneStats lane(String device) {
            return lanes.stream().filter(l -> l.device().equals(device)).findFirst().orElse(null);
        }
    }

    /**
     * A batch of copies for one device worker: source offsets in the pool mapping, destination offsets in the host
     * region ({@code hostDestination}) or from the imported device base ({@code deviceBase}). Parallel arrays.
     */
    record CopyBatch(MemorySegment pool, MemorySegment hostDestination, long deviceBase, int device,
                     long[] sourceOffsets, long[] destinationOffsets, long[] lengths, long sentNanos) {}

    /**
     * A batch's terminal outcome: how many copies completed, each one's nanoseconds, the failure if any, and its
     * timing on the worker: when it started (after the gate), nanoseconds queueing its copies and waiting for them.
     */
    record BatchDone(int completed, long[] copyNanos, Throwable failure, long startedNanos, long submitNanos,
                     long waitNanos) {
        static BatchDone failed(int copies, Throwable failure) {
            return new BatchDone(0, new long[copies], failure, -1, 0, 0);
        }
    }

    /** Imports (or closes) a CUDA IPC allocation on a device worker's thread. */
    record ImportIpc(byte[] handle) {}

    record CloseIpc(long address) {}

    static final List<Class<?>> MESSAGE_TYPES = List.of(RegisterDestinations.class, Registered.class, Execute.class,
            Restored.class, Cancel.class, ReleaseInstance.class, GetStats.class, RestoreStats.class, CopyBatch.class,
            BatchDone.class, ImportIpc.class, CloseIpc.class);
}
