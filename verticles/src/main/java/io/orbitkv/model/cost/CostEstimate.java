package io.orbitkv.model.cost;

/**
 * A usable estimate: EWMA of completed durations, EWMA of the absolute prediction error (an empirical margin, not a
 * calibrated confidence interval), successful samples since the entry last warmed up, and time since the last update.
 */
public record CostEstimate(long predictedNanos, long errorNanos, long sampleCount, long ageNanos) {
}
