package io.orbitkv.model.cost;

import java.util.Objects;
import java.util.OptionalLong;
import io.orbitkv.model.cost.CostEstimateKey;
import io.orbitkv.model.cost.ObservationOutcome;
import io.orbitkv.model.cost.CostMessage;
import io.orbitkv.model.cost.CostStage;
import io.orbitkv.model.cost.ObservedBytes;
import io.orbitkv.model.cost.SampleKind;

/**
 * One terminal observation reported by a completion owner.
 *
 * <p>{@code measuredNanos} is the sample of the key's kind: service time for an {@link SampleKind#OPERATION} path,
 * inclusive total time for a {@link SampleKind#ROUTE} path. A {@link ObservationOutcome#TIMED_OUT} observation is
 * censored: any measured duration is dropped here so it can never be read as a completion time. {@code queueNanos}
 * and {@code admissionNanos} are optional sub-stages and overlap the route total.
 */
public record ObservationRecord(
        CostEstimateKey key,
        ObservationOutcome outcome,
        OptionalLong queueNanos,
        OptionalLong admissionNanos,
        OptionalLong measuredNanos,
        ObservedBytes bytes) implements CostMessage {

    public ObservationRecord {
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(outcome, "outcome");
        Objects.requireNonNull(bytes, "bytes");
        requireDuration(queueNanos, "queueNanos");
        requireDuration(admissionNanos, "admissionNanos");
        requireDuration(measuredNanos, "measuredNanos");
        if (!outcome.hasDuration()) {
            measuredNanos = OptionalLong.empty();
        }
    }

    /** An observation without sub-stages. */
    public static ObservationRecord of(CostEstimateKey key, ObservationOutcome outcome, long measuredNanos,
                                       ObservedBytes bytes) {
        return new ObservationRecord(key, outcome, OptionalLong.empty(), OptionalLong.empty(),
                OptionalLong.of(measuredNanos), bytes);
    }

    /** The stage {@link #measuredNanos()} belongs to. */
    public CostStage measuredStage() {
        return key.sampleKind() == SampleKind.OPERATION ? CostStage.SERVICE : CostStage.TOTAL;
    }

    private static void requireDuration(OptionalLong value, String name) {
        if (value == null) {
            throw new NullPointerException(name);
        }
        if (value.isPresent() && value.getAsLong() < 0) {
            throw new IllegalArgumentException(name + " must be >= 0: " + value.getAsLong());
        }
    }
}
