package io.orbitkv.planning;

import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.model.StateKey;
import java.util.HashMap;
import java.util.Map;
import io.orbitkv.model.plan.DemandView;
import io.orbitkv.model.plan.Plan;
import io.orbitkv.model.plan.PlannedPage;
import io.orbitkv.model.plan.PlannedSegment;

/**
 * When a real demand may be answered with what its speculative hint prepared, instead of planning and reading again.
 * Admission offers a hint only along one request's revisions of one tenant (the engine's own statement that the
 * demand follows the hint); the rule then holds when:
 * <ul>
 *   <li>the hint was speculative and the demand is not, and the demand ends host-ready;</li>
 *   <li>recovery rules, valid prefix, requested route and prefill rate are the same, so the hint's boundary is legal
 *       for the demand and its required ranges are the same ranges;</li>
 *   <li>the hint's boundary lies within the demand's selected end and is not a recompute;</li>
 *   <li>every page the hint prepared is, in the demand, the same key at the same position of the same group, with
 *       the same registered page size.</li>
 * </ul>
 * The demand then gets the hint's boundary and reason even if a page published since would allow a longer one: the
 * wait saved is the point, and the engine can raise the revision again to have it planned afresh.
 */
final class TakeOverRule {
    private TakeOverRule() {}

    static boolean allows(DemandView hint, DemandView demand, Plan prepared) {
        if (!hint.speculative() || demand.speculative()
                || demand.target().intent() != CompletionTarget.Intent.HOST_READY || prepared.isRecompute()
                || !hint.rules().equals(demand.rules()) || hint.validPrefixTokens() != demand.validPrefixTokens()
                || prepared.boundaryTokens() > demand.selectedEndTokens()
                || !hint.requestedRoute().equals(demand.requestedRoute())
                || !hint.prefillTokensPerSecond().equals(demand.prefillTokensPerSecond())) {
            return false;
        }
        Map<Integer, Map<Integer, StateKey>> demandKeys = new HashMap<>();
        for (DemandView.GroupKeys group : demand.groups()) {
            Map<Integer, StateKey> at = new HashMap<>();
            group.keys().forEach(k -> at.put(k.position(), k.key()));
            demandKeys.put(group.groupId(), at);
        }
        for (PlannedSegment segment : prepared.segments()) {
            DemandView.GroupKeys hintGroup = hint.group(segment.groupId());
            DemandView.GroupKeys demandGroup = demand.group(segment.groupId());
            if (hintGroup == null || demandGroup == null || demandGroup.bytesPerPage() != hintGroup.bytesPerPage()) {
                return false;
            }
            Map<Integer, StateKey> at = demandKeys.get(segment.groupId());
            for (PlannedPage page : segment.pages()) {
                if (!page.key().equals(at.get(page.position()))) {
                    return false;
                }
            }
        }
        return true;
    }
}
