package io.orbitkv.engine;

import io.orbitkv.common.OrbitException;
import io.orbitkv.model.AllocateResult;
import io.orbitkv.model.ProducerState;
import io.orbitkv.model.StateKey;
import io.orbitkv.protocol.engine.ErrorReason;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.BiPredicate;

/**
 * What each producer session sealed under each of its requests (P/D): the engine role's evidence for a consumer's
 * {@code Demand.producer}. A publish tagged with a request id ({@code AllocatePublishRequest.request_id}) is remembered
 * from its allocation to its seal; at the seal its keys (allocated and ALREADY_PRESENT alike) join the session's record
 * of that request. A consumer's wait asks {@link #status}: SEALED once every page it demands is in the record, ENDED
 * once the session is gone.
 *
 * <p>Design note (ownership): this table holds keys and request ids only, never a page, pin or byte budget, so
 * nothing here has to be released for the pool's sake. A session's tags and records go when it ends
 * ({@link #ended}: unregister, lapse, resume), so a new session of the same instance (a new epoch) never inherits them.
 * A tagged publish that aborts is forgotten. Bounds: at most {@link #MAX_TAGGED_PUBLISHES} tagged publishes open (one
 * more is refused TOO_MANY_OUTSTANDING before anything is allocated) and at most {@link #MAX_RECORDED_KEYS} keys over
 * all records (the oldest request's record goes first; a consumer still waiting for it then waits out its budget and
 * answers MISS). Request ids are correlation keys: never logged. Confined to the engine role's loop.
 */
final class ProducerSeals {
    static final int MAX_TAGGED_PUBLISHES = 1 << 14;
    static final int MAX_RECORDED_KEYS = 1 << 18;

    private record Session(long instance, long epoch) {}

    private record Tagged(Session session, String requestId, List<StateKey> keys) {}

    private final BiPredicate<Long, Long> live;
    private final int maxTagged;
    private final int maxKeys;
    private final Map<Long, Tagged> tagged = new HashMap<>();
    /** Per session, its requests' sealed keys in the order the records were opened (oldest first). */
    private final Map<Session, LinkedHashMap<String, Set<StateKey>>> records = new HashMap<>();
    /** Records' keys in opening order over all sessions, for the global bound. */
    private final LinkedHashMap<Record, Integer> byAge = new LinkedHashMap<>();
    private long recordedKeys;
    private long recordsDropped;

    private record Record(Session session, String requestId) {}

    /** {@code live(instance, epoch)}: whether that session is registered now. */
    ProducerSeals(BiPredicate<Long, Long> live) {
        this(live, MAX_TAGGED_PUBLISHES, MAX_RECORDED_KEYS);
    }

    ProducerSeals(BiPredicate<Long, Long> live, int maxTagged, int maxKeys) {
        this.live = live;
        this.maxTagged = maxTagged;
        this.maxKeys = maxKeys;
    }

    /** Refuses a tagged publish the table has no room to follow (before anything is allocated). */
    void requireRoom() {
        if (tagged.size() >= maxTagged) {
            throw new OrbitException(ErrorReason.TOO_MANY_OUTSTANDING, tagged.size()
                    + " publishes tagged with a request id are open; seal or abort some first");
        }
    }

    /**
     * A tagged publish was allocated: its stored keys (allocated and ALREADY_PRESENT) count once it seals; one with
     * nothing to write has no seal to come and counts at once.
     */
    void allocated(long instance, long epoch, String requestId, List<StateKey> keys, AllocateResult result) {
        Session session = new Session(instance, epoch);
        if (result.slots().stream().noneMatch(s -> s.allocated())) {
            record(session, requestId, keys);
        } else {
            tagged.put(result.publishId(), new Tagged(session, requestId, List.copyOf(keys)));
        }
    }

    /** The publish sealed: its keys join its request's record, if its session is still the live one. */
    void sealed(long publishId) {
        Tagged t = tagged.remove(publishId);
        if (t != null && live.test(t.session().instance(), t.session().epoch())) {
            record(t.session(), t.requestId(), t.keys());
        }
    }

    void aborted(long publishId) {
        tagged.remove(publishId);
    }

    /** The instance's session ended: its tags and records go. */
    void ended(long instance) {
        tagged.values().removeIf(t -> t.session().instance() == instance);
        Iterator<Map.Entry<Session, LinkedHashMap<String, Set<StateKey>>>> it = records.entrySet().iterator();
        while (it.hasNext()) {
            Map.Entry<Session, LinkedHashMap<String, Set<StateKey>>> e = it.next();
            if (e.getKey().instance() == instance) {
                for (Map.Entry<String, Set<StateKey>> r : e.getValue().entrySet()) {
                    recordedKeys -= r.getValue().size();
                    byAge.remove(new Record(e.getKey(), r.getKey()));
                }
                it.remove();
            }
        }
    }

    /** Where the named session stands for {@code keys} under {@code requestId}. */
    ProducerState status(long instance, long epoch, String requestId, List<StateKey> keys) {
        Session session = new Session(instance, epoch);
        if (!live.test(instance, epoch)) {
            return ProducerState.ENDED;
        }
        Map<String, Set<StateKey>> mine = records.get(session);
        Set<StateKey> sealed = mine == null ? null : mine.get(requestId);
        return sealed != null && sealed.containsAll(keys) ? ProducerState.SEALED : ProducerState.WAITING;
    }

    int taggedPublishes() {
        return tagged.size();
    }

    long recordedKeys() {
        return recordedKeys;
    }

    long recordsDropped() {
        return recordsDropped;
    }

    private void record(Session session, String requestId, List<StateKey> keys) {
        Set<StateKey> set = records.computeIfAbsent(session, s -> new LinkedHashMap<>())
                .computeIfAbsent(requestId, r -> new HashSet<>());
        int before = set.size();
        set.addAll(keys);
        recordedKeys += set.size() - before;
        byAge.putIfAbsent(new Record(session, requestId), 0);
        while (recordedKeys > maxKeys && !byAge.isEmpty()) {
            Record oldest = byAge.keySet().iterator().next();
            byAge.remove(oldest);
            LinkedHashMap<String, Set<StateKey>> of = records.get(oldest.session());
            Set<StateKey> dropped = of.remove(oldest.requestId());
            recordedKeys -= dropped.size();
            recordsDropped++;
            if (of.isEmpty()) {
                records.remove(oldest.session());
            }
        }
    }

    /** For tests: the keys recorded for a request (empty when none). */
    List<StateKey> recorded(long instance, long epoch, String requestId) {
        Map<String, Set<StateKey>> mine = records.get(new Session(instance, epoch));
        Set<StateKey> set = mine == null ? null : mine.get(requestId);
        return set == null ? List.of() : new ArrayList<>(set);
    }
}
