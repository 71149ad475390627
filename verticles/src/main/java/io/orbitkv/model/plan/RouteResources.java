package io.orbitkv.model.plan;

import io.orbitkv.model.cost.ResourceId;
import java.util.Objects;

/**
 * The cost identities of this Manager's own execution resources, with their incarnations (a restarted pool or
 * reopened store starts its evidence afresh). Peer resources are derived from each {@link PeerOwner}.
 */
public record RouteResources(ResourceId dramPool, ResourceId ssdStore) {
    public RouteResources {
        Objects.requireNonNull(dramPool, "dramPool");
        Objects.requireNonNull(ssdStore, "ssdStore");
    }
}
