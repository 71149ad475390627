package io.orbitkv.ssd;

import io.orbitkv.ssd.SsdLayout.Extent;
import io.orbitkv.model.StateKey;
import java.util.HashMap;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import io.orbitkv.model.SsdResidencyChange;

/**
 * The committed extents by key, and the residency stream that reports each change of them to the store's listener.
 *
 * <p>Design note: role-thread confined; only {@link #committedGauge()} (a volatile mirror of the size) is read from
 * other threads. An extent is {@linkplain #add added} only at its publication boundary (its commit header's
 * completion, or found committed by the recovery scan) and {@linkplain #withdraw withdrawn} before any byte of its
 * region changes, so what the index holds is exactly what may be served. A failing listener is logged, never
 * propagated: the index stays the truth.
 */
final class SsdIndex {

    private static final Logger LOG = LoggerFactory.getLogger(SsdStore.class);

    private final Map<StateKey, Extent> byKey = new HashMap<>();
    private final SsdListener listener;
    private volatile int committedGauge;

    SsdIndex(SsdListener listener) {
        this.listener = listener;
    }

    Extent get(StateKey key) {
        return byKey.get(key);
    }

    boolean contains(StateKey key) {
        return byKey.containsKey(key);
    }

    int size() {
        return byKey.size();
    }

    /** Indexes a committed extent (its state already COMMITTED); the caller emits its {@code SSD_ADDED}. */
    void add(Extent extent) {
        byKey.put(extent.key, extent);
        committedGauge = byKey.size();
    }

    /** Takes the extent out of the index and emits {@code SSD_REMOVED} with {@code cause}. */
    void withdraw(Extent extent, SsdResidencyChange.Cause cause) {
        byKey.remove(extent.key);
        committedGauge = byKey.size();
        emit(SsdResidencyChange.Kind.SSD_REMOVED, extent, cause);
    }

    void clear() {
        byKey.clear();
        committedGauge = 0;
    }

    void emit(SsdResidencyChange.Kind kind, Extent extent, SsdResidencyChange.Cause cause) {
        try {
            listener.onResidencyChange(new SsdResidencyChange(kind, extent.key, extent.generation,
                    extent.payloadLength, cause));
        } catch (RuntimeException e) {
            LOG.warn("SSD residency listener failed", e);
        }
    }

    /** The number of committed extents; any thread. */
    int committedGauge() {
        return committedGauge;
    }
}
