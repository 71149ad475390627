package io.orbitkv.restore;

import io.orbitkv.protocol.engine.RestoreRoute;
import java.util.List;

/**
 * A validated engine-restore completion target of a demand: the registered destination, the route (resolved: never
 * UNSPECIFIED) and, per group, the destination page index of each block position the demand declared. Only the
 * positions the answered boundary requires are copied.
 */
public record RestoreTarget(int destinationId, RestoreRoute route, List<GroupPages> groups) {
    public RestoreTarget {
        groups = List.copyOf(groups);
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
