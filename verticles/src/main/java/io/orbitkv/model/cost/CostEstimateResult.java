package io.orbitkv.model.cost;

import java.util.Objects;
import java.util.Optional;
import io.orbitkv.model.cost.CostEstimate;

/** Result of an estimate lookup: either a usable estimate or an explicit reason there is none. */
public sealed interface CostEstimateResult permits CostEstimateResult.Usable, CostEstimateResult.Unavailable {

    /** Why no estimate is usable. */
    enum Reason {
        /** No successful sample for this key (or it was evicted). */
        NO_ENTRY,
        /** Fewer than the warm-up number of successful samples. */
        WARMING_UP,
        /** The last update is older than the expiry; the next sample warms up from zero. */
        EXPIRED,
        /** Observations are switched off. */
        DISABLED,
        /** The cost role's intake was full or it did not answer; nothing is known. */
        BUSY
    }

    record Usable(CostEstimate estimate) implements CostEstimateResult {
        public Usable {
            Objects.requireNonNull(estimate, "estimate");
        }
    }

    record Unavailable(Reason reason, long sampleCount) implements CostEstimateResult {
        public Unavailable {
            Objects.requireNonNull(reason, "reason");
        }
    }

    default Optional<CostEstimate> usable() {
        return this instanceof Usable(CostEstimate estimate) ? Optional.of(estimate) : Optional.empty();
    }
}
