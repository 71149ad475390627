package io.orbitkv.cluster;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.model.plan.Medium;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.model.plan.ReplicaEvidence;
import io.orbitkv.model.plan.ReplicaSet;
import io.orbitkv.model.ResidencyEvent.Change;
import io.orbitkv.model.StateKey;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class InventoryDirectoryTest {
    static final PeerOwner B = new PeerOwner("b", 100);

    static StateKey key(int i) {
        return StateKey.of(new byte[16], 0, new byte[] {(byte) i, (byte) (i >> 8), 1});
    }

    static InventoryDirectory.Change added(int key, long seq) {
        return new InventoryDirectory.Change(Change.DRAM_ADDED, key(key), 1000 + key, 4096, seq, 0);
    }

    static InventoryDirectory.Change removed(int key, long seq) {
        return new InventoryDirectory.Change(Change.DRAM_REMOVED, key(key), 1000 + key, 4096, seq, 0);
    }

    @Test
    void aMemberIsAppliedInOrderOnlyAfterASnapshot() {
        InventoryDirectory d = new InventoryDirectory(100);
        assertThat(d.applyBatch(B, 0, 1, false, List.of(added(1, 1)))).isEqualTo(InventoryDirectory.Outcome.NOT_SYNCED);
        d.applySnapshot(B, 1, List.of(added(1, 0)));
        assertThat(d.applyBatch(B, 1, 3, false, List.of(added(2, 2), added(3, 3)))).isEqualTo(InventoryDirectory.Outcome.APPLIED);
        assertThat(d.applyBatch(B, 1, 3, false, List.of(added(2, 2), added(3, 3)))).isEqualTo(InventoryDirectory.Outcome.DUPLICATE);
        assertThat(d.keys("b")).isEqualTo(3);
        // Overlapping what was applied: only the new events count.
        assertThat(d.applyBatch(B, 2, 4, false, List.of(added(3, 3), removed(1, 4)))).isEqualTo(InventoryDirectory.Outcome.APPLIED);
        assertThat(d.keys("b")).isEqualTo(2);
        // Sequence 5 never arrived.
        assertThat(d.applyBatch(B, 5, 6, false, List.of(added(9, 6)))).isEqualTo(InventoryDirectory.Outcome.GAP);
        assertThat(d.synced("b")).isFalse();
        assertThat(d.keys("b")).as("evidence stays until the snapshot replaces it").isEqualTo(2);
        d.applySnapshot(B, 6, List.of(added(9, 0)));
        assertThat(d.keys("b")).isEqualTo(1);
        assertThat(d.applyBatch(B, 6, 6, true, List.of())).as("the owner's reset").isEqualTo(InventoryDirectory.Outcome.GAP);
    }

    @Test
    void incarnationsFenceAndDepartureDrops() {
        InventoryDirectory d = new InventoryDirectory(100);
        d.applySnapshot(B, 3, List.of(added(1, 0), added(2, 0)));
        assertThat(d.applyBatch(new PeerOwner("b", 99), 3, 4, false, List.of(added(3, 4))))
                .isEqualTo(InventoryDirectory.Outcome.FENCED);
        assertThat(d.applyBatch(new PeerOwner("b", 101), 0, 1, false, List.of(added(3, 1))))
                .as("a newer incarnation drops the old one's evidence and asks for its snapshot")
                .isEqualTo(InventoryDirectory.Outcome.NOT_SYNCED);
        assertThat(d.keys("b")).isZero();
        assertThat(d.fenced()).isEqualTo(2);
        d.applySnapshot(new PeerOwner("b", 101), 1, List.of(added(3, 0)));
        d.fence("b", 101);
        assertThat(d.keys("b")).as("fencing keeps the current incarnation").isEqualTo(1);
        d.applySnapshot(new PeerOwner("c", 5), 1, List.of(added(4, 0)));
        d.departed("b");
        assertThat(d.fenced()).isEqualTo(3);
        d.clear();
        assertThat(d.fenced()).isEqualTo(4);
        assertThat(d.members()).isEmpty();
    }

    @Test
    void replicasArePeerRecordsWithOwnerIncarnationSequenceGenerationAndBytes() {
        InventoryDirectory d = new InventoryDirectory(100);
        d.applySnapshot(B, 1, List.of(added(1, 0)));
        d.applyBatch(B, 1, 2, false, List.of(new InventoryDirectory.Change(Change.SSD_ADDED, key(1), 77, 8192, 2, 0)));
        ReplicaSet set = d.replicas(key(1), ReplicaSet.empty());
        assertThat(set.localDram()).isEmpty();
        assertThat(set.ofMedium(Medium.PEER_DRAM)).singleElement().isEqualTo(new ReplicaEvidence.PeerDram(B, 0, 1001,
                io.orbitkv.model.plan.ByteCount.of(4096), java.util.Optional.of(io.orbitkv.model.cost.RepresentationFamily.RAW)));
        assertThat(set.ofMedium(Medium.PEER_SSD)).singleElement().isEqualTo(new ReplicaEvidence.PeerSsd(B, 2, 77,
                io.orbitkv.model.plan.ByteCount.of(8192), java.util.Optional.of(io.orbitkv.model.cost.RepresentationFamily.RAW)));
        assertThat(d.replicas(key(2), ReplicaSet.empty()).isEmpty()).isTrue();
    }

    /** Seeded: any interleaving of adds and removes keeps at most the cap, dropping the longest-announced first. */
    @ParameterizedTest
    @ValueSource(longs = {1, 2, 3, 42, 20261201})
    void theCapKeepsTheMostRecentlyAnnouncedKeys(long seed) {
        Random random = new Random(seed);
        int cap = 16;
        InventoryDirectory d = new InventoryDirectory(cap);
        d.applySnapshot(B, 0, List.of());
        java.util.LinkedHashSet<Integer> model = new java.util.LinkedHashSet<>();
        long dropped = 0;
        long seq = 0;
        for (int step = 0; step < 2000; step++) {
            int k = random.nextInt(40);
            List<InventoryDirectory.Change> batch = new ArrayList<>();
            if (random.nextInt(3) == 0) {
                batch.add(removed(k, ++seq));
                model.remove(k);
            } else {
                batch.add(added(k, ++seq));
                model.remove(k);
                model.add(k);
                while (model.size() > cap) {
                    model.remove(model.iterator().next());
                    dropped++;
                }
            }
            assertThat(d.applyBatch(B, seq - 1, seq, false, batch)).as("seed %d", seed).isEqualTo(InventoryDirectory.Outcome.APPLIED);
        }
        assertThat(d.keys("b")).as("seed %d", seed).isEqualTo(model.size()).isLessThanOrEqualTo(cap);
        assertThat(d.droppedOverCap()).as("seed %d", seed).isEqualTo(dropped);
        for (int k = 0; k < 40; k++) {
            assertThat(d.replicas(key(k), ReplicaSet.empty()).isEmpty()).as("seed %d key %d", seed, k).isEqualTo(!model.contains(k));
        }
    }
}
