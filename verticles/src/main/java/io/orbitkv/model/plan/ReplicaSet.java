package io.orbitkv.model.plan;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.model.plan.ReplicaEvidence;
import io.orbitkv.model.plan.Medium;

/**
 * The replicas known for one key: at most one local DRAM record, at most one local SSD record, and at most
 * {@value #MAX_PEER_REPLICAS} peer records (at most one per member and medium). Immutable: every change returns a new
 * set, so a plan can hold the exact evidence it was built from.
 *
 * <p>Design note (bounds and refresh): the bound keeps discovery and planning cost per key constant however many peers
 * advertise a key. A peer refresh replaces that member's record for the medium and moves it to the tail; beyond the
 * bound the record refreshed longest ago is dropped (the caller counts it). Peer changes never touch the local records,
 * and local changes never touch peer records. An announcement from an older incarnation of a member, or an older
 * inventory sequence of the same incarnation, is ignored: the set keeps the newer evidence.
 *
 * <p>Design note (fencing): {@link #fence} drops a member's records older than its current incarnation (it restarted:
 * its old inventory is void); {@link #departed} drops all of them. Membership decides both; the set only applies them.
 */
public final class ReplicaSet {
    public static final int MAX_PEER_REPLICAS = 4;

    private static final ReplicaSet EMPTY = new ReplicaSet(null, null, List.of());

    private final ReplicaEvidence.LocalDram localDram;
    private final ReplicaEvidence.LocalSsd localSsd;
    /** Peer records, refreshed longest ago first. */
    private final List<ReplicaEvidence> peers;

    private ReplicaSet(ReplicaEvidence.LocalDram localDram, ReplicaEvidence.LocalSsd localSsd,
                       List<ReplicaEvidence> peers) {
        this.localDram = localDram;
        this.localSsd = localSsd;
        this.peers = peers;
    }

    public static ReplicaSet empty() {
        return EMPTY;
    }

    /** A set of local evidence; either may be null. */
    public static ReplicaSet local(ReplicaEvidence.LocalDram dram, ReplicaEvidence.LocalSsd ssd) {
        return dram == null && ssd == null ? EMPTY : new ReplicaSet(dram, ssd, List.of());
    }

    public Optional<ReplicaEvidence.LocalDram> localDram() {
        return Optional.ofNullable(localDram);
    }

    public Optional<ReplicaEvidence.LocalSsd> localSsd() {
        return Optional.ofNullable(localSsd);
    }

    /** Peer records, refreshed longest ago first. */
    public List<ReplicaEvidence> peers() {
        return peers;
    }

    /** Every record of {@code medium}: local media have at most one, peer media one per member. */
    public List<ReplicaEvidence> ofMedium(Medium medium) {
        return switch (medium) {
            case LOCAL_DRAM -> localDram == null ? List.of() : List.of(localDram);
            case LOCAL_SSD -> localSsd == null ? List.of() : List.of(localSsd);
            case PEER_DRAM, PEER_SSD -> peers.isEmpty() ? List.of() // the common single-Manager case: no stream
                    : peers.stream().filter(p -> p.medium() == medium).toList();
        };
    }

    public boolean isEmpty() {
        return localDram == null && localSsd == null && peers.isEmpty();
    }

    public int size() {
        return (localDram == null ? 0 : 1) + (localSsd == null ? 0 : 1) + peers.size();
    }

    public ReplicaSet withLocalDram(ReplicaEvidence.LocalDram dram) {
        return new ReplicaSet(Objects.requireNonNull(dram, "dram"), localSsd, peers);
    }

    public ReplicaSet withoutLocalDram() {
        return new ReplicaSet(null, localSsd, peers);
    }

    public ReplicaSet withLocalSsd(ReplicaEvidence.LocalSsd ssd) {
        return new ReplicaSet(localDram, Objects.requireNonNull(ssd, "ssd"), peers);
    }

    public ReplicaSet withoutLocalSsd() {
        return new ReplicaSet(localDram, null, peers);
    }

    /**
     * Adds or refreshes a peer record (see the design note). Returns this set unchanged when the record is older than
     * the one held for the same member and medium.
     */
    public ReplicaSet withPeer(ReplicaEvidence peer) {
        Objects.requireNonNull(peer, "peer");
        if (!peer.medium().isPeer()) {
            throw new IllegalArgumentException(peer.medium() + " evidence is not a peer record");
        }
        PeerOwner owner = peer.peerOwner().orElseThrow();
        List<ReplicaEvidence> next = new ArrayList<>(peers.size() + 1);
        for (ReplicaEvidence held : peers) {
            PeerOwner heldOwner = held.peerOwner().orElseThrow();
            if (held.medium() == peer.medium() && heldOwner.memberId().equals(owner.memberId())) {
                boolean older = owner.incarnation() < heldOwner.incarnation()
                        || (owner.incarnation() == heldOwner.incarnation() && sequence(peer) < sequence(held));
                if (older) {
                    return this;
                }
                continue; // replaced: the refreshed record goes to the tail
            }
            next.add(held);
        }
        next.add(peer);
        while (next.size() > MAX_PEER_REPLICAS) {
            next.removeFirst();
        }
        return new ReplicaSet(localDram, localSsd, List.copyOf(next));
    }

    /** Drops {@code memberId}'s record of {@code medium}, if any. */
    public ReplicaSet withoutPeer(String memberId, Medium medium) {
        return filterPeers(p -> !(p.medium() == medium && p.peerOwner().orElseThrow().memberId().equals(memberId)));
    }

    /** Drops {@code memberId}'s records from incarnations older than {@code currentIncarnation}. */
    public ReplicaSet fence(String memberId, long currentIncarnation) {
        return filterPeers(p -> {
            PeerOwner owner = p.peerOwner().orElseThrow();
            return !(owner.memberId().equals(memberId) && owner.incarnation() < currentIncarnation);
        });
    }

    /** Drops every record of a member that left. */
    public ReplicaSet departed(String memberId) {
        return filterPeers(p -> !p.peerOwner().orElseThrow().memberId().equals(memberId));
    }

    private ReplicaSet filterPeers(java.util.function.Predicate<ReplicaEvidence> keep) {
        List<ReplicaEvidence> next = peers.stream().filter(keep).toList();
        return next.size() == peers.size() ? this : new ReplicaSet(localDram, localSsd, next);
    }

    private static long sequence(ReplicaEvidence peer) {
        return switch (peer) {
            case ReplicaEvidence.PeerDram p -> p.inventorySequence();
            case ReplicaEvidence.PeerSsd p -> p.inventorySequence();
            default -> throw new IllegalArgumentException("not a peer record: " + peer.medium());
        };
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof ReplicaSet that && Objects.equals(localDram, that.localDram)
                && Objects.equals(localSsd, that.localSsd) && peers.equals(that.peers);
    }

    @Override
    public int hashCode() {
        return Objects.hash(localDram, localSsd, peers);
    }

    @Override
    public String toString() {
        return "ReplicaSet[dram=" + localDram + ", ssd=" + localSsd + ", peers=" + peers + "]";
    }
}
