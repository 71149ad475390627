package io.orbitkv.planning;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.model.PositionedKey;
import io.orbitkv.model.StateKey;
import io.orbitkv.model.plan.DemandEvidence;
import io.orbitkv.model.plan.DemandView;
import io.orbitkv.model.plan.PlanningException;
import io.orbitkv.model.plan.ReplicaSet;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The local-hit short cut decides exactly what the general planner decides: over random rules, demands, byte caps,
 * capabilities, targets, explicit routes, prefill rates and selection modes, half of them with every declared page in
 * local DRAM (beside whatever SSD and peer replicas it has), {@link Planner#plan} equals {@link Planner#general}
 * (the same plan and comparisons, or the same fail-closed refusal). The short cut must have been taken in a fair
 * share of the cases, or the property proves nothing.
 */
class LocalHitProperties {
    static final int CASES = 1500;
    private static final AtomicInteger SHORT_CUTS = new AtomicInteger();

    static java.util.stream.LongStream seeds() {
        return Seeded.seeds(CASES);
    }

    @ParameterizedTest(name = "seed {0}")
    @MethodSource("seeds")
    void theShortCutPlansWhatTheGeneralPlannerPlans(long seed) {
        Seeded.check(seed, random -> {
            Scenarios.Scenario s = Scenarios.scenario(random, seed);
            DemandEvidence evidence = random.nextBoolean() ? allInDram(s.demand(), s.evidence(), random) : s.evidence();
            Planner.Result shortCut;
            try {
                shortCut = Planner.plan(s.demand(), evidence, s.context(), s.nowNanos(), s.estimates());
            } catch (PlanningException e) {
                try {
                    Planner.general(s.demand(), evidence, s.context(), s.nowNanos(), s.estimates());
                } catch (PlanningException general) {
                    assertThat(e.failure()).isEqualTo(general.failure());
                    return;
                }
                throw new AssertionError("only the short cut failed: " + e.getMessage(), e);
            }
            Planner.Result general = Planner.general(s.demand(), evidence, s.context(), s.nowNanos(), s.estimates());
            assertThat(shortCut).isEqualTo(general);
            if (LocalHitPlanner.plan(s.demand(), evidence, Planner.allowedRoutes(s.demand(), s.context().capabilities()))
                    != null) {
                SHORT_CUTS.incrementAndGet();
            }
        });
    }

    @AfterAll
    static void theShortCutWasTaken() {
        assertThat(SHORT_CUTS.get()).as("cases decided by the short cut").isGreaterThan(CASES / 10);
    }

    /** Every declared page gains a local DRAM replica (keeping the others), sometimes at another slot generation. */
    private static DemandEvidence allInDram(DemandView demand, DemandEvidence evidence, java.util.Random random) {
        Map<StateKey, ReplicaSet> sets = new HashMap<>();
        for (DemandView.GroupKeys group : demand.groups()) {
            for (PositionedKey pk : group.keys()) {
                ReplicaSet set = evidence.replicas(pk.key());
                if (set.localDram().isEmpty()) {
                    set = set.withLocalDram(Fixtures.dram(random.nextInt(4)));
                }
                sets.put(pk.key(), set);
            }
        }
        return DemandEvidence.of(sets);
    }
}
