package io.orbitkv.model;

import java.util.Objects;

/**
 * One page's answer in a batched SSD command ({@link SsdProxy#acquireLeases}, {@link SsdProxy#readInto}): its value,
 * or the failure that makes that page a miss (an {@link SsdException} for every expected one). The other pages of the
 * batch are answered on their own.
 */
public record SsdPageOutcome<T>(T value, Throwable failure) {

    public SsdPageOutcome {
        if ((value == null) == (failure == null)) {
            throw new IllegalArgumentException("an outcome holds a value or a failure, exactly one");
        }
    }

    public static <T> SsdPageOutcome<T> of(T value) {
        return new SsdPageOutcome<>(Objects.requireNonNull(value, "value"), null);
    }

    public static <T> SsdPageOutcome<T> failed(Throwable failure) {
        return new SsdPageOutcome<>(null, Objects.requireNonNull(failure, "failure"));
    }

    public boolean succeeded() {
        return failure == null;
    }
}
