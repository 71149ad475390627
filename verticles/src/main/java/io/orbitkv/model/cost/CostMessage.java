package io.orbitkv.model.cost;

import io.orbitkv.model.cost.ObservationRecord;
import io.orbitkv.model.cost.ShadowRequest;
import io.orbitkv.model.cost.EstimateQuery;

/** Messages the cost role accepts on its local event-bus address; sent through {@link CostProxy} only. */
public sealed interface CostMessage permits ObservationRecord, ShadowRequest, EstimateQuery {
}
