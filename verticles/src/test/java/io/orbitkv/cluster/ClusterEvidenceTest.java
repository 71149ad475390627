package io.orbitkv.cluster;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.model.plan.ByteCount;
import io.orbitkv.model.plan.DemandEvidence;
import io.orbitkv.model.plan.DemandView;
import io.orbitkv.model.plan.Medium;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.model.plan.ReplicaEvidence;
import io.orbitkv.model.plan.ReplicaSet;
import io.orbitkv.recovery.GroupRule;
import io.orbitkv.recovery.RecoveryRules;
import io.orbitkv.model.StateKey;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import io.vertx.core.Future;
import org.junit.jupiter.api.Test;
import io.orbitkv.model.PositionedKey;

/** Local and peer evidence joined into the planner's one evidence source. */
class ClusterEvidenceTest {
    static StateKey key(int i) {
        return StateKey.of(new byte[16], 0, new byte[] {(byte) i, 7});
    }

    @Test
    void peerRecordsJoinTheLocalOnesPerKey() throws Exception {
        DemandView demand = DemandView.hostReady(RecoveryRules.of(16, GroupRule.fullAttention(0)), 0, 48,
                List.of(new DemandView.GroupKeys(0, 4096, List.of(new PositionedKey(0, key(0)),
                        new PositionedKey(1, key(1)), new PositionedKey(2, key(2))))));
        ReplicaEvidence.LocalDram local = new ReplicaEvidence.LocalDram(5, 9, ByteCount.of(4096));
        PeerOwner b = new PeerOwner("manager-2", 77);
        ReplicaEvidence.PeerDram peer0 = new ReplicaEvidence.PeerDram(b, 3, 11, ByteCount.of(4096), Optional.empty());
        ReplicaEvidence.PeerSsd peer1 = new ReplicaEvidence.PeerSsd(b, 4, 12, ByteCount.UNKNOWN, Optional.empty());
        DemandEvidence mine = DemandEvidence.of(Map.of(key(0), ReplicaSet.local(local, null)));
        DemandEvidence theirs = DemandEvidence.of(Map.of(key(0), ReplicaSet.empty().withPeer(peer0),
                key(1), ReplicaSet.empty().withPeer(peer1)));
        DemandEvidence merged = ClusterEvidence.merged(d -> Future.succeededFuture(mine), d -> Future.succeededFuture(theirs))
                .discover(demand).await(5, TimeUnit.SECONDS);
        assertThat(merged.replicas(key(0)).localDram()).contains(local);
        assertThat(merged.replicas(key(0)).ofMedium(Medium.PEER_DRAM)).containsExactly(peer0);
        assertThat(merged.replicas(key(1)).localDram()).isEmpty();
        assertThat(merged.replicas(key(1)).ofMedium(Medium.PEER_SSD)).containsExactly(peer1);
        assertThat(merged.replicas(key(2)).isEmpty()).isTrue();
        assertThat(ClusterEvidence.merge(demand, mine, DemandEvidence.none())).isSameAs(mine);
    }

    @Test
    void localKeysBeingWrittenStayKnownAfterTheMerge() {
        DemandView demand = DemandView.hostReady(RecoveryRules.of(16, GroupRule.fullAttention(0)), 0, 32,
                List.of(new DemandView.GroupKeys(0, 4096, List.of(new PositionedKey(0, key(0)),
                        new PositionedKey(1, key(1))))));
        DemandEvidence mine = DemandEvidence.none().withWriting(java.util.Set.of(key(1)));
        DemandEvidence theirs = DemandEvidence.of(Map.of(key(0), ReplicaSet.empty().withPeer(
                new ReplicaEvidence.PeerDram(new PeerOwner("manager-2", 77), 3, 11, ByteCount.of(4096), Optional.empty()))));
        DemandEvidence merged = ClusterEvidence.merge(demand, mine, theirs);
        assertThat(merged.writing(key(1))).isTrue();
        assertThat(merged.writing(key(0))).isFalse();
        assertThat(merged.replicas(key(0)).ofMedium(Medium.PEER_DRAM)).hasSize(1);
    }
}
