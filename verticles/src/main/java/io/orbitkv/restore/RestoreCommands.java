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

    public record Registered(List<RestoreRoutes.RouteStatus> routes) {}

    /** One leased source page: its pool slot. */
    public record SourcePage(int groupId, int position, long poolOffset, long lengthBytes) {}

    /** Copy {@code sources} into the destination named by {@code target}; the future completes when all are terminal. */
    public record Execute(long instance, long ticket, RestoreTarget target, List<SourcePage> sources) {}

    public record Cancel(long instance, long ticket) {}

    public record ReleaseInstance(long instance) {}

    public record GetStats() {}

    /** One device lane's admission: in flight now, the most ever, the bound, copies waiting, copies done. */
    public record LaneStats(String device, int inFlight, int peakInFlight, int maxInFlight, int queuedCopies,
                            long completedCopies) {}

    public record RestoreStats(List<LaneStats> lanes, int activeRestores, int cancellingRestores,
                               int mappedHostRegions, List<RestoreRoutes.RouteStatus> routes) {
        public LaneStats lane(String device) {
            return lanes.stream().filter(l -> l.device().equals(device)).findFirst().orElse(null);
        }
    }

    /**
     * A batch of copies for one device worker: source offsets in the pool mapping, destination offsets in the host
     * region ({@code hostDestination}) or from the imported device base ({@code deviceBase}). Parallel arrays.
     */
    record CopyBatch(MemorySegment pool, MemorySegment hostDestination, long deviceBase, int device,
                     long[] sourceOffsets, long[] destinationOffsets, long[] lengths) {}

    /** A batch's terminal outcome: how many copies completed, each one's nanoseconds, and the failure if any. */
    record BatchDone(int completed, long[] copyNanos, Throwable failure) {}

    /** Imports (or closes) a CUDA IPC allocation on a device worker's thread. */
    record ImportIpc(byte[] handle) {}

    record CloseIpc(long address) {}

    static final List<Class<?>> MESSAGE_TYPES = List.of(RegisterDestinations.class, Registered.class, Execute.class,
            Restored.class, Cancel.class, ReleaseInstance.class, GetStats.class, RestoreStats.class, CopyBatch.class,
            BatchDone.class, ImportIpc.class, CloseIpc.class);
}
