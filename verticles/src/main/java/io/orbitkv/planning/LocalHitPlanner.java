package io.orbitkv.planning;

import io.orbitkv.model.PositionedKey;
import io.orbitkv.model.StateKey;
import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.model.plan.BoundaryReason;
import io.orbitkv.model.plan.DemandEvidence;
import io.orbitkv.model.plan.DemandView;
import io.orbitkv.model.plan.Plan;
import io.orbitkv.model.plan.PlannedPage;
import io.orbitkv.model.plan.PlannedSegment;
import io.orbitkv.model.plan.ReplicaEvidence;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.model.plan.TimeEstimate;
import io.orbitkv.recovery.BlockRange;
import io.orbitkv.recovery.GroupAvailability;
import io.orbitkv.recovery.GroupRanges;
import io.orbitkv.recovery.GroupRule;
import io.orbitkv.recovery.RecoveryContract;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.OptionalLong;

/**
 * The local hit, decided in one step: a host-ready demand without a prefill rate whose every declared page has local
 * DRAM evidence. Local DRAM is first in the default order, so every prefix of the allowed routes reaches the same
 * pages, the candidates are the origin and the longest legal boundary that fits the byte cap, the default is the
 * longer, every required page takes local DRAM, and selection leaves local DRAM batches alone: exactly the plan
 * {@link Planner#general} makes (a property test holds the two equal), without its option tables, batches or
 * per-prefix passes.
 *
 * <p>One evidence lookup per page, kept in arrays by position; no maps. Pure logic, safe from any thread.
 */
final class LocalHitPlanner {
    private LocalHitPlanner() {}

    /** The hit's plan, or null when {@code demand} is not such a hit. */
    static Plan plan(DemandView demand, DemandEvidence evidence, List<RouteTemplate> allowed) {
        if (demand.target().intent() != CompletionTarget.Intent.HOST_READY
                || demand.prefillTokensPerSecond().isPresent() || allowed.isEmpty()
                || allowed.getFirst() != RouteTemplate.LOCAL_DRAM) {
            return null;
        }
        List<GroupRule> rules = demand.rules().groups();
        List<GroupAvailability> availability = new ArrayList<>(rules.size());
        // Per rule: the declared keys and their DRAM evidence by position (null where not declared).
        StateKey[][] keys = new StateKey[rules.size()][];
        ReplicaEvidence[][] dram = new ReplicaEvidence[rules.size()][];
        for (int g = 0; g < rules.size(); g++) {
            DemandView.GroupKeys group = demand.group(rules.get(g).groupId());
            List<PositionedKey> declared = group == null ? List.of() : group.keys();
            int max = -1;
            for (PositionedKey pk : declared) {
                max = Math.max(max, pk.position());
            }
            keys[g] = new StateKey[max + 1];
            dram[g] = new ReplicaEvidence[max + 1];
            BitSet bits = new BitSet(max + 1);
            for (PositionedKey pk : declared) {
                ReplicaEvidence.LocalDram found = evidence.replicas(pk.key()).localDram().orElse(null);
                if (found == null) {
                    return null;
                }
                keys[g][pk.position()] = pk.key();
                dram[g][pk.position()] = found;
                bits.set(pk.position());
            }
            availability.add(GroupAvailability.of(rules.get(g).groupId(), bits));
        }
        long origin = demand.validPrefixTokens();
        OptionalLong best = RecoveryContract.bestBoundary(demand.rules(), availability, origin,
                demand.selectedEndTokens());
        long longest = Math.max(origin, best.orElse(origin));
        long boundary = origin;
        if (best.isPresent()) {
            boundary = Math.max(origin, fittingBelow(demand, availability, best.getAsLong()).orElse(origin));
        }
        BoundaryReason reason = boundary == longest ? BoundaryReason.LONGEST : BoundaryReason.BUDGET;
        if (boundary == origin) {
            return new Plan(origin, boundary, reason, demand.target(), List.of(), List.of(), 0, longest,
                    TimeEstimate.NONE, List.of());
        }
        List<GroupRanges> required = RecoveryContract.requiredRanges(demand.rules(), boundary, origin);
        List<PlannedSegment> segments = new ArrayList<>();
        long bytes = 0;
        for (GroupRanges ranges : required) {
            int g = ruleIndex(rules, ranges.groupId());
            DemandView.GroupKeys group = demand.group(ranges.groupId());
            long bytesPerPage = group == null ? 0 : group.bytesPerPage();
            for (BlockRange range : ranges.ranges()) {
                PlannedPage[] run = new PlannedPage[range.endExclusive() - range.startInclusive()];
                for (int p = range.startInclusive(); p < range.endExclusive(); p++) {
                    run[p - range.startInclusive()] = new PlannedPage(p, keys[g][p], dram[g][p]);
                }
                long segmentBytes = bytesPerPage * run.length;
                segments.add(new PlannedSegment(ranges.groupId(), range, RouteTemplate.LOCAL_DRAM, List.of(run),
                        segmentBytes, demand.target()));
                bytes += segmentBytes;
            }
        }
        return new Plan(origin, boundary, reason, demand.target(), required, segments, bytes, longest,
                TimeEstimate.NONE, List.of());
    }

    private static int ruleIndex(List<GroupRule> rules, int groupId) {
        for (int g = 0; g < rules.size(); g++) {
            if (rules.get(g).groupId() == groupId) {
                return g;
            }
        }
        throw new IllegalStateException("group " + groupId + " is not in the rules");
    }

    /** {@code longest} when its required bytes fit the cap, else the longest legal boundary below it that fits. */
    private static OptionalLong fittingBelow(DemandView demand, List<GroupAvailability> availability, long longest) {
        if (requiredBytes(demand, longest) <= demand.byteCapBytes()) {
            return OptionalLong.of(longest);
        }
        List<Long> legal = RecoveryContract.legalBoundaries(demand.rules(), availability, demand.validPrefixTokens(),
                longest);
        for (int i = legal.size() - 1; i >= 0; i--) {
            if (requiredBytes(demand, legal.get(i)) <= demand.byteCapBytes()) {
                return OptionalLong.of(legal.get(i));
            }
        }
        return OptionalLong.empty();
    }

    private static long requiredBytes(DemandView demand, long boundary) {
        long bytes = 0;
        for (GroupRanges ranges : RecoveryContract.requiredRanges(demand.rules(), boundary,
                demand.validPrefixTokens())) {
            DemandView.GroupKeys group = demand.group(ranges.groupId());
            bytes += ranges.pageCount() * (group == null ? 0 : group.bytesPerPage());
        }
        return bytes;
    }
}
