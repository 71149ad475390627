package io.orbitkv.model.plan;

import java.util.List;
import java.util.Objects;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.plan.PlannedSegment;

/**
 * What an execution owner holds for one planned segment, from acquisition to release: its source leases and
 * destination credits, and once the state is host-ready, the pinned local DRAM pages holding it (in segment order).
 * The owner alone knows what the id stands for; planning and admission only hand the lease back to it.
 *
 * @param hostPages the pinned pool pages with the segment's bytes, one per page in order, once host-ready; empty
 *                  before that and for an engine-restore target (the bytes are in the engine then)
 */
public record SegmentLease(long leaseId, PlannedSegment segment, List<ImageRef> hostPages) {
    public SegmentLease {
        Objects.requireNonNull(segment, "segment");
        hostPages = List.copyOf(hostPages);
        if (!hostPages.isEmpty() && hostPages.size() != segment.pages().size()) {
            throw new IllegalArgumentException(hostPages.size() + " host pages for a segment of "
                    + segment.pages().size());
        }
    }

    public SegmentLease withHostPages(List<ImageRef> pages) {
        return new SegmentLease(leaseId, segment, pages);
    }
}
