package io.orbitkv.planning;

import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.model.cost.CostEstimate;
import io.orbitkv.model.cost.CostEstimateResult;
import io.orbitkv.model.cost.ResourceId;
import io.orbitkv.model.cost.ResourceKind;
import io.orbitkv.recovery.GroupRule;
import io.orbitkv.recovery.RecoveryRules;
import io.orbitkv.model.StateKey;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalLong;
import java.util.Random;
import io.orbitkv.model.PositionedKey;
import io.orbitkv.model.plan.DemandView;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.model.plan.ByteCount;
import io.orbitkv.model.plan.DemandEvidence;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.model.plan.ReplicaEvidence;
import io.orbitkv.model.plan.ReplicaSet;

/** Random planning scenarios for the property tests: rules, demand, evidence, capabilities, estimates. */
final class Scenarios {
    static final CompletionTarget GPU = CompletionTarget.engineRestore(new ResourceId(ResourceKind.GPU_DEVICE, "gpu", 1));
    static final PeerOwner FENCED = new PeerOwner(Fixtures.PEER_A.memberId(), Fixtures.PEER_A.incarnation() - 1);

    private Scenarios() {
    }

    record Scenario(DemandView demand, DemandEvidence evidence, Planner.Context context, Planner.EstimateLookup estimates,
                    long nowNanos) {}

    static RecoveryRules rules(Random random) {
        int pageSize = new int[] {1, 2, 16}[random.nextInt(3)];
        int groups = 1 + random.nextInt(3);
        List<GroupRule> rules = new ArrayList<>();
        for (int g = 0; g < groups; g++) {
            rules.add(switch (random.nextInt(3)) {
                case 0 -> GroupRule.fullAttention(g);
                case 1 -> GroupRule.slidingWindow(g, 1 + random.nextInt(4 * pageSize));
                default -> GroupRule.recurrent(g, (long) (1 + random.nextInt(3)) * pageSize);
            });
        }
        return new RecoveryRules(pageSize, rules);
    }

    /** Random evidence for positions {@code [0, pages)} of each group: mostly present, sometimes several replicas. */
    static DemandEvidence evidence(Random random, RecoveryRules rules, int pages) {
        Map<StateKey, ReplicaSet> sets = new HashMap<>();
        double density = random.nextDouble();
        for (GroupRule rule : rules.groups()) {
            for (int p = 0; p < pages; p++) {
                ReplicaSet set = ReplicaSet.empty();
                if (random.nextDouble() < density) {
                    set = set.withLocalDram(Fixtures.dram(random.nextInt(4)));
                }
                if (random.nextDouble() < density) {
                    set = set.withLocalSsd(Fixtures.ssd(random.nextInt(4)));
                }
                if (random.nextDouble() < density / 2) {
                    set = set.withPeer(Fixtures.peerDram(random.nextBoolean() ? Fixtures.PEER_A : Fixtures.PEER_B, 1));
                }
                if (random.nextDouble() < density / 2) {
                    set = set.withPeer(Fixtures.peerSsd(random.nextBoolean() ? Fixtures.PEER_B : FENCED, 1));
                }
                if (random.nextDouble() < 0.05) {
                    set = set.withPeer(new ReplicaEvidence.PeerDram(Fixtures.PEER_B, 2, 2, ByteCount.UNKNOWN,
                            Optional.empty()));
                }
                sets.put(Fixtures.key(rule.groupId(), p), set);
            }
        }
        return DemandEvidence.of(sets);
    }

    static RouteCapabilities capabilities(Random random) {
        RouteCapabilities capabilities = RouteCapabilities.all();
        for (RouteTemplate route : RouteTemplate.values()) {
            if (random.nextInt(4) == 0) {
                capabilities = capabilities.without(route, "absent in this scenario");
            }
        }
        return capabilities.withEngineRestore(random.nextInt(4) == 0 ? Optional.of("no restore role")
                : Optional.empty());
    }

    /** Estimates that are a fixed random function of the key (and the seed): some unknown, some usable. */
    static Planner.EstimateLookup estimates(long seed) {
        return key -> {
            Random r = new Random(seed * 31 + key.hashCode());
            if (r.nextInt(5) == 0) {
                return new CostEstimateResult.Unavailable(CostEstimateResult.Reason.NO_ENTRY, 0);
            }
            long mean = 1 + r.nextInt(50_000_000);
            return new CostEstimateResult.Usable(new CostEstimate(mean, r.nextInt((int) Math.min(mean, 5_000_000)) , 4,
                    0));
        };
    }

    static Scenario scenario(Random random, long seed) {
        RecoveryRules rules = rules(random);
        int pages = 1 + random.nextInt(16);
        int origin = random.nextInt(pages);
        int end = origin + 1 + random.nextInt(pages - origin);
        List<DemandView.GroupKeys> groups = new ArrayList<>();
        for (GroupRule rule : rules.groups()) {
            List<PositionedKey> keys = new ArrayList<>();
            for (int p = 0; p < pages; p++) {
                keys.add(new PositionedKey(p, Fixtures.key(rule.groupId(), p)));
            }
            groups.add(new DemandView.GroupKeys(rule.groupId(), 1 + random.nextInt(8192), keys));
        }
        CompletionTarget target = random.nextInt(3) == 0 ? GPU : CompletionTarget.hostReady();
        Optional<RouteTemplate> requested = random.nextInt(4) == 0
                ? Optional.of(RouteTemplate.values()[random.nextInt(RouteTemplate.values().length)]) : Optional.empty();
        OptionalDouble rate = random.nextBoolean() ? OptionalDouble.of(1 + random.nextInt(1_000_000))
                : OptionalDouble.empty();
        long now = 1_000_000_000L;
        OptionalLong firstUse = random.nextBoolean() ? OptionalLong.of(now + random.nextInt(100_000_000))
                : OptionalLong.empty();
        long cap = random.nextBoolean() ? Long.MAX_VALUE : random.nextInt(8192 * pages * rules.groups().size() + 1);
        DemandView demand = new DemandView(rules, (long) origin * rules.pageSizeTokens(),
                (long) end * rules.pageSizeTokens(), groups, target, requested, rate, firstUse, random.nextInt(4),
                random.nextFloat(), random.nextBoolean(), cap);
        Planner.SelectionMode mode = Planner.SelectionMode.values()[random.nextInt(3)];
        Planner.Context context = new Planner.Context(capabilities(random),
                owner -> owner.equals(Fixtures.PEER_A) || owner.equals(Fixtures.PEER_B), Fixtures.RESOURCES, mode);
        return new Scenario(demand, evidence(random, rules, pages), context, estimates(seed), now);
    }
}
