package io.orbitkv.model.cost;

import java.util.Locale;

/**
 * Terminal outcome of one observed operation or route. Only {@link #SUCCEEDED} trains an estimate. {@link #TIMED_OUT}
 * is censored: the work did not finish within its budget, so its elapsed time is not a completion time and is never
 * recorded as a duration.
 */
public enum ObservationOutcome {
    SUCCEEDED,
    FAILED,
    CANCELLED,
    TIMED_OUT,
    ABANDONED;

    private final String label = name().toLowerCase(Locale.ROOT);

    /** The metric label value. */
    public String label() {
        return label;
    }

    /** Whether this outcome carries a completion duration (everything except the censored timeout). */
    public boolean hasDuration() {
        return this != TIMED_OUT;
    }
}
