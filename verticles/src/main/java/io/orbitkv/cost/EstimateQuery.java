package io.orbitkv.cost;

import java.util.Objects;

/** Request for the current estimate of one key. */
public record EstimateQuery(CostEstimateKey key) implements CostMessage {

    public EstimateQuery {
        Objects.requireNonNull(key, "key");
    }
}
