package io.orbitkv.cluster;

import io.orbitkv.model.plan.DemandEvidence;
import io.orbitkv.model.plan.DemandView;
import io.orbitkv.model.plan.EvidenceSource;
import io.orbitkv.model.plan.ReplicaEvidence;
import io.orbitkv.model.plan.ReplicaSet;
import io.orbitkv.model.StateKey;
import java.util.HashMap;
import java.util.Map;
import io.orbitkv.model.PositionedKey;

/**
 * Joins the storage role's local evidence with the inventory role's peer evidence into the one {@link EvidenceSource}
 * the planner asks: local records as the local source reported them, plus each peer record (at most
 * {@link ReplicaSet#MAX_PEER_REPLICAS} per key). Both are asked at once; the answer completes where the local one does
 * (the planning role's context). Peer records alone never make a page READY: they are directory evidence, eligible
 * only through a peer route and only while their owner is a current member (the planner checks {@code MembershipView}).
 */
public final class ClusterEvidence {
    private ClusterEvidence() {}

    public static EvidenceSource merged(EvidenceSource local, EvidenceSource peers) {
        return demand -> local.discover(demand)
                .compose(mine -> peers.discover(demand).map(theirs -> merge(demand, mine, theirs)));
    }

    /** For each key of {@code demand}: its local records, plus every peer record of {@code peers}. */
    public static DemandEvidence merge(DemandView demand, DemandEvidence local, DemandEvidence peers) {
        if (peers.keys() == 0) {
            return local;
        }
        Map<StateKey, ReplicaSet> byKey = new HashMap<>();
        for (DemandView.GroupKeys group : demand.groups()) {
            for (PositionedKey positioned : group.keys()) {
                ReplicaSet set = local.replicas(positioned.key());
                for (ReplicaEvidence peer : peers.replicas(positioned.key()).peers()) {
                    set = set.withPeer(peer);
                }
                byKey.put(positioned.key(), set);
            }
        }
        // The local keys being written stay known: a publish in progress may still allow a later boundary here.
        return DemandEvidence.of(byKey).withWriting(local.writingKeys());
    }
}
