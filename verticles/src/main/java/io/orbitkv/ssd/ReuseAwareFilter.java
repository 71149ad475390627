package io.orbitkv.ssd;

import io.orbitkv.model.StateKey;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The bounded "sighted once" set behind {@link SsdWritePolicy#REUSE_AWARE}: LRU over keys, at most
 * {@code capacity} entries, so memory stays bounded whatever the key stream. A key forgotten by the LRU simply needs
 * two fresh sightings again. Role-thread confined.
 */
final class ReuseAwareFilter {
    private final int capacity;
    private final LinkedHashMap<StateKey, Boolean> seenOnce;
    private long forgotten;

    ReuseAwareFilter(int capacity) {
        this.capacity = capacity;
        this.seenOnce = new LinkedHashMap<>(Math.min(capacity, 1 << 16), 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<StateKey, Boolean> eldest) {
                if (size() > ReuseAwareFilter.this.capacity) {
                    forgotten++;
                    return true;
                }
                return false;
            }
        };
    }

    /** Records a sighting; true when this is at least the second one (the key is then forgotten: it is admitted). */
    boolean sightAndCheckReused(StateKey key) {
        if (seenOnce.remove(key) != null) {
            return true;
        }
        seenOnce.put(key, Boolean.TRUE);
        return false;
    }

    /** Records a sighting that does not itself ask for a write (e.g. the key was reused from DRAM). */
    void sight(StateKey key) {
        seenOnce.put(key, Boolean.TRUE);
    }

    int size() {
        return seenOnce.size();
    }

    long forgotten() {
        return forgotten;
    }
}
