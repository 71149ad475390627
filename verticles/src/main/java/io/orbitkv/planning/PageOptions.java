package io.orbitkv.planning;

import io.orbitkv.model.PositionedKey;
import io.orbitkv.model.StateKey;
import io.orbitkv.model.plan.DemandEvidence;
import io.orbitkv.model.plan.DemandView;
import io.orbitkv.model.plan.MembershipView;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.model.plan.ReplicaEvidence;
import io.orbitkv.model.plan.ReplicaSet;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.recovery.GroupAvailability;
import io.orbitkv.recovery.GroupRanges;
import io.orbitkv.recovery.GroupRule;
import io.orbitkv.recovery.RecoveryContract;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.List;
import java.util.Optional;

/**
 * The demand's pages indexed by group and position, each with its eligible options in allowed order. Built once
 * per planning pass. Pure logic.
 */
final class PageOptions {
    /** One eligible way to get a page: a route and the evidence it would rely on. */
    record Option(RouteTemplate route, ReplicaEvidence evidence) {
        Optional<PeerOwner> owner() {
            return evidence.peerOwner();
        }
    }

    /** A required page and the option picked for it. */
    record Pick(int groupIndex, int position, StateKey key, Option option) {}

    private final DemandView demand;
    private final List<RouteTemplate> allowed;
    private final int[] groupIds;
    private final long[] bytesPerPage;
    private final StateKey[][] keys;
    private final List<Option>[][] options;
    /** Per group and position: the allowed-order index of the first option, or {@code allowed.size()}. */
    private final int[][] firstRoute;

    @SuppressWarnings({"unchecked", "rawtypes"}) // a generic array of option lists, filled once per pass
    PageOptions(DemandView demand, DemandEvidence evidence, List<RouteTemplate> allowed, MembershipView members) {
        this.demand = demand;
        this.allowed = allowed;
        List<GroupRule> rules = demand.rules().groups();
        groupIds = new int[rules.size()];
        bytesPerPage = new long[rules.size()];
        keys = new StateKey[rules.size()][];
        options = new List[rules.size()][];
        firstRoute = new int[rules.size()][];
        for (int g = 0; g < rules.size(); g++) {
            groupIds[g] = rules.get(g).groupId();
            DemandView.GroupKeys group = demand.group(groupIds[g]);
            List<PositionedKey> declared = group == null ? List.of() : group.keys();
            bytesPerPage[g] = group == null ? 0 : group.bytesPerPage();
            int max = -1;
            for (PositionedKey pk : declared) {
                max = Math.max(max, pk.position());
            }
            keys[g] = new StateKey[max + 1];
            options[g] = new List[max + 1];
            firstRoute[g] = new int[max + 1];
            Arrays.fill(firstRoute[g], allowed.size());
            for (PositionedKey pk : declared) {
                keys[g][pk.position()] = pk.key();
                List<Option> found = optionsOf(evidence.replicas(pk.key()), members);
                options[g][pk.position()] = found;
                if (!found.isEmpty()) {
                    firstRoute[g][pk.position()] = allowed.indexOf(found.getFirst().route());
                }
            }
        }
    }

    private List<Option> optionsOf(ReplicaSet replicas, MembershipView members) {
        if (replicas.isEmpty()) {
            return List.of();
        }
        List<Option> found = new ArrayList<>(2);
        for (RouteTemplate route : allowed) {
            for (ReplicaEvidence ev : replicas.ofMedium(route.medium())) {
                // Runs per page and route on the query path: no capturing lambda.
                Optional<PeerOwner> owner = ev.peerOwner();
                if (owner.isEmpty() || members.isCurrent(owner.get())) {
                    found.add(new Option(route, ev));
                }
            }
        }
        return List.copyOf(found);
    }

    List<GroupAvailability> availability(int prefix) {
        List<GroupAvailability> views = new ArrayList<>(groupIds.length);
        for (int g = 0; g < groupIds.length; g++) {
            BitSet bits = new BitSet(firstRoute[g].length);
            for (int p = 0; p < firstRoute[g].length; p++) {
                if (firstRoute[g][p] < prefix) {
                    bits.set(p);
                }
            }
            views.add(GroupAvailability.of(groupIds[g], bits));
        }
        return views;
    }

    long requiredBytes(long boundary) {
        long bytes = 0;
        for (GroupRanges ranges : RecoveryContract.requiredRanges(demand.rules(), boundary,
                demand.validPrefixTokens())) {
            bytes += ranges.pageCount() * bytesPerPage[groupIndex(ranges.groupId())];
        }
        return bytes;
    }

    int groupIndex(int groupId) {
        for (int g = 0; g < groupIds.length; g++) {
            if (groupIds[g] == groupId) {
                return g;
            }
        }
        throw new IllegalStateException("group " + groupId + " is not in the rules");
    }

    int groupId(int groupIndex) {
        return groupIds[groupIndex];
    }

    long bytesPerPage(int groupIndex) {
        return bytesPerPage[groupIndex];
    }

    StateKey key(int groupIndex, int position) {
        return keys[groupIndex][position];
    }

    List<Option> options(int groupIndex, int position) {
        return options[groupIndex][position];
    }

    /**
     * The default option of a required page: its first route in the default order; for a peer route, the owner
     * of the previous page when it has this page too (consecutive coverage), else the most recently refreshed.
     */
    Option defaultOption(int groupIndex, int position, Pick previous) {
        List<Option> found = options[groupIndex][position];
        RouteTemplate route = found.getFirst().route();
        if (!route.medium().isPeer()) {
            return found.getFirst();
        }
        Option latest = null;
        for (Option option : found) {
            if (option.route() != route) {
                continue;
            }
            if (previous != null && previous.option().route() == route
                    && previous.option().owner().equals(option.owner())) {
                return option;
            }
            latest = option;
        }
        return latest;
    }
}
