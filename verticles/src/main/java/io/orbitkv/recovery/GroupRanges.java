package io.orbitkv.recovery;

import java.util.List;
import java.util.Objects;

/**
 * The block ranges of one group: those the contract requires for a boundary, or those an engine declares in a demand.
 *
 * <p>The record accepts any list of ranges so that an engine's malformed declaration can be represented and then
 * rejected with a precise reason by {@link DemandValidator}; ranges produced by {@link RecoveryContract} are always
 * ascending and disjoint.
 */
public record GroupRanges(int groupId, List<BlockRange> ranges) {

    public GroupRanges {
        ranges = List.copyOf(Objects.requireNonNull(ranges, "ranges"));
    }

    public static GroupRanges of(int groupId, BlockRange... ranges) {
        return new GroupRanges(groupId, List.of(ranges));
    }

    /** How many pages the ranges name, counting a position named twice (only possible in a bad demand) twice. */
    public long pageCount() {
        long pages = 0;
        for (BlockRange range : ranges) {
            pages += range.length();
        }
        return pages;
    }
}
