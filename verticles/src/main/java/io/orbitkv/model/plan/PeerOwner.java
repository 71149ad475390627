package io.orbitkv.model.plan;

import java.util.Objects;

/**
 * The Manager that owns a peer replica: its member id (bounded, from membership) and the incarnation it had when it
 * advertised the replica. Evidence from an older incarnation of the same member is fenced: the member restarted and
 * its old inventory means nothing.
 */
public record PeerOwner(String memberId, long incarnation) {
    public PeerOwner {
        Objects.requireNonNull(memberId, "memberId");
        if (memberId.isEmpty()) {
            throw new IllegalArgumentException("member id must not be empty");
        }
    }
}
