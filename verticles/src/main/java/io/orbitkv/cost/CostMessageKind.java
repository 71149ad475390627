package io.orbitkv.cost;

import java.util.Locale;

/** Kind of message offered to the cost intake; the {@code message} label of the dropped counter. */
enum CostMessageKind {
    OBSERVATION,
    SHADOW,
    ESTIMATE;

    private final String label = name().toLowerCase(Locale.ROOT);

    String label() {
        return label;
    }
}
