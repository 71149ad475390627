package io.orbitkv.cluster;

import io.orbitkv.model.cost.RepresentationFamily;
import io.orbitkv.model.plan.ByteCount;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.model.plan.ReplicaEvidence;
import io.orbitkv.model.plan.ReplicaSet;
import io.orbitkv.model.StateKey;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import io.orbitkv.model.ResidencyEvent;

/**
 * What this Manager knows its peers hold: per member, the keys its inventory stream announced (DRAM and committed SSD,
 * with the owner's generation and stored bytes), the owner incarnation, and the last stream sequence applied. Pure
 * logic, confined to the inventory role's event loop.
 *
 * <p>Design note (sequences and gaps): a member's stream is applied only in order. A batch covering
 * {@code (after, last]} applies when {@code after <= applied < last} (events already applied are skipped, so a batch
 * overlapping a snapshot is fine); {@code last <= applied} is a duplicate; {@code after > applied} is a gap: the
 * member becomes unsynced and the caller resyncs it from a snapshot, which replaces everything known of it. A member
 * never synced, a new incarnation, and an owner's {@code reset} (its own ring lost events) all need a snapshot too.
 *
 * <p>Design note (bounds): at most {@code maxKeysPerPeer} keys per member. A key announced again moves to the tail;
 * beyond the cap the key announced longest ago is dropped first and counted ({@link #droppedOverCap()}). The number of
 * members is bounded by the cluster; each lookup visits each member once.
 *
 * <p>Design note (fencing): evidence of a member that left, of an older incarnation, or of every member while etcd
 * is unreachable (membership unknown) is dropped and counted ({@link #fenced()}); a batch of an older incarnation than
 * the one held is refused ({@link Outcome#FENCED}).
 */
final class InventoryDirectory {
    /** One change as the directory applies it (a delta event, or a snapshot key with sequence 0). */
    record Change(ResidencyEvent.Change change, StateKey key, long generation, long lengthBytes, long sequence,
                  long atMillis) {}

    enum Outcome {
        /** Applied in order. */
        APPLIED,
        /** Already applied (or older): nothing changed. */
        DUPLICATE,
        /** A sequence was skipped, or the owner reset its stream: resync from a snapshot. */
        GAP,
        /** Nothing known of this incarnation yet: resync from a snapshot. */
        NOT_SYNCED,
        /** From an older incarnation than the one held: refused. */
        FENCED
    }

    /** What a member holds of one key; generation -1 = not on that medium. */
    private static final class Held {
        long dramGeneration = -1;
        long dramBytes = -1;
        long dramSequence;
        long ssdGeneration = -1;
        long ssdBytes = -1;
        long ssdSequence;

        boolean empty() {
            return dramGeneration < 0 && ssdGeneration < 0;
        }
    }

    private static final class Peer {
        final long incarnation;
        long applied;
        boolean synced;
        final LinkedHashMap<StateKey, Held> keys = new LinkedHashMap<>();

        Peer(long incarnation) {
            this.incarnation = incarnation;
        }
    }

    private final int maxKeysPerPeer;
    private final Map<String, Peer> peers = new HashMap<>();
    private long droppedOverCap;
    private long fenced;

    InventoryDirectory(int maxKeysPerPeer) {
        if (maxKeysPerPeer <= 0) {
            throw new IllegalArgumentException("maxKeysPerPeer must be positive");
        }
        this.maxKeysPerPeer = maxKeysPerPeer;
    }

    /** Applies a batch of {@code owner}'s deltas covering {@code (after, last]}; {@code changes} in sequence order. */
    Outcome applyBatch(PeerOwner owner, long after, long last, boolean reset, List<Change> changes) {
        Peer peer = peers.get(owner.memberId());
        if (peer != null && owner.incarnation() < peer.incarnation) {
            return Outcome.FENCED;
        }
        if (peer != null && owner.incarnation() > peer.incarnation) {
            fence(owner.memberId(), owner.incarnation());
            peer = null;
        }
        if (peer == null || !peer.synced) {
            return Outcome.NOT_SYNCED;
        }
        if (reset) {
            peer.synced = false;
            return Outcome.GAP;
        }
        if (last <= peer.applied) {
            return Outcome.DUPLICATE;
        }
        if (after > peer.applied) {
            peer.synced = false;
            return Outcome.GAP;
        }
        for (Change change : changes) {
            if (change.sequence() > peer.applied) {
                apply(peer, change);
            }
        }
        peer.applied = last;
        return Outcome.APPLIED;
    }

    /** Replaces everything known of {@code owner} with its snapshot at {@code sequence}. */
    void applySnapshot(PeerOwner owner, long sequence, List<Change> resident) {
        Peer previous = peers.get(owner.memberId());
        if (previous != null && owner.incarnation() < previous.incarnation) {
            return;
        }
        if (previous != null && owner.incarnation() > previous.incarnation) {
            fenced += previous.keys.size();
        }
        Peer peer = new Peer(owner.incarnation());
        peer.applied = sequence;
        peer.synced = true;
        for (Change change : resident) {
            apply(peer, change);
        }
        peers.put(owner.memberId(), peer);
    }

