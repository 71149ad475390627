package io.orbitkv.model.cost;

import java.util.List;
import java.util.Objects;
import io.orbitkv.model.cost.CostEstimateKey;
import io.orbitkv.model.cost.ShadowAlternative;
import io.orbitkv.model.cost.CostMessage;

/**
 * A choice with alternatives on the same work: the path actually executing and the paths it could have used.
 *
 * @param scope what may differ between the current key and an alternative (see {@link Scope})
 */
public record ShadowRequest(CostEstimateKey current, List<ShadowAlternative> alternatives, Scope scope)
        implements CostMessage {

    /** What the alternatives of one request may differ in. */
    public enum Scope {
        /** Another path over the same source and resource (raw-copy backends, SSD read paths). */
        SAME_WORK,
        /**
         * Complete routes from different sources to the same completion target, with equal coverage (the planning
         * role's route alternatives): the resource differs by design; everything else must still match.
         */
        ROUTE_ALTERNATIVES
    }

    public ShadowRequest {
        Objects.requireNonNull(current, "current");
        Objects.requireNonNull(scope, "scope");
        alternatives = List.copyOf(alternatives);
    }

    /** A {@link Scope#SAME_WORK} request. */
    public ShadowRequest(CostEstimateKey current, List<ShadowAlternative> alternatives) {
        this(current, alternatives, Scope.SAME_WORK);
    }

    /** A {@link Scope#ROUTE_ALTERNATIVES} request. */
    public static ShadowRequest routes(CostEstimateKey current, List<ShadowAlternative> alternatives) {
        return new ShadowRequest(current, alternatives, Scope.ROUTE_ALTERNATIVES);
    }
}
