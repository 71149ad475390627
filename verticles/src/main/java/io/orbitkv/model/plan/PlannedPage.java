package io.orbitkv.model.plan;

import io.orbitkv.model.StateKey;
import java.util.Objects;
import io.orbitkv.model.plan.ReplicaEvidence;

/** One page of a plan: its block position, its key and the exact replica evidence the route relies on. */
public record PlannedPage(int position, StateKey key, ReplicaEvidence evidence) {
    public PlannedPage {
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(evidence, "evidence");
        if (position < 0) {
            throw new IllegalArgumentException("position " + position + " is negative");
        }
    }
}
