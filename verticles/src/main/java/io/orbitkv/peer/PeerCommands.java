package io.orbitkv.peer;

import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.model.cost.CostEstimateKey;
import io.orbitkv.model.cost.CostPath;
import io.orbitkv.model.cost.RepresentationFamily;
import io.orbitkv.model.cost.ResourceId;
import io.orbitkv.model.cost.ResourceKind;
import io.orbitkv.model.cost.SizeBucket;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.protocol.peer.PeerGrant;
import io.orbitkv.protocol.peer.PeerPage;
import io.orbitkv.protocol.peer.PeerTransferGrpcClient;
import io.orbitkv.model.StateKey;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import io.orbitkv.model.ImageRef;

/** Messages the peer role accepts ({@link PeerProxy}). Local records only. */
public final class PeerCommands {
    private PeerCommands() {}

    /** The stages of a fetch (the answer's states), in order. */
    public enum Stage { CANDIDATE, RESERVED, RESIDENT, READY }

    /**
     * The pages {@code keys} of the peer {@code owner} at its exact {@code generations}; {@code fromSsd.get(i)}: that
     * generation is the owner's committed SSD extent generation (the owner stages the page before it grants), an empty
     * list: all are DRAM slot generations. {@code budget} bounds the whole attempt, from the reserve to READY.
     */
    public record Pages(PeerOwner owner, byte[] namespace, List<StateKey> keys, List<Long> generations,
                        List<Boolean> fromSsd, Duration budget) {
        public Pages {
            keys = List.copyOf(keys);
            generations = List.copyOf(generations);
            fromSsd = List.copyOf(fromSsd);
        }
    }

    /** CANDIDATE → RESERVED: the source lease, then the local slots; no payload moves. */
    public record Acquire(Pages pages) {}

    /**
     * RESERVED → READY: the payload into the slots, then the checksum-verified seal; with {@code pin}, the seal also
     * pins every page of the fetch in the same storage step (the caller owns the pins: {@link Fetched#pinned}).
     */
    public record Submit(Acquired acquired, boolean pin) {}

    /** Ends an acquired fetch that will not be submitted: its local slots and the source lease go. */
    public record Abandon(Acquired acquired) {}

    /** Acquire then submit (no pins kept). */
    public record Fetch(Pages pages) {}

    /**
     * A completed fetch: the local references of the pages written here (sealed), the bytes moved, the stages passed,
     * and, for a pinning submit, one pinned reference per requested key (request order; unpin with the storage role).
     */
    public record Fetched(List<ImageRef> local, long bytes, List<Stage> stages,
                          List<ImageRef> pinned) {}

    /**
     * What an acquired fetch holds: the source lease (grant) and the local publish whose slots will receive the pages.
     * Exactly one of submit or abandon ends it. Confined to the peer role's context.
     */
    public static final class Acquired {
        final PeerTransferGrpcClient client;
        final PeerGrant grant;
        final long publishId;
        final List<PeerTransport.Destination> destinations;
        final List<ImageRef> written;
        final List<Integer> crcs;
        final List<Long> lengths;
        final List<StateKey> keys;
        /** When the attempt's budget ends, on the requester's clock, and how long that budget was. */
        final long deadlineNanos;
        final long budgetNanos;
        final List<Stage> stages;
        /** Which destinations are local slots (the others: pages already resident here, received into scratch). */
        final List<Integer> slotDestinations = new ArrayList<>();
        final PeerOwner owner;
        final long startedNanos;

        Acquired(PeerTransferGrpcClient client, PeerGrant grant, long publishId,
                 List<PeerTransport.Destination> destinations, List<ImageRef> written, List<Integer> crcs,
                 List<Long> lengths, List<StateKey> keys, long deadlineNanos, long budgetNanos, List<Stage> stages,
                 PeerOwner owner, long startedNanos) {
            this.client = client;
            this.grant = grant;
            this.publishId = publishId;
            this.destinations = destinations;
            this.written = written;
            this.crcs = crcs;
            this.lengths = lengths;
            this.keys = keys;
            this.deadlineNanos = deadlineNanos;
            this.budgetNanos = budgetNanos;
            this.stages = stages;
            this.owner = owner;
            this.startedNanos = startedNanos;
        }

        public List<StateKey> keys() {
            return keys;
        }

        /** Pages the source staged from its SSD for this lease (peer SSD evidence), as its grant says. */
        public int stagedPages() {
            return (int) grant.getPagesList().stream().filter(PeerPage::getStaged).count();
        }

        long bytes() {
            return lengths.stream().mapToLong(Long::longValue).sum();
        }
    }

    /** The cost key of a peer sample: the peer Manager at its incarnation, the bytes and pages of the lease. */
    public static CostEstimateKey costKey(CostPath path, PeerOwner owner, long bytes, int pages) {
        ResourceId peer = new ResourceId(ResourceKind.PEER_MANAGER, owner.memberId(), owner.incarnation());
        return path == CostPath.PEER_FETCH
                ? CostEstimateKey.operation(path, peer, RepresentationFamily.RAW, SizeBucket.of(bytes), SizeBucket.of(pages))
                : CostEstimateKey.route(path, peer, RepresentationFamily.RAW, SizeBucket.of(bytes), SizeBucket.of(pages),
                        CompletionTarget.hostReady());
    }

    static final List<Class<?>> MESSAGE_TYPES = List.of(Acquire.class, Submit.class, Abandon.class, Fetch.class,
            Acquired.class, Fetched.class);
}
