package io.orbitkv.model.plan;

import io.orbitkv.model.StateKey;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import io.orbitkv.model.plan.Medium;
import io.orbitkv.model.plan.ReplicaEvidence;
import io.orbitkv.model.plan.ReplicaSet;

/**
 * The replica sets found for a demand's keys in one discovery pass (metadata only: nothing is pinned or read). A key
 * without an entry has no known replica. Immutable; {@link #withoutStale} makes the next pass after an acquisition
 * found a record stale.
 */
public final class DemandEvidence {
    private static final DemandEvidence NONE = new DemandEvidence(Map.of(), Set.of());

    private final Map<StateKey, ReplicaSet> byKey;
    /** Keys whose local image is being written (a publish or a read back): no replica yet, maybe soon. */
    private final Set<StateKey> writing;

    private DemandEvidence(Map<StateKey, ReplicaSet> byKey, Set<StateKey> writing) {
        this.byKey = byKey;
        this.writing = writing;
    }

    public static DemandEvidence none() {
        return NONE;
    }

    public static DemandEvidence of(Map<StateKey, ReplicaSet> byKey) {
        // One copy, read-only from here on (runs per query: no second copy into an immutable map).
        Map<StateKey, ReplicaSet> copy = HashMap.newHashMap(byKey.size());
        for (Map.Entry<StateKey, ReplicaSet> entry : byKey.entrySet()) {
            if (!Objects.requireNonNull(entry.getValue(), "replica set").isEmpty()) {
                copy.put(Objects.requireNonNull(entry.getKey(), "key"), entry.getValue());
            }
        }
        return new DemandEvidence(Collections.unmodifiableMap(copy), Set.of());
    }

    /**
     * As {@link #of}, without its copy: takes ownership of a map its caller built for this evidence alone, with no
     * empty set and no null, and never touches again (discovery runs per query).
     */
    public static DemandEvidence adopt(HashMap<StateKey, ReplicaSet> byKey) {
        return new DemandEvidence(Collections.unmodifiableMap(byKey), Set.of());
    }

    /** This evidence plus the keys being written locally now (not replicas: nothing to acquire yet). */
    public DemandEvidence withWriting(Set<StateKey> keys) {
        if (keys.isEmpty() && writing.isEmpty()) {
            return this;
        }
        return new DemandEvidence(byKey, Set.copyOf(keys));
    }

    /** Whether the key's local image is being written now (a publish in progress or a read back from SSD). */
    public boolean writing(StateKey key) {
        return writing.contains(key);
    }

    /** The keys being written locally now (see {@link #writing}). */
    public Set<StateKey> writingKeys() {
        return writing;
    }

    public ReplicaSet replicas(StateKey key) {
        return byKey.getOrDefault(key, ReplicaSet.empty());
    }

    public int keys() {
        return byKey.size();
    }

    /** This evidence without one record that acquisition found stale (other replicas of the key stay). */
    public DemandEvidence withoutStale(StateKey key, ReplicaEvidence stale) {
        ReplicaSet set = byKey.get(key);
        if (set == null) {
            return this;
        }
        ReplicaSet next = switch (stale) {
            case ReplicaEvidence.LocalDram d -> set.localDram().filter(d::equals).isPresent() ? set.withoutLocalDram() : set;
            case ReplicaEvidence.LocalSsd s -> set.localSsd().filter(s::equals).isPresent() ? set.withoutLocalSsd() : set;
            case ReplicaEvidence.PeerDram p -> set.peers().contains(p)
                    ? set.withoutPeer(p.owner().memberId(), Medium.PEER_DRAM) : set;
            case ReplicaEvidence.PeerSsd p -> set.peers().contains(p)
                    ? set.withoutPeer(p.owner().memberId(), Medium.PEER_SSD) : set;
        };
        if (next == set) {
            return this;
        }
        Map<StateKey, ReplicaSet> copy = new HashMap<>(byKey);
        if (next.isEmpty()) {
            copy.remove(key);
        } else {
            copy.put(key, next);
        }
        return new DemandEvidence(Map.copyOf(copy), writing);
    }
}
