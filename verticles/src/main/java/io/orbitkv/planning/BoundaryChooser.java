package io.orbitkv.planning;

import io.orbitkv.model.cost.SwitchGuard;
import java.util.List;
import java.util.Objects;
import java.util.OptionalDouble;
import io.orbitkv.model.plan.BoundaryReason;
import io.orbitkv.model.plan.TimeEstimate;

/**
 * Picks the boundary with the earliest first token among a bounded set of legal candidates, from the same decision
 * point (now):
 * <pre>
 *   state_ready(b) = estimated time until the plan for b reaches its target (exactly 0 for recomputing from the origin)
 *   first_token(b) = max(admission, state_ready(b)) + remaining_prefill(b)
 *   remaining_prefill(b) = (selected end - b) / prefill rate     (the prompt beyond the selected end is common to all)
 * </pre>
 * {@code admission} is how long until the engine uses the state (its first-use estimate; 0 when unknown).
 *
 * <p>Design note (guard): the default is the longest affordable legal boundary, as without a rate. A shorter one wins
 * only when its first token is clearly earlier by the house guard ({@link SwitchGuard}): its upper bound (state ready
 * at mean plus error) below the default's lower bound (mean minus error) by more than 5 % of the default's mean. A
 * candidate with an unknown state-ready time never wins, and an unknown default is kept: unknown is not zero. Among
 * several clear winners the lowest upper bound wins, ties to the longer boundary (less recomputation).
 *
 * <p>Pure logic; no state.
 */
final class BoundaryChooser {

    /** One legal candidate: a boundary and its estimated state-ready time. */
    public record Candidate(long boundaryTokens, TimeEstimate stateReady) {
        public Candidate {
            Objects.requireNonNull(stateReady, "stateReady");
        }
    }

    /** The chosen boundary and why. */
    public record Choice(long boundaryTokens, BoundaryReason reason) {}

    private BoundaryChooser() {
    }

    /**
     * @param candidates     legal candidates, the default among them (recomputation from the origin may be one)
     * @param defaultTokens  the longest affordable legal boundary (the origin when nothing is legal)
     * @param longestTokens  the longest legal boundary ignoring the byte cap
     * @param rate           declared prefill tokens per second; empty: the default, always
     * @param admissionNanos how long until the engine uses the state (0 when unknown)
     */
    public static Choice choose(List<Candidate> candidates, long defaultTokens, long longestTokens, OptionalDouble rate,
                                long selectedEndTokens, long admissionNanos) {
        BoundaryReason defaultReason = defaultTokens == longestTokens ? BoundaryReason.LONGEST : BoundaryReason.BUDGET;
        Candidate fallback = null;
        for (Candidate candidate : candidates) {
            if (candidate.boundaryTokens() == defaultTokens) {
                fallback = candidate;
            }
        }
        if (fallback == null) {
            throw new IllegalArgumentException("the default boundary " + defaultTokens + " is not a candidate");
        }
        if (rate.isEmpty() || !fallback.stateReady().known()) {
            return new Choice(defaultTokens, defaultReason);
        }
        double nanosPerToken = 1e9 / rate.getAsDouble();
        double defaultPrefill = (selectedEndTokens - defaultTokens) * nanosPerToken;
        TimeEstimate defaultReady = fallback.stateReady();
        double defaultMean = Math.max(admissionNanos, defaultReady.meanNanos()) + defaultPrefill;
        double defaultLower = Math.max(admissionNanos, defaultReady.lowerNanos()) + defaultPrefill;
        Candidate best = null;
        double bestUpper = Double.POSITIVE_INFINITY;
        for (Candidate candidate : candidates) {
            if (candidate == fallback || !candidate.stateReady().known()) {
                continue;
            }
            double upper = Math.max(admissionNanos, candidate.stateReady().upperNanos())
                    + (selectedEndTokens - candidate.boundaryTokens()) * nanosPerToken;
            if (SwitchGuard.clearlyBelow(upper, defaultLower, defaultMean)
                    && (upper < bestUpper || (upper == bestUpper && candidate.boundaryTokens() > best.boundaryTokens()))) {
                best = candidate;
                bestUpper = upper;
            }
        }
        return best == null ? new Choice(defaultTokens, defaultReason)
                : new Choice(best.boundaryTokens(), BoundaryReason.EARLIER_FIRST_TOKEN);
    }
}
