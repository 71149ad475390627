package io.orbitkv.cost;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import io.orbitkv.model.cost.CostEstimateKey;
import io.orbitkv.model.cost.CostEstimate;
import io.orbitkv.model.cost.ShadowAlternative;
import io.orbitkv.model.cost.ShadowRequest;
import io.orbitkv.model.cost.SwitchGuard;
import io.orbitkv.model.cost.SampleKind;

/**
 * Compares the executing path with its eligible alternatives on the same work and records a decision. It never
 * launches I/O, fetches alternatives to obtain samples, or changes execution.
 *
 * <p>Design note — comparability: an alternative is comparable only when it has the same sample kind, completion
 * target, resource, representation family and byte and fragment buckets as the current key, and those buckets are
 * known. Matching buckets do not prove equal demand; callers pass only alternatives derived from the same actual work.
 * An alternative with the current key itself is not an alternative and is ignored.
 *
 * <p>Design note — guard: with {@code m} and {@code e} the mean and error nanos, an alternative is suggested only if
 * {@code m_alt + e_alt < m_cur - e_cur - 0.05 * m_cur}. A faster mean inside that guard is {@link
 * ShadowDecision#WITHIN_MARGIN}; a mean not faster than the current one is {@link ShadowDecision#AGREE}.
 *
 * <p>Design note — overall decision: no eligible alternative → AGREE (the current path is the only legal one); no
 * comparable alternative → INCOMPARABLE; current estimate unusable → UNKNOWN; otherwise the first that applies of
 * SUGGEST_ALTERNATIVE (the suggestion with the lowest {@code m + e}), WITHIN_MARGIN, UNKNOWN (a comparable alternative
 * has no usable estimate, so "current is best" cannot be claimed), AGREE.
 *
 * <p>Concurrency: owned by the cost verticle's event loop, like the estimator it reads.
 */
final class ShadowComparator {

    static final double MARGIN_FRACTION = SwitchGuard.MARGIN_FRACTION;

    private final CostEstimator estimator;

    ShadowComparator(CostEstimator estimator) {
        this.estimator = Objects.requireNonNull(estimator, "estimator");
    }

    ShadowResult compare(ShadowRequest request) {
        // One pass over the alternatives, allocating only the verdicts: this runs for every recorded shadow.
        CostEstimateKey current = request.current();
        List<ShadowAlternative> alternatives = request.alternatives();
        List<ShadowResult.Verdict> verdicts = null;
        Optional<CostEstimate> currentEstimate = Optional.empty();
        boolean anyComparable = false;
        boolean anyWithinMargin = false;
        boolean anyUnknown = false;
        CostEstimateKey best = null;
        double bestUpper = Double.POSITIVE_INFINITY;
        for (int i = 0; i < alternatives.size(); i++) {
            ShadowAlternative alternative = alternatives.get(i);
            CostEstimateKey key = alternative.key();
            if (!alternative.requirementHolds() || key.equals(current)) {
                continue;
            }
            if (verdicts == null) {
                verdicts = new ArrayList<>(alternatives.size() - i);
                currentEstimate = estimator.estimate(current).usable();
            }
            ShadowDecision verdict;
            if (!comparable(request.scope(), current, key)) {
                verdict = ShadowDecision.INCOMPARABLE;
            } else {
                anyComparable = true;
                Optional<CostEstimate> alternativeEstimate = estimator.estimate(key).usable();
                if (currentEstimate.isEmpty() || alternativeEstimate.isEmpty()) {
                    verdict = ShadowDecision.UNKNOWN;
                    anyUnknown = true;
                } else {
                    verdict = judge(currentEstimate.get(), alternativeEstimate.get());
                    if (verdict == ShadowDecision.SUGGEST_ALTERNATIVE) {
                        double upper = upper(alternativeEstimate.get());
                        if (upper < bestUpper) {
                            bestUpper = upper;
                            best = key;
                        }
                    } else if (verdict == ShadowDecision.WITHIN_MARGIN) {
                        anyWithinMargin = true;
                    }
                }
            }
            verdicts.add(new ShadowResult.Verdict(key, verdict));
        }
        if (verdicts == null) {
            return new ShadowResult(ShadowDecision.AGREE, Optional.empty(), List.of());
        }
        ShadowDecision decision;
        if (!anyComparable) {
            decision = ShadowDecision.INCOMPARABLE;
        } else if (currentEstimate.isEmpty()) {
            decision = ShadowDecision.UNKNOWN;
        } else if (best != null) {
            decision = ShadowDecision.SUGGEST_ALTERNATIVE;
        } else if (anyWithinMargin) {
            decision = ShadowDecision.WITHIN_MARGIN;
        } else if (anyUnknown) {
            decision = ShadowDecision.UNKNOWN;
        } else {
            decision = ShadowDecision.AGREE;
        }
        return new ShadowResult(decision, Optional.ofNullable(best), verdicts);
    }

    static boolean comparable(CostEstimateKey current, CostEstimateKey alternative) {
        return comparable(ShadowRequest.Scope.SAME_WORK, current, alternative);
    }

    /**
     * {@link ShadowRequest.Scope#SAME_WORK}: same resource too. {@link ShadowRequest.Scope#ROUTE_ALTERNATIVES}: complete
     * routes from different sources (so different resources) to the same target; both must be route samples.
     */
    static boolean comparable(ShadowRequest.Scope scope, CostEstimateKey current, CostEstimateKey alternative) {
        boolean resourceFits = scope == ShadowRequest.Scope.ROUTE_ALTERNATIVES
                ? current.sampleKind() == SampleKind.ROUTE
                : current.resource().equals(alternative.resource());
        return current.sampleKind() == alternative.sampleKind()
                && current.target().equals(alternative.target())
                && resourceFits
                && current.representation() == alternative.representation()
                && current.bytes().isKnown() && current.bytes().equals(alternative.bytes())
                && current.fragments().isKnown() && current.fragments().equals(alternative.fragments());
    }

    static ShadowDecision judge(CostEstimate current, CostEstimate alternative) {
        if (SwitchGuard.clearlyFaster(current, alternative)) {
            return ShadowDecision.SUGGEST_ALTERNATIVE;
        }
        if (alternative.predictedNanos() < current.predictedNanos()) {
            return ShadowDecision.WITHIN_MARGIN;
        }
        return ShadowDecision.AGREE;
    }

    private static double upper(CostEstimate estimate) {
        return (double) estimate.predictedNanos() + estimate.errorNanos();
    }
}
