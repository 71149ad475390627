package io.orbitkv.model.plan;

import java.util.Objects;
import java.util.Optional;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.model.plan.PeerOwner;

/**
 * How the route of one transfer batch (all pages of a plan sharing a route and source) was chosen: the default order's
 * route, the route taken, and why. Only batches that had equal-coverage alternatives are recorded.
 */
public record RouteChoice(RouteTemplate defaultRoute, Optional<PeerOwner> defaultOwner, RouteTemplate chosenRoute,
                          Optional<PeerOwner> chosenOwner, int pages, Outcome outcome) {

    public enum Outcome {
        /** Selection is off (observations alone, or nothing): the default order stands; shadow records it. */
        DEFAULT_SELECTION_OFF,
        /** The default or some equal-coverage alternative had no fresh estimate: the default stands. */
        DEFAULT_UNKNOWN,
        /** An alternative looked faster, but not by more than the errors and the 5 % margin. */
        DEFAULT_WITHIN_MARGIN,
        /** No alternative was faster. */
        DEFAULT_FASTEST,
        /** An alternative was clearly faster by the guard: taken. */
        SWITCHED
    }

    public RouteChoice {
        Objects.requireNonNull(defaultRoute, "defaultRoute");
        Objects.requireNonNull(defaultOwner, "defaultOwner");
        Objects.requireNonNull(chosenRoute, "chosenRoute");
        Objects.requireNonNull(chosenOwner, "chosenOwner");
        Objects.requireNonNull(outcome, "outcome");
        boolean same = defaultRoute == chosenRoute && defaultOwner.equals(chosenOwner);
        if (same == (outcome == Outcome.SWITCHED)) {
            throw new IllegalArgumentException("a choice switched exactly when its route or owner changed");
        }
    }
}
