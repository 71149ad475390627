package io.orbitkv.planning;

import io.orbitkv.model.cost.ResourceId;
import io.orbitkv.model.cost.ResourceKind;
import io.orbitkv.recovery.GroupRule;
import io.orbitkv.recovery.RecoveryRules;
import io.orbitkv.model.StateKey;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import io.orbitkv.model.PositionedKey;
import io.orbitkv.model.plan.DemandView;
import io.orbitkv.model.plan.ByteCount;
import io.orbitkv.model.plan.DemandEvidence;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.model.plan.ReplicaEvidence;
import io.orbitkv.model.plan.ReplicaSet;
import io.orbitkv.model.plan.RouteResources;

/** Shared shapes for the planning tests. */
final class Fixtures {
    static final byte[] NAMESPACE = new byte[StateKey.NAMESPACE_BYTES];
    static final int PAGE_TOKENS = 16;
    static final long PAGE_BYTES = 64 * 1024;
    static final RouteResources RESOURCES = new RouteResources(
            new ResourceId(ResourceKind.DRAM_POOL, "pool", 7), new ResourceId(ResourceKind.SSD_STORE, "ssd", 7));
    static final PeerOwner PEER_A = new PeerOwner("manager-a", 11);
    static final PeerOwner PEER_B = new PeerOwner("manager-b", 12);

    static {
        NAMESPACE[0] = 42;
    }

    private Fixtures() {
    }

    static StateKey key(int group, int position) {
        return StateKey.of(NAMESPACE, group, ByteBuffer.allocate(8).putInt(group).putInt(position).array());
    }

    static RecoveryRules fullAttention() {
        return RecoveryRules.of(PAGE_TOKENS, GroupRule.fullAttention(0));
    }

    /** Group keys for positions {@code [0, pages)} of each group of {@code rules}. */
    static List<DemandView.GroupKeys> keys(RecoveryRules rules, int pages) {
        List<DemandView.GroupKeys> groups = new ArrayList<>();
        for (GroupRule rule : rules.groups()) {
            List<PositionedKey> keys = new ArrayList<>();
            for (int p = 0; p < pages; p++) {
                keys.add(new PositionedKey(p, key(rule.groupId(), p)));
            }
            groups.add(new DemandView.GroupKeys(rule.groupId(), PAGE_BYTES, keys));
        }
        return groups;
    }

    /** A host-ready demand for {@code pages} pages of every group from origin 0. */
    static DemandView demand(RecoveryRules rules, int pages) {
        return DemandView.hostReady(rules, 0, (long) pages * rules.pageSizeTokens(), keys(rules, pages));
    }

    static ReplicaEvidence.LocalDram dram(long generation) {
        return new ReplicaEvidence.LocalDram(generation, generation, ByteCount.of(PAGE_BYTES));
    }

    static ReplicaEvidence.LocalSsd ssd(long generation) {
        return new ReplicaEvidence.LocalSsd(generation, ByteCount.of(PAGE_BYTES));
    }

    static ReplicaEvidence.PeerDram peerDram(PeerOwner owner, long generation) {
        return new ReplicaEvidence.PeerDram(owner, generation, generation, ByteCount.UNKNOWN,
                Optional.of(io.orbitkv.model.cost.RepresentationFamily.RAW));
    }

    static ReplicaEvidence.PeerSsd peerSsd(PeerOwner owner, long generation) {
        return new ReplicaEvidence.PeerSsd(owner, generation, generation, ByteCount.UNKNOWN,
                Optional.of(io.orbitkv.model.cost.RepresentationFamily.RAW));
    }

    /** Builds demand evidence page by page. */
    static final class EvidenceBuilder {
        private final Map<StateKey, ReplicaSet> sets = new HashMap<>();

        EvidenceBuilder add(int group, int from, int to, ReplicaEvidence evidence) {
            for (int p = from; p < to; p++) {
                StateKey key = key(group, p);
                ReplicaSet set = sets.getOrDefault(key, ReplicaSet.empty());
                set = switch (evidence) {
                    case ReplicaEvidence.LocalDram d -> set.withLocalDram(d);
                    case ReplicaEvidence.LocalSsd s -> set.withLocalSsd(s);
                    default -> set.withPeer(evidence);
                };
                sets.put(key, set);
            }
            return this;
        }

        DemandEvidence build() {
            return DemandEvidence.of(sets);
        }
    }

    static EvidenceBuilder evidence() {
        return new EvidenceBuilder();
    }

    static Planner.Context context(RouteCapabilities capabilities, Planner.SelectionMode mode) {
        return new Planner.Context(capabilities, owner -> owner.equals(PEER_A) || owner.equals(PEER_B), RESOURCES, mode);
    }

    static Planner.Result plan(DemandView demand, DemandEvidence evidence, RouteCapabilities capabilities) {
        return Planner.plan(demand, evidence, context(capabilities, Planner.SelectionMode.OFF), 0,
                Planner.EstimateLookup.NONE);
    }
}
