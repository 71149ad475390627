package io.orbitkv.model.plan;

import io.orbitkv.model.cost.ResourceId;
import io.orbitkv.model.cost.ResourceKind;
import io.orbitkv.protocol.engine.RestoreRoute;
import java.util.List;

/**
 * A validated engine-restore completion target of a demand: the registered destination, the route (resolved: never
 * UNSPECIFIED) and, per group, the destination page index of each block position the demand declared. Only the
 * positions the answered boundary requires are copied.
 */
public record RestoreTarget(int destinationId, RestoreRoute route, List<GroupPages> groups, int cudaDevice) {
    public RestoreTarget {
        groups = List.copyOf(groups);
    }

    /** A target whose device is not known (CUDA routes then name device 0); host-region targets need none. */
    public RestoreTarget(int destinationId, RestoreRoute route, List<GroupPages> groups) {
        this(destinationId, route, groups, -1);
    }

    /**
     * The device the copies land on, as the restore role's lanes name it in cost keys (the resource of an engine-restore
     * completion target): the engine's host memory for a host region, else the CUDA device.
     */
    public ResourceId device(long incarnation) {
        return deviceResource(route == RestoreRoute.HOST_REGION ? -1 : Math.max(0, cudaDevice), incarnation);
    }

    /** A restore lane's resource: {@code cudaDevice < 0} is the engine's host memory. */
    public static ResourceId deviceResource(int cudaDevice, long incarnation) {
        return new ResourceId(cudaDevice < 0 ? ResourceKind.DRAM_POOL : ResourceKind.GPU_DEVICE,
                cudaDevice < 0 ? "engine-host-memory" : "cuda:" + cudaDevice, incarnation);
    }

    /** {@code positions} ascending, {@code pageIndices} parallel to them. */
    public record GroupPages(int groupId, List<Integer> positions, List<Integer> pageIndices) {
        public GroupPages {
            positions = List.copyOf(positions);
            pageIndices = List.copyOf(pageIndices);
        }

        /** The destination page of {@code position}, or -1 when the demand did not declare it. */
        public int pageIndexOf(int position) {
            int i = java.util.Collections.binarySearch(positions, position);
            return i < 0 ? -1 : pageIndices.get(i);
        }
    }

    public GroupPages group(int groupId) {
        for (GroupPages g : groups) {
            if (g.groupId() == groupId) {
                return g;
            }
        }
        return null;
    }
}
