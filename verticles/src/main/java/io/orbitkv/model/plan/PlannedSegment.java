package io.orbitkv.model.plan;

import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.recovery.BlockRange;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.model.plan.PlannedPage;
import io.orbitkv.model.plan.Medium;

/**
 * A contiguous run of one group's required pages that one route moves from one source (one peer owner for peer
 * routes), with the evidence of every page and the completion target. The unit an execution owner acquires, and,
 * once submitted, the unit that is fenced: it is never moved to another medium before its work is terminal.
 *
 * @param bytes the registered bytes of the run (pages × bytes per page)
 */
public record PlannedSegment(int groupId, BlockRange range, RouteTemplate route, List<PlannedPage> pages, long bytes,
                             CompletionTarget target) {
    public PlannedSegment {
        Objects.requireNonNull(range, "range");
        Objects.requireNonNull(route, "route");
        Objects.requireNonNull(target, "target");
        pages = List.copyOf(pages);
        if (pages.size() != range.length()) {
            throw new IllegalArgumentException("segment " + range + " has " + pages.size() + " pages");
        }
        Optional<PeerOwner> owner = pages.getFirst().evidence().peerOwner();
        for (int i = 0; i < pages.size(); i++) {
            PlannedPage page = pages.get(i);
            if (page.position() != range.startInclusive() + i) {
                throw new IllegalArgumentException("page at " + page.position() + " out of order in " + range);
            }
            if (page.key().groupId() != groupId) {
                throw new IllegalArgumentException("page at " + page.position() + " belongs to group "
                        + page.key().groupId() + ", not " + groupId);
            }
            if (page.evidence().medium() != route.medium()) {
                throw new IllegalArgumentException(route + " reads " + route.medium() + ", page at " + page.position()
                        + " has " + page.evidence().medium() + " evidence");
            }
            if (!page.evidence().peerOwner().equals(owner)) {
                throw new IllegalArgumentException("one segment reads from one source");
            }
        }
        if (!route.serves(target)) {
            throw new IllegalArgumentException(route + " does not serve " + target.intent());
        }
        if (bytes < 0) {
            throw new IllegalArgumentException("bytes " + bytes + " is negative");
        }
    }

    /** The peer owner every page is read from; empty for local routes. */
    public Optional<PeerOwner> owner() {
        return pages.getFirst().evidence().peerOwner();
    }

    public boolean movesPayload() {
        return route.movesPayload(target);
    }

    /**
     * Whether reaching host-ready moves payload (a read back into pool slots): what the route's owner submits. For an
     * engine-restore target the device copy after it is the prepared plan's last step, not this segment's transfer.
     */
    public boolean movesPayloadToHost() {
        return route.movesPayload(CompletionTarget.hostReady());
    }

    public Medium medium() {
        return route.medium();
    }
}
