package io.orbitkv.storage;

import java.util.ArrayList;
import java.util.List;
import io.orbitkv.model.ResidencyEvent;
import io.orbitkv.model.ResidencyEvent.Change;
import io.orbitkv.model.ResidencyPage;
import io.orbitkv.model.StateKey;

/**
 * The Manager's residency stream: every change of what it holds per key, with a sequence number that is per owner
 * (this Manager's incarnation) and strictly increasing. Later peer streams carry it so peers can follow this
 * Manager's inventory incrementally and detect gaps.
 *
 * <p>Design note (bounds): the last {@code capacity} events are kept in a ring. A follower that asks for a sequence
 * older than the ring's tail gets {@link ResidencyPage#gap()} = true and must resynchronise from a snapshot. Owned by the
 * storage role's event loop; not thread-safe.
 */
final class ResidencyStream {
    private final long incarnation;
    private final ResidencyEvent[] ring;
    private long lastSequence;

    public ResidencyStream(long incarnation, int capacity) {
        if (capacity <= 0) {
            throw new IllegalArgumentException("capacity must be positive");
        }
        this.incarnation = incarnation;
        this.ring = new ResidencyEvent[capacity];
    }

    public long incarnation() {
        return incarnation;
    }

    public long lastSequence() {
        return lastSequence;
    }

    long append(Change change, StateKey key, long generation) {
        return append(change, key, generation, -1);
    }

    long append(Change change, StateKey key, long generation, long lengthBytes) {
        long sequence = ++lastSequence;
        ring[(int) (sequence % ring.length)] = new ResidencyEvent(sequence, change, key, generation, lengthBytes,
                System.currentTimeMillis());
        return sequence;
    }

    /** Events with sequence &gt; {@code after}, at most {@code max}. */
    public ResidencyPage since(long after, int max) {
        long oldest = Math.max(1, lastSequence - ring.length + 1);
        boolean gap = after + 1 < oldest;
        long from = Math.max(after + 1, oldest);
        List<ResidencyEvent> events = new ArrayList<>();
        for (long s = from; s <= lastSequence && events.size() < max; s++) {
            events.add(ring[(int) (s % ring.length)]);
        }
        return new ResidencyPage(events, gap, lastSequence);
    }
}
