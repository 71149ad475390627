package io.orbitkv.model.plan;

import io.orbitkv.model.plan.PeerOwner;

/**
 * Whether a peer owner is a current member at the incarnation its evidence names (the membership role answers; until
 * the cluster issue lands no peer is current). Evidence from a departed member or an older incarnation is never
 * eligible. Answers must be local and cheap: the planner asks per peer record.
 */
@FunctionalInterface
public interface MembershipView {
    /** No peers: a single Manager. */
    MembershipView NONE = owner -> false;

    boolean isCurrent(PeerOwner owner);
}
