package io.orbitkv.model.plan;

import io.orbitkv.model.cost.RepresentationFamily;
import java.util.Objects;
import java.util.Optional;
import io.orbitkv.model.plan.ByteCount;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.model.plan.Medium;

/**
 * What the planner knows about one replica of one key, without reading or pinning it: the medium plus the acquisition
 * evidence that medium's execution owner revalidates when it acquires the replica. Each medium has its own record, so
 * an invalid combination (an SSD generation on a DRAM replica, a peer without an incarnation) cannot be built.
 *
 * <p>Evidence is never a grant. Acquisition compares it with the owner's current state exactly; a mismatch is a stale
 * replica (a replan before any payload moved), never a different copy of the bytes.
 */
public sealed interface ReplicaEvidence {

    Medium medium();

    /** Stored bytes of the replica as its owner reported them; unknown when not reported. */
    ByteCount storedBytes();

    /** The stored representation family; empty when the owner did not say (never assumed RAW). */
    Optional<RepresentationFamily> representation();

    /**
     * A page resident in this Manager's pool: a weak reference (the exact slot generation of the sealed image, which
     * pins nothing) and the residency-stream sequence it was observed at.
     */
    record LocalDram(long slotGeneration, long residencySequence, ByteCount storedBytes) implements ReplicaEvidence {
        public LocalDram {
            Objects.requireNonNull(storedBytes, "storedBytes");
        }

        @Override
        public Medium medium() {
            return Medium.LOCAL_DRAM;
        }

        /** The pool holds the registered representation: the namespace binds it. */
        @Override
        public Optional<RepresentationFamily> representation() {
            return Optional.of(RepresentationFamily.RAW);
        }
    }

    /** A committed extent of this Manager's SSD tier, at its exact generation (a ring overwrite changes it). */
    record LocalSsd(long extentGeneration, ByteCount storedBytes) implements ReplicaEvidence {
        public LocalSsd {
            Objects.requireNonNull(storedBytes, "storedBytes");
        }

        @Override
        public Medium medium() {
            return Medium.LOCAL_SSD;
        }

        @Override
        public Optional<RepresentationFamily> representation() {
            return Optional.of(RepresentationFamily.RAW);
        }
    }

    /**
     * A page in a peer's pool, from its inventory stream: owner and incarnation, the stream sequence that announced it,
     * and the owner's generation token for the page (revalidated by the owner when it authorizes the read).
     */
    record PeerDram(PeerOwner owner, long inventorySequence, long ownerGeneration, ByteCount storedBytes,
                    Optional<RepresentationFamily> representation) implements ReplicaEvidence {
        public PeerDram {
            Objects.requireNonNull(owner, "owner");
            Objects.requireNonNull(storedBytes, "storedBytes");
            Objects.requireNonNull(representation, "representation");
        }

        @Override
        public Medium medium() {
            return Medium.PEER_DRAM;
        }
    }

    /**
     * A committed extent on a peer's SSD, from its inventory stream. Never directly readable memory: the owner pins
     * the exact extent generation and stages it through its own io_uring reads before the transfer.
     */
    record PeerSsd(PeerOwner owner, long inventorySequence, long ownerGeneration, ByteCount storedBytes,
                   Optional<RepresentationFamily> representation) implements ReplicaEvidence {
        public PeerSsd {
            Objects.requireNonNull(owner, "owner");
            Objects.requireNonNull(storedBytes, "storedBytes");
            Objects.requireNonNull(representation, "representation");
        }

        @Override
        public Medium medium() {
            return Medium.PEER_SSD;
        }
    }

    /** The owner of a peer replica; empty for local media. */
    default Optional<PeerOwner> peerOwner() {
        return switch (this) {
            case PeerDram p -> Optional.of(p.owner());
            case PeerSsd p -> Optional.of(p.owner());
            case LocalDram l -> Optional.empty();
            case LocalSsd l -> Optional.empty();
        };
    }
}
