package io.orbitkv.model.cost;

import java.util.Objects;
import io.orbitkv.model.cost.CostEstimateKey;
import io.orbitkv.model.cost.CostMessage;

/** Request for the current estimate of one key. */
public record EstimateQuery(CostEstimateKey key) implements CostMessage {

    public EstimateQuery {
        Objects.requireNonNull(key, "key");
    }
}
