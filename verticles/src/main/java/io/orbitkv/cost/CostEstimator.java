package io.orbitkv.cost;

import io.orbitkv.common.Ticker;
import java.util.HashMap;
import java.util.Objects;
import java.util.OptionalLong;
import java.util.concurrent.TimeUnit;
import io.orbitkv.model.cost.CostEstimateKey;
import io.orbitkv.model.cost.ObservationOutcome;
import io.orbitkv.model.cost.CostEstimate;
import io.orbitkv.model.cost.CostEstimateResult;

/**
 * Bounded table of EWMA completion-time estimates keyed by {@link CostEstimateKey}.
 *
 * <p>Design note — concurrency: owned by the cost verticle's event loop; no locks, no shared state. Other roles reach
 * it only through {@link CostProxy}.
 *
 * <p>Design note — training: only {@link ObservationOutcome#SUCCEEDED} observations with a duration train an entry.
 * Failed, cancelled, abandoned and (censored) timed-out work never creates, refreshes or moves an entry. With
 * {@code alpha = 0.2}, a sample {@code x} (nanos, as a double) updates the entry as follows:
 * <pre>
 *   first sample (count 0 -> 1):  mean = x;  error = 0
 *   later samples:                  e = |x - mean|          (prediction error of the mean before this sample)
 *                                   error = error + alpha * (e - error)      // = 0.8 * error + 0.2 * e
 *                                   mean  = mean  + alpha * (x - mean)       // = 0.8 * mean  + 0.2 * x
 * </pre>
 * Published nanos are {@code Math.round} of the doubles. The error is an empirical margin, not a calibrated interval.
 *
 * <p>Design note — warm-up and expiry: an entry is usable once it holds {@value #WARMUP_SAMPLES} successful samples.
 * It is expired when {@code now - lastUpdate >= 5 minutes}; an expired entry is not usable, and its next successful
 * sample restarts it from zero (count 1, error 0) so stale evidence must warm up again.
 *
 * <p>Design note — eviction: at most {@value #MAX_ENTRIES} entries. The entries are linked in last-update order (a
 * trained entry is moved to the tail); inserting a new key beyond the bound evicts the head, the entry updated longest
 * ago. Lookups do not reorder. The order is a list through the entries themselves, so training an existing key is
 * one hash lookup.
 */
final class CostEstimator {

    static final int MAX_ENTRIES = 512;
    static final int WARMUP_SAMPLES = 4;
    static final long EXPIRY_NANOS = TimeUnit.MINUTES.toNanos(5);
    static final double ALPHA = 0.2;

    /** What one {@link #train} call did. */
    enum Training {
        /** The sample updated the entry. */
        TRAINED,
        /** The outcome was not a success: nothing changed. */
        NOT_SUCCEEDED,
        /** A success without a measured duration: nothing changed. */
        NO_DURATION
    }

    /**
     * @param training           what happened
     * @param restartedExpired   the entry was expired and restarted from zero with this sample
     * @param evictedOldest      inserting this key evicted the entry updated longest ago
     * @param predictionErrorNanos |sample - prior mean| when the prior estimate was usable; empty otherwise
     */
    record TrainingResult(Training training, boolean restartedExpired, boolean evictedOldest,
                          OptionalLong predictionErrorNanos) {
        static final TrainingResult NOT_SUCCEEDED =
                new TrainingResult(Training.NOT_SUCCEEDED, false, false, OptionalLong.empty());
        static final TrainingResult NO_DURATION =
                new TrainingResult(Training.NO_DURATION, false, false, OptionalLong.empty());
    }

    private static final class Entry {
        final CostEstimateKey key;
        double meanNanos;
        double errorNanos;
        long count;
        long lastUpdateNanos;
        /** Neighbours in last-update order (null at the ends). */
        Entry older;
        Entry newer;

        Entry(CostEstimateKey key) {
            this.key = key;
        }
    }

    private final Ticker clock;
    private final HashMap<CostEstimateKey, Entry> entries = new HashMap<>(MAX_ENTRIES * 2);
    /** Updated longest ago (evicted first) and most recently. */
    private Entry oldest;
    private Entry newest;

    CostEstimator(Ticker clock) {
        this.clock = Objects.requireNonNull(clock, "clock");
    }

    TrainingResult train(CostEstimateKey key, ObservationOutcome outcome, OptionalLong measuredNanos) {
        Objects.requireNonNull(key, "key");
        if (outcome != ObservationOutcome.SUCCEEDED) {
            return TrainingResult.NOT_SUCCEEDED;
        }
        if (measuredNanos.isEmpty()) {
            return TrainingResult.NO_DURATION;
        }
        long now = clock.nanos();
        double sample = measuredNanos.getAsLong();
        Entry entry = entries.get(key);
        boolean restarted = false;
        boolean evicted = false;
        OptionalLong predictionError = OptionalLong.empty();
        if (entry == null) {
            if (entries.size() >= MAX_ENTRIES) {
                Entry head = oldest;
                unlink(head);
                entries.remove(head.key);
                evicted = true;
            }
            entry = new Entry(key);
            entries.put(key, entry);
        } else if (isExpired(entry, now)) {
            entry.count = 0;
            restarted = true;
        }
        if (entry.count == 0) {
            entry.meanNanos = sample;
            entry.errorNanos = 0.0;
        } else {
            double absoluteError = Math.abs(sample - entry.meanNanos);
            if (entry.count >= WARMUP_SAMPLES) {
                predictionError = OptionalLong.of(Math.round(absoluteError));
            }
            entry.errorNanos += ALPHA * (absoluteError - entry.errorNanos);
            entry.meanNanos += ALPHA * (sample - entry.meanNanos);
        }
        entry.count++;
        entry.lastUpdateNanos = now;
        if (entry != newest) {
            unlink(entry);
            linkNewest(entry);
        }
        return new TrainingResult(Training.TRAINED, restarted, evicted, predictionError);
    }

    CostEstimateResult estimate(CostEstimateKey key) {
        Entry entry = entries.get(key);
        if (entry == null) {
            return new CostEstimateResult.Unavailable(CostEstimateResult.Reason.NO_ENTRY, 0);
        }
        long now = clock.nanos();
        if (isExpired(entry, now)) {
            return new CostEstimateResult.Unavailable(CostEstimateResult.Reason.EXPIRED, entry.count);
        }
        if (entry.count < WARMUP_SAMPLES) {
            return new CostEstimateResult.Unavailable(CostEstimateResult.Reason.WARMING_UP, entry.count);
        }
        return new CostEstimateResult.Usable(new CostEstimate(Math.round(entry.meanNanos),
                Math.round(entry.errorNanos), entry.count, now - entry.lastUpdateNanos));
    }

    private void unlink(Entry entry) {
        if (entry.older != null) {
            entry.older.newer = entry.newer;
        } else if (oldest == entry) {
            oldest = entry.newer;
        }
        if (entry.newer != null) {
            entry.newer.older = entry.older;
        } else if (newest == entry) {
            newest = entry.older;
        }
        entry.older = null;
        entry.newer = null;
    }

    private void linkNewest(Entry entry) {
        entry.older = newest;
        if (newest != null) {
            newest.newer = entry;
        } else {
            oldest = entry;
        }
        newest = entry;
    }

    int size() {
        return entries.size();
    }

    private static boolean isExpired(Entry entry, long now) {
        return now - entry.lastUpdateNanos >= EXPIRY_NANOS;
    }
}
