package io.orbitkv.cost;

/** Messages the cost role accepts on its local event-bus address; sent through {@link CostProxy} only. */
public sealed interface CostMessage permits ObservationRecord, ShadowRequest, EstimateQuery {
}
