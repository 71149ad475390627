package io.orbitkv.model.cost;

import java.util.Objects;
import java.util.function.BooleanSupplier;
import io.orbitkv.model.cost.CostEstimateKey;

/**
 * An alternative path for the same work, with whether its route requirement holds (e.g. cuFile capability present,
 * mapped host addresses for a copy kernel). The requirement is evaluated by the execution owner, on its own thread,
 * when the request is built; an alternative whose requirement does not hold is not considered.
 */
public record ShadowAlternative(CostEstimateKey key, boolean requirementHolds) {

    public ShadowAlternative {
        Objects.requireNonNull(key, "key");
    }

    /** Evaluates {@code requirement} now, on the caller's thread. */
    public static ShadowAlternative when(CostEstimateKey key, BooleanSupplier requirement) {
        return new ShadowAlternative(key, requirement.getAsBoolean());
    }
}
