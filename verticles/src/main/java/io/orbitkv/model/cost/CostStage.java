package io.orbitkv.model.cost;

import java.util.Locale;

/**
 * Timed stages exported as {@code orbitkv_cost_stage_seconds}. {@link #SERVICE} comes from operation samples and
 * {@link #TOTAL} from route samples; a total includes queue, admission and the service of its child operations, so the
 * stages overlap and must never be summed.
 */
public enum CostStage {
    QUEUE,
    ADMISSION,
    SERVICE,
    TOTAL;

    private final String label = name().toLowerCase(Locale.ROOT);

    public String label() {
        return label;
    }
}