    private void apply(Peer peer, Change change) {
        switch (change.change()) {
            case DRAM_ADDED, SSD_ADDED -> {
                Held held = peer.keys.remove(change.key());
                if (held == null) {
                    held = new Held();
                }
                if (change.change() == ResidencyEvent.Change.DRAM_ADDED) {
                    held.dramGeneration = change.generation();
                    held.dramBytes = change.lengthBytes();
                    held.dramSequence = change.sequence();
                } else {
                    held.ssdGeneration = change.generation();
                    held.ssdBytes = change.lengthBytes();
                    held.ssdSequence = change.sequence();
                }
                peer.keys.put(change.key(), held); // (re)announced: to the tail
                Iterator<Map.Entry<StateKey, Held>> eldest = peer.keys.entrySet().iterator();
                while (peer.keys.size() > maxKeysPerPeer) {
                    eldest.next();
                    eldest.remove();
                    droppedOverCap++;
                }
            }
            case DRAM_REMOVED, SSD_REMOVED -> {
                Held held = peer.keys.get(change.key());
                if (held == null) {
                    return;
                }
                if (change.change() == ResidencyEvent.Change.DRAM_REMOVED && held.dramGeneration == change.generation()) {
                    held.dramGeneration = -1;
                } else if (change.change() == ResidencyEvent.Change.SSD_REMOVED && held.ssdGeneration == change.generation()) {
                    held.ssdGeneration = -1;
                }
                if (held.empty()) {
                    peer.keys.remove(change.key());
                }
            }
        }
    }

    /** Drops a member's evidence of incarnations older than {@code currentIncarnation} (it restarted). */
    void fence(String memberId, long currentIncarnation) {
        Peer peer = peers.get(memberId);
        if (peer != null && peer.incarnation < currentIncarnation) {
            fenced += peer.keys.size();
            peers.remove(memberId);
        }
    }

    /** Drops everything of a member that left. */
    void departed(String memberId) {
        Peer peer = peers.remove(memberId);
        if (peer != null) {
            fenced += peer.keys.size();
        }
    }

    /** Drops every member's evidence (membership unknown: etcd unreachable for a lease ttl). */
    void clear() {
        for (Peer peer : peers.values()) {
            fenced += peer.keys.size();
        }
        peers.clear();
    }

    /** Marks a member unsynced (its next batch asks for a snapshot); its evidence stays until the snapshot. */
    void unsync(String memberId) {
        Peer peer = peers.get(memberId);
        if (peer != null) {
            peer.synced = false;
        }
    }

    /** {@code base} plus every member's record of {@code key} (owner, incarnation, sequence, generation, bytes). */
    ReplicaSet replicas(StateKey key, ReplicaSet base) {
        ReplicaSet set = base;
        for (Map.Entry<String, Peer> e : peers.entrySet()) {
            Held held = e.getValue().keys.get(key);
            if (held == null) {
                continue;
            }
            PeerOwner owner = new PeerOwner(e.getKey(), e.getValue().incarnation);
            // The key's namespace binds its representation (derived from the registered identity, representation
            // included), so a peer's image of the key holds the same registered representation as a local one.
            if (held.dramGeneration >= 0) {
                set = set.withPeer(new ReplicaEvidence.PeerDram(owner, held.dramSequence, held.dramGeneration,
                        bytes(held.dramBytes), RAW));
            }
            if (held.ssdGeneration >= 0) {
                set = set.withPeer(new ReplicaEvidence.PeerSsd(owner, held.ssdSequence, held.ssdGeneration,
                        bytes(held.ssdBytes), RAW));
            }
        }
        return set;
    }

    private static final Optional<RepresentationFamily> RAW = Optional.of(RepresentationFamily.RAW);

    private static ByteCount bytes(long n) {
        return n >= 0 ? ByteCount.of(n) : ByteCount.UNKNOWN;
    }

    /** Keys known of a member (0 when none). */
    int keys(String memberId) {
        Peer peer = peers.get(memberId);
        return peer == null ? 0 : peer.keys.size();
    }

    /** The incarnation known of a member, if any. */
    Optional<Long> incarnation(String memberId) {
        Peer peer = peers.get(memberId);
        return peer == null ? Optional.empty() : Optional.of(peer.incarnation);
    }

    boolean synced(String memberId) {
        Peer peer = peers.get(memberId);
        return peer != null && peer.synced;
    }

    Set<String> members() {
        return Set.copyOf(peers.keySet());
    }

    long droppedOverCap() {
        return droppedOverCap;
    }

    long fenced() {
        return fenced;
    }
}
