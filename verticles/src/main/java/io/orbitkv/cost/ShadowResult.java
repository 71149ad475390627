package io.orbitkv.cost;

import java.util.List;
import java.util.Objects;
import java.util.Optional;
import io.orbitkv.model.cost.CostEstimateKey;

/**
 * Outcome of a shadow comparison.
 *
 * @param decision   the overall decision
 * @param suggested  the alternative suggested, present only for {@link ShadowDecision#SUGGEST_ALTERNATIVE}
 * @param verdicts   one verdict per considered alternative (requirement held), in request order
 */
record ShadowResult(ShadowDecision decision, Optional<CostEstimateKey> suggested,
                           List<Verdict> verdicts) {

    /** Verdict on one considered alternative. */
    public record Verdict(CostEstimateKey alternative, ShadowDecision decision) {
    }

    static final ShadowResult UNKNOWN_NOT_RECORDED = new ShadowResult(ShadowDecision.UNKNOWN, Optional.empty(),
            List.of());

    public ShadowResult {
        Objects.requireNonNull(decision, "decision");
        Objects.requireNonNull(suggested, "suggested");
        verdicts = List.copyOf(verdicts);
        if ((decision == ShadowDecision.SUGGEST_ALTERNATIVE) != suggested.isPresent()) {
            throw new IllegalArgumentException("suggested is present exactly for SUGGEST_ALTERNATIVE");
        }
    }
}
