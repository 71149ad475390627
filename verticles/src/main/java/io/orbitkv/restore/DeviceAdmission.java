package io.orbitkv.restore;

/**
 * The per-device admission owner: at most {@code maxInFlight} copy operations submitted to one device at once.
 *
 * <p>Design note: a credit is taken when a copy is submitted to the device's worker and given back only when that
 * copy is terminal (completed, failed, or finished after its restore was cancelled): a cancelled restore's submitted
 * copies keep their credits, and so their destination pages and sources, until they drain. Queued (not yet submitted)
 * copies hold nothing. Confined to the restore role's event loop.
 */
final class DeviceAdmission {
    /** The design's bound: 128 operations in flight per device. */
    static final int DEFAULT_MAX_IN_FLIGHT = 128;

    private final int maxInFlight;
    private int inFlight;
    private int peakInFlight;
    private long completed;

    DeviceAdmission(int maxInFlight) {
        if (maxInFlight <= 0) {
            throw new IllegalArgumentException("max in flight must be positive, got " + maxInFlight);
        }
        this.maxInFlight = maxInFlight;
    }

    /** Takes up to {@code wanted} credits; answers how many were granted (0 when the device is full). */
    int acquire(int wanted) {
        int granted = Math.min(wanted, maxInFlight - inFlight);
        if (granted <= 0) {
            return 0;
        }
        inFlight += granted;
        peakInFlight = Math.max(peakInFlight, inFlight);
        return granted;
    }

    /** Gives back the credits of {@code copies} terminal copies. */
    void release(int copies) {
        if (copies < 0 || copies > inFlight) {
            throw new IllegalStateException("releasing " + copies + " credits with " + inFlight + " in flight");
        }
        inFlight -= copies;
        completed += copies;
    }

    int inFlight() {
        return inFlight;
    }

    int peakInFlight() {
        return peakInFlight;
    }

    int maxInFlight() {
        return maxInFlight;
    }

    long completed() {
        return completed;
    }
}
