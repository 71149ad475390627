package io.orbitkv.cost;

import java.util.List;
import java.util.Objects;

/** A choice with alternatives on the same work: the path actually executing and the paths it could have used. */
public record ShadowRequest(CostEstimateKey current, List<ShadowAlternative> alternatives) implements CostMessage {

    public ShadowRequest {
        Objects.requireNonNull(current, "current");
        alternatives = List.copyOf(alternatives);
    }
}
