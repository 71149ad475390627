package io.orbitkv.planning;

import static io.orbitkv.planning.Fixtures.PEER_A;
import static io.orbitkv.planning.Fixtures.dram;
import static io.orbitkv.planning.Fixtures.key;
import static io.orbitkv.planning.Fixtures.peerDram;
import static io.orbitkv.planning.Fixtures.peerSsd;
import static io.orbitkv.planning.Fixtures.ssd;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Map;
import org.junit.jupiter.api.Test;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.model.plan.ByteCount;
import io.orbitkv.model.plan.DemandEvidence;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.model.plan.ReplicaEvidence;
import io.orbitkv.model.plan.ReplicaSet;
import io.orbitkv.model.plan.Medium;

class ReplicaSetTest {

    @Test
    void localAndPeerRecordsAreIndependent() {
        ReplicaSet set = ReplicaSet.empty().withLocalDram(dram(1)).withLocalSsd(ssd(2)).withPeer(peerDram(PEER_A, 5));
        assertThat(set.size()).isEqualTo(3);
        ReplicaSet refreshed = set.withPeer(peerDram(PEER_A, 6));
        assertThat(refreshed.localDram()).contains(dram(1));
        assertThat(refreshed.localSsd()).contains(ssd(2));
        assertThat(refreshed.peers()).containsExactly(peerDram(PEER_A, 6));
        ReplicaSet evicted = refreshed.withoutLocalDram();
        assertThat(evicted.ofMedium(Medium.LOCAL_DRAM)).isEmpty();
        assertThat(evicted.ofMedium(Medium.LOCAL_SSD)).containsExactly(ssd(2));
        assertThat(evicted.peers()).containsExactly(peerDram(PEER_A, 6));
        assertThat(evicted.departed(PEER_A.memberId()).ofMedium(Medium.LOCAL_SSD)).containsExactly(ssd(2));
    }

    @Test
    void peerRecordsAreBoundedOldestRefreshDroppedFirst() {
        ReplicaSet set = ReplicaSet.empty().withLocalSsd(ssd(1));
        for (int m = 0; m < ReplicaSet.MAX_PEER_REPLICAS + 2; m++) {
            set = set.withPeer(peerDram(new PeerOwner("m" + m, 1), 1));
        }
        assertThat(set.peers()).hasSize(ReplicaSet.MAX_PEER_REPLICAS);
        assertThat(set.peers()).extracting(p -> p.peerOwner().orElseThrow().memberId())
                .containsExactly("m2", "m3", "m4", "m5");
        assertThat(set.localSsd()).contains(ssd(1));
        // A refresh moves the member to the tail: the next insertion drops m3, not the refreshed m2.
        set = set.withPeer(peerDram(new PeerOwner("m2", 1), 2)).withPeer(peerDram(new PeerOwner("m9", 1), 1));
        assertThat(set.peers()).extracting(p -> p.peerOwner().orElseThrow().memberId())
                .containsExactly("m4", "m5", "m2", "m9");
    }

    @Test
    void olderIncarnationsAndSequencesNeverReplaceNewerEvidence() {
        PeerOwner restarted = new PeerOwner(PEER_A.memberId(), PEER_A.incarnation() + 1);
        ReplicaSet set = ReplicaSet.empty().withPeer(peerDram(restarted, 10));
        assertThat(set.withPeer(peerDram(PEER_A, 99))).isSameAs(set);
        assertThat(set.withPeer(peerDram(restarted, 9))).isSameAs(set);
        assertThat(set.withPeer(peerDram(restarted, 11)).peers()).containsExactly(peerDram(restarted, 11));
        // Different media of one member are separate records.
        assertThat(set.withPeer(peerSsd(restarted, 3)).peers()).hasSize(2);
    }

    @Test
    void fencingDropsOnlyOlderIncarnations() {
        PeerOwner other = new PeerOwner("manager-z", 1);
        ReplicaSet set = ReplicaSet.empty().withPeer(peerDram(PEER_A, 1)).withPeer(peerSsd(PEER_A, 1))
                .withPeer(peerDram(other, 1));
        assertThat(set.fence(PEER_A.memberId(), PEER_A.incarnation()).peers()).hasSize(3);
        assertThat(set.fence(PEER_A.memberId(), PEER_A.incarnation() + 1).peers()).containsExactly(peerDram(other, 1));
        assertThat(set.departed(other.memberId()).peers()).hasSize(2);
    }

    @Test
    void localEvidenceIsNotAPeerRecord() {
        assertThatThrownBy(() -> ReplicaSet.empty().withPeer(ssd(1))).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void unknownSizesAndFormatsStayUnknown() {
        assertThat(ByteCount.UNKNOWN.isKnown()).isFalse();
        assertThat(ByteCount.UNKNOWN).isNotEqualTo(ByteCount.of(0));
        assertThatThrownBy(ByteCount.UNKNOWN::knownBytes).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> ByteCount.of(-1)).isInstanceOf(IllegalArgumentException.class);
        ReplicaEvidence.PeerDram unknown = new ReplicaEvidence.PeerDram(PEER_A, 1, 1, ByteCount.UNKNOWN,
                java.util.Optional.empty());
        assertThat(unknown.representation()).isEmpty();
        assertThat(unknown.storedBytes().isKnown()).isFalse();
        // An unknown representation gives no cost key: it is never compared as if RAW.
        assertThat(RouteTemplate.HOST_FROM_PEER_DRAM.costKey(Fixtures.RESOURCES, unknown.peerOwner(),
                unknown.representation(), 4096, 1, io.orbitkv.model.cost.CompletionTarget.hostReady())).isEmpty();
    }

    @Test
    void staleRecordsLeaveOnlyThemselves() {
        DemandEvidence evidence = DemandEvidence.of(Map.of(key(0, 0),
                ReplicaSet.empty().withLocalDram(dram(3)).withLocalSsd(ssd(4)).withPeer(peerDram(PEER_A, 1))));
        DemandEvidence withoutDram = evidence.withoutStale(key(0, 0), dram(3));
        assertThat(withoutDram.replicas(key(0, 0)).localDram()).isEmpty();
        assertThat(withoutDram.replicas(key(0, 0)).localSsd()).contains(ssd(4));
        // A record that is not the one held (another generation) changes nothing.
        assertThat(evidence.withoutStale(key(0, 0), dram(2))).isSameAs(evidence);
        DemandEvidence empty = withoutDram.withoutStale(key(0, 0), ssd(4)).withoutStale(key(0, 0), peerDram(PEER_A, 1));
        assertThat(empty.keys()).isZero();
    }
}
