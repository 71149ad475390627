package io.orbitkv.planning;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.recovery.GroupRule;
import io.orbitkv.recovery.RecoveryRules;
import io.orbitkv.storage.ImageStoreFixture;
import io.orbitkv.model.StateKey;
import io.vertx.core.Future;
import java.lang.foreign.Arena;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.AllocateResult;
import io.orbitkv.model.ExactPin;
import io.orbitkv.model.KeyEvidence;
import io.orbitkv.model.KeyGeneration;
import io.orbitkv.model.plan.DemandView;
import io.orbitkv.model.plan.Plan;
import io.orbitkv.model.plan.PlanningException;
import io.orbitkv.model.plan.PlanningFailure;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.model.plan.DemandEvidence;
import io.orbitkv.model.plan.ReplicaEvidence;
import io.orbitkv.model.plan.PlannedPage;
import io.orbitkv.model.plan.PlannedSegment;
import io.orbitkv.model.plan.SegmentLease;
import io.orbitkv.model.plan.LocalReplicaPort;

/**
 * The local execution owners over a real image store ({@link ImageStoreFixture}): between discovery and acquisition,
 * pages are evicted by other publishes, and some evicted keys are published again (a new slot generation). Whatever happens, an execution
 * that fails holds no pin, one that succeeds pins exactly the plan's pages at the generations it discovered (the
 * evidence it relied on), and releasing it leaves nothing pinned.
 */
class LocalOwnersProperties {
    static final int CASES = 400;
    static final long PAGE = 4096;

    static java.util.stream.LongStream seeds() {
        return Seeded.seeds(CASES);
    }

    @ParameterizedTest(name = "seed {0}")
    @MethodSource("seeds")
    void aRevalidationFailureLeavesNoPinAndASuccessPinsExactlyWhatThePlanNamed(long seed) {
        Seeded.check(seed, LocalOwnersProperties::run);
    }

    private static void run(Random random) {
        try (Arena arena = Arena.ofConfined()) {
            int slots = 8 + random.nextInt(16);
            ImageStoreFixture store = new ImageStoreFixture(arena.allocate(slots * PAGE, 4096), PAGE);
            RecoveryRules rules = random.nextBoolean() ? RecoveryRules.of(16, GroupRule.fullAttention(0))
                    : RecoveryRules.of(16, GroupRule.fullAttention(0), GroupRule.recurrent(1, 16L * (1 + random.nextInt(4))));
            int pages = 1 + random.nextInt(Math.min(8, slots / 2));
            for (GroupRule rule : rules.groups()) {
                for (int p = 0; p < pages; p++) {
                    if (random.nextInt(4) > 0) {
                        publish(store, Fixtures.key(rule.groupId(), p));
                    }
                }
            }
            LocalOwners owners = new LocalOwners(port(store));
            ManualTicker ticker = new ManualTicker();
            PlanExecutor executor = new PlanExecutor(Map.of(RouteTemplate.LOCAL_DRAM, owners.dram()),
                    TransferScheduler.Settings.uniform(1 << 20, 0.25, 16), ticker, new SimpleMeterRegistry(),
                    new ManualTimers(ticker));
            DemandView demand = DemandView.hostReady(rules, 0, (long) pages * 16, Fixtures.keys(rules, pages));
            DemandEvidence evidence = owners.evidence().discover(demand).await();
            Plan plan = Planner.plan(demand, evidence, Fixtures.context(RouteCapabilities.localOnly(false),
                    Planner.SelectionMode.OFF), ticker.nanos(), Planner.EstimateLookup.NONE).plan();
            // Between the evidence and the acquisition: other publishes evict, some keys come back at a new generation.
            int churn = random.nextInt(slots);
            for (int i = 0; i < churn; i++) {
                publish(store, Fixtures.key(9, 1000 + i));
            }
            for (PlannedSegment segment : plan.segments()) {
                for (PlannedPage page : segment.pages()) {
                    if (store.stateOf(page.key()) == null && random.nextBoolean()) {
                        publish(store, page.key());
                    }
                }
            }
            PlanExecutor.Preparation preparation = executor.prepare(plan, PlanExecutor.Schedule.demandNow(ticker.nanos()));
            Future<PreparedPlan> result = preparation.result();
            assertThat(result.isComplete()).as("local DRAM completes in place").isTrue();
            if (result.failed()) {
                assertThat(PlanningException.failureOf(result.cause())).isEqualTo(PlanningFailure.STALE_EVIDENCE);
                assertThat(store.pinnedImages()).as("a failed acquisition leaves no pin").isZero();
                assertThat(owners.activeLeases()).isZero();
                return;
            }
            PreparedPlan prepared = result.result();
            int planned = 0;
            for (SegmentLease lease : prepared.leases()) {
                for (int i = 0; i < lease.segment().pages().size(); i++) {
                    PlannedPage page = lease.segment().pages().get(i);
                    ImageRef pinned = lease.hostPages().get(i);
                    assertThat(pinned.key()).isEqualTo(page.key());
                    assertThat(pinned.generation()).as("the generation the plan relied on")
                            .isEqualTo(((ReplicaEvidence.LocalDram) page.evidence()).slotGeneration());
                    planned++;
                }
            }
            assertThat(store.pinnedImages()).isEqualTo(planned);
            prepared.release().await();
            assertThat(store.pinnedImages()).isZero();
            assertThat(owners.activeLeases()).isZero();
            assertThat(executor.heldLeases()).isZero();
        }
    }

    private static void publish(ImageStoreFixture store, StateKey key) {
        AllocateResult allocated = store.allocate(1, List.of(key), List.of(PAGE));
        store.seal(1, allocated.publishId(), List.of(), List.of());
    }

    private static LocalReplicaPort port(ImageStoreFixture store) {
        return new LocalReplicaPort() {
            @Override
            public Future<List<KeyEvidence>> discover(List<StateKey> keys) {
                return Future.succeededFuture(store.discover(keys));
            }

            @Override
            public Future<ExactPin> pinGenerations(List<KeyGeneration> pages) {
                return Future.succeededFuture(store.pinGenerations(pages));
            }

            @Override
            public Future<Integer> unpin(List<ImageRef> pinned, boolean quarantine) {
                store.unpin(List.of(pinned));
                return Future.succeededFuture(pinned.size());
            }

            @Override
            public Future<SsdAcquired> acquireFromSsd(List<KeyGeneration> pages) {
                return Future.failedFuture(new AssertionError("no SSD here"));
            }

            @Override
            public Future<List<ImageRef>> readFromSsd(long hold) {
                return Future.failedFuture(new AssertionError("no SSD here"));
            }

            @Override
            public Future<Boolean> releaseSsdHold(long hold) {
                return Future.succeededFuture(false);
            }
        };
    }
}
