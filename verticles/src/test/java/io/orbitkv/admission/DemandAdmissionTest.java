package io.orbitkv.admission;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.admission.AdmissionCommands.DemandPlan;
import io.orbitkv.admission.AdmissionCommands.DemandState;
import io.orbitkv.admission.AdmissionCommands.GroupPlan;
import io.orbitkv.admission.AdmissionCommands.Outcome;
import io.orbitkv.admission.AdmissionCommands.Status;
import io.orbitkv.cluster.ClusterEvidence;
import io.orbitkv.common.OrbitException;
import io.orbitkv.model.cost.ResourceId;
import io.orbitkv.model.cost.ResourceKind;
import io.orbitkv.model.cost.RepresentationFamily;
import io.orbitkv.model.plan.ByteCount;
import io.orbitkv.model.plan.DemandEvidence;
import io.orbitkv.planning.EstimateSource;
import io.orbitkv.model.plan.ExecutionOwner;
import io.orbitkv.planning.LocalOwners;
import io.orbitkv.model.plan.LocalReplicaPort;
import io.orbitkv.model.plan.MembershipView;
import io.orbitkv.planning.PlanExecutor;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.model.plan.PlannedPage;
import io.orbitkv.model.plan.PlannedSegment;
import io.orbitkv.planning.PlanningCommands;
import io.orbitkv.planning.PlanningHandlers;
import io.orbitkv.planning.PlanningPort;
import io.orbitkv.planning.PlanningRole;
import io.orbitkv.model.plan.ReplicaEvidence;
import io.orbitkv.model.plan.ReplicaSet;
import io.orbitkv.planning.RestoreOwner;
import io.orbitkv.planning.RouteCapabilities;
import io.orbitkv.model.plan.RouteResources;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.model.plan.SegmentLease;
import io.orbitkv.planning.TransferScheduler;
import io.orbitkv.protocol.engine.ErrorReason;
import io.orbitkv.recovery.GroupRule;
import io.orbitkv.recovery.RecoveryRules;
import io.orbitkv.storage.ImageStoreFixture;
import io.orbitkv.model.StateKey;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import java.lang.foreign.Arena;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.AllocateResult;
import io.orbitkv.model.PositionedKey;
import io.orbitkv.model.ExactPin;
import io.orbitkv.model.KeyEvidence;
import io.orbitkv.model.KeyGeneration;

/**
 * The admission role's handlers driven directly, without the event bus: a real image store ({@link ImageStoreFixture})
 * behind a storage port the test can hold (to put a pin "in flight"), and a hand-stepped ticker. No sleeps.
 */
class DemandAdmissionTest {
    static final int P = 16;
    static final long PAGE = 4096;
    static final byte[] NS = new byte[16];
    static final long WAIT = TimeUnit.SECONDS.toNanos(5);
    static final long TTL = TimeUnit.SECONDS.toNanos(30);
    static final long QUARANTINE = TimeUnit.SECONDS.toNanos(60);
    static final RecoveryRules RULES = RecoveryRules.of(P, GroupRule.fullAttention(0), GroupRule.recurrent(2, 4 * P));

    final Arena arena = Arena.ofShared();
    final ImageStoreFixture store = new ImageStoreFixture(arena.allocate(4 << 20), 64 << 10);
    long now = 1_000_000_000L;
    /** When set, pinExact waits here until the test completes it. */
    boolean holdPins;
    final Deque<Runnable> heldPins = new ArrayDeque<>();
    boolean losePages;

    /** The storage role's side for planning's local owners, over the real store; pins can be held in flight. */
    final LocalReplicaPort port = new LocalReplicaPort() {
        @Override
        public Future<List<KeyEvidence>> discover(List<StateKey> keys) {
            return Future.succeededFuture(store.discover(keys));
        }

        @Override
        public Future<ExactPin> pinGenerations(List<KeyGeneration> pages) {
            if (losePages) {
                return Future.succeededFuture(new ExactPin(false, List.of(), 0, pages.getFirst().key()));
            }
            if (!holdPins) {
                return Future.succeededFuture(store.pinGenerations(pages));
            }
            Promise<ExactPin> held = Promise.promise();
            heldPins.add(() -> held.complete(store.pinGenerations(pages)));
            return held.future();
        }

        @Override
        public Future<Integer> unpin(List<ImageRef> pinned, boolean quarantine) {
            if (quarantine) {
                return Future.succeededFuture(store.unpinIntoQuarantine(List.of(pinned), now + QUARANTINE));
            }
            store.unpin(List.of(pinned));
            return Future.succeededFuture(pinned.size());
        }

        @Override
        public Future<SsdAcquired> acquireFromSsd(List<KeyGeneration> pages) {
            return Future.failedFuture(new IllegalStateException("no SSD tier in this test"));
        }

        @Override
        public Future<List<ImageRef>> readFromSsd(long hold) {
            return Future.failedFuture(new IllegalStateException("no SSD tier in this test"));
        }

        @Override
        public Future<Boolean> releaseSsdHold(long hold) {
            return Future.succeededFuture(false);
        }
    };

    final SimpleMeterRegistry registry = new SimpleMeterRegistry();

    PlanningHandlers planning;

    /** Admission over the real planning role (handlers called directly) and its local owners over the store. */
    DemandAdmission admission(int maxOutstanding) {
        return admission(maxOutstanding, null);
    }

    /** With {@code restore} as the owner of engine-restore plans' device copy (null: none, such demands fail closed). */
    DemandAdmission admission(int maxOutstanding, RestoreOwner restore) {
        return new DemandAdmission(settings().maxOutstanding(8, maxOutstanding).build(), registry, () -> now,
                planningPort(restore));
    }

    /** 1 MiB query and instance budgets, a 64 KiB speculative cap, the test's waiting budget and reply lifetime. */
    static AdmissionVerticle.Settings.Builder settings() {
        return AdmissionVerticle.Settings.builder().waitBudgetNanos(WAIT).replyTtlNanos(TTL).leaseBudgetBytes(1 << 20)
                .instanceBudgetBytes(1 << 20).speculativeBudgetBytes(64 << 10);
    }

    PlanningPort planningPort(RestoreOwner restore) {
        LocalOwners local = new LocalOwners(port);
        PlanExecutor executor = new PlanExecutor(Map.of(RouteTemplate.LOCAL_DRAM, local.dram()), restore,
                TransferScheduler.Settings.uniform(1 << 20, 0.25, 64), () -> now, registry, (delay, task) -> {
                    throw new AssertionError("DRAM plans move nothing and schedule no transfer");
                });
        RouteCapabilities capabilities = restore == null ? RouteCapabilities.localOnly(false)
                : RouteCapabilities.localOnly(false).withEngineRestore(Optional.empty());
        PlanningRole role = new PlanningRole(capabilities, MembershipView.NONE,
                new RouteResources(new ResourceId(ResourceKind.DRAM_POOL, "dram", 1),
                        new ResourceId(ResourceKind.SSD_STORE, "ssd", 1)), local.evidence(), EstimateSource.NONE,
                executor, () -> now, registry);
        planning = new PlanningHandlers(role, () -> Future.succeededFuture(false));
        return planning;
    }

    @AfterEach
    void release() {
        arena.close();
    }

    static StateKey key(int group, int position) {
        return StateKey.of(NS, group, new byte[] {(byte) position, 7});
    }

    void publish(int group, List<Integer> positions, boolean seal) {
        List<StateKey> keys = positions.stream().map(p -> key(group, p)).toList();
        AllocateResult result = store.allocate(1, keys, keys.stream().map(k -> PAGE).toList());
        if (seal) {
            store.seal(1, result.publishId(), List.of(), List.of());
        }
    }

    static DemandPlan plan(String request, long revision, long operation, int endPages, int recurrentEnd) {
        List<GroupPlan> groups = new ArrayList<>();
        List<PositionedKey> full = new ArrayList<>();
        List<PositionedKey> recurrent = new ArrayList<>();
        for (int p = 0; p < endPages; p++) {
            full.add(new PositionedKey(p, key(0, p)));
            if (p < recurrentEnd) {
                recurrent.add(new PositionedKey(p, key(2, p)));
            }
        }
        groups.add(new GroupPlan(0, PAGE, full));
        groups.add(new GroupPlan(2, PAGE, recurrent));
        return new DemandPlan(request, revision, operation, "", RULES, 0, (long) endPages * P, groups, 0, 0, 0, -1, false);
    }

    /** Ten attention pages, a checkpoint at 4 pages, and the 8-page checkpoint still being written. */
    void tenPagesCheckpointAtFourEightBeingWritten() {
        publish(0, range(10), true);
        publish(2, List.of(3), true);
        publish(2, List.of(7), false);
    }

    static List<Integer> range(int n) {
        List<Integer> positions = new ArrayList<>();
        for (int p = 0; p < n; p++) {
            positions.add(p);
        }
        return positions;
    }

    /** Completes held pins until none is left: planning acquires a plan's segments one after another. */
    void completeHeldPins() {
        while (!heldPins.isEmpty()) {
            heldPins.poll().run();
        }
    }

    void assertNothingHeld(DemandAdmission admission) {
        assertThat(admission.activeLeases()).as("leases").isZero();
        assertThat(admission.leasedBytes()).as("leased bytes").isZero();
        assertThat(admission.outstanding()).as("outstanding").isZero();
        assertThat(admission.budgets().isEmpty()).as("budgets charged").isTrue();
        assertThat(store.pinnedImages()).as("pinned images").isZero();
        assertThat(planning.stats()).as("planning holds nothing").isEqualTo(new PlanningCommands.PlanningStats(0, 0, 0));
    }

    @Test
    void theWaitingBudgetEndsPreparationAndSettlesOnWhatIsResident() {
        tenPagesCheckpointAtFourEightBeingWritten();
        DemandAdmission admission = admission(100);
        Outcome pending = admission.submit(1, plan("r", 0, 1, 10, 10)).await();
        assertThat(pending.status()).isEqualTo(Status.PENDING);
        assertThat(pending.detail()).isEqualTo(DemandState.CANDIDATE);
        assertThat(store.pinnedImages()).as("evidence pins nothing").isZero();

        now += WAIT - 1;
        assertThat(admission.poll(1, pending.ticket()).await().status()).isEqualTo(Status.PENDING);
        now += 1;
        Outcome settled = admission.poll(1, pending.ticket()).await();
        assertThat(settled.status()).isEqualTo(Status.READY);
        assertThat(settled.boundaryTokens()).isEqualTo(4 * P);
        assertThat(settled.leased()).extracting(AdmissionCommands.LeasedGroup::positions)
                .containsExactly(List.of(0, 1, 2, 3), List.of(3));
        admission.release(1, settled.leaseId()).await();
        assertNothingHeld(admission);
    }

    @Test
    void aDemandAskingForLessWaitIsCappedAndTheConfiguredBudgetCapsALongerOne() {
        tenPagesCheckpointAtFourEightBeingWritten();
        DemandAdmission admission = admission(100);
        DemandPlan base = plan("r", 0, 1, 10, 10);
        DemandPlan longWait = new DemandPlan("r", 0, 1, "", RULES, 0, 10 * P, base.groups(), 0, 0, 0, 10 * WAIT, false);
        Outcome pending = admission.submit(1, longWait).await();
        now += WAIT;
        Outcome settled = admission.poll(1, pending.ticket()).await();
        assertThat(settled.status()).as("capped by the configured 5 s").isEqualTo(Status.READY);
        admission.cancel(1, settled.ticket()).await();
        assertNothingHeld(admission);
    }

    @Test
    void cancelRevokesAtOnceButReleasesOnlyAfterTheSubmittedPinDrains() {
        publish(0, range(10), true);
        publish(2, List.of(3), true);
        DemandAdmission admission = admission(100);
        holdPins = true;
        Future<Outcome> submitted = admission.submit(1, plan("r", 0, 1, 10, 10));
        assertThat(submitted.isComplete()).isFalse();
        assertThat(heldPins).hasSize(1);

        Future<Integer> cancelled = admission.cancel(1, 1);
        assertThat(admission.liveTickets()).as("scheduling interest revoked at once").isZero();
        assertThat(admission.outstanding()).isZero();
        assertThat(cancelled.isComplete()).as("waits for the submitted pin").isFalse();
        OrbitException again = catchThrowableOfType(OrbitException.class, () -> admission.cancel(1, 1));
        assertThat(again.reason()).isEqualTo(ErrorReason.UNKNOWN_TICKET);

        completeHeldPins();
        assertThat(submitted.await().status()).as("a cancelled ticket never answers READY").isEqualTo(Status.PENDING);
        assertThat(cancelled.await()).as("drained pages: 4 attention + 1 checkpoint").isEqualTo(5);
        assertNothingHeld(admission);
    }

    @Test
    void aRevisionDuringAnInFlightPinDrainsTheOldPinsAndAnswersTheNewDemand() {
        publish(0, range(10), true);
        publish(2, List.of(3, 7), true);
        DemandAdmission admission = admission(100);
        holdPins = true;
        Future<Outcome> first = admission.submit(1, plan("r", 0, 1, 10, 4));
        Future<Outcome> revised = admission.submit(1, plan("r", 1, 1, 10, 10));
        assertThat(revised.isComplete()).isFalse();
        while (!first.isComplete()) {
            heldPins.poll().run(); // revision 0's segments, one after another
        }
        assertThat(first.await().status()).isEqualTo(Status.PENDING);
        assertThat(store.pinnedImages()).as("revision 0's pins drained").isZero();
        assertThat(heldPins).as("revision 1 pins now").hasSize(1);
        completeHeldPins();
        Outcome ready = revised.await();
        assertThat(ready.status()).isEqualTo(Status.READY);
        assertThat(ready.revision()).isEqualTo(1);
        assertThat(ready.boundaryTokens()).isEqualTo(8 * P);
        assertThat(admission.activeLeases()).isEqualTo(1);
        assertThat(store.pinnedImages()).isEqualTo(9);
        admission.release(1, ready.leaseId()).await();
        assertNothingHeld(admission);
    }

    @Test
    void pagesLostBetweenEvidenceAndPinningAreReplannedAndNeverAnsweredReady() {
        publish(0, range(10), true);
        publish(2, List.of(3), true);
        DemandAdmission admission = admission(100);
        losePages = true;
        Outcome outcome = admission.submit(1, plan("r", 0, 1, 10, 10)).await();
        assertThat(outcome.status()).isEqualTo(Status.PENDING);
        assertThat(outcome.detail()).isEqualTo(DemandState.CANDIDATE);
        assertThat(registry.get("orbitkv.queries.replans").counter().count()).isEqualTo(PlanningRole.MAX_PLAN_ATTEMPTS);
        assertThat(admission.budgets().isEmpty()).as("reservations refunded").isTrue();
        losePages = false;
        Outcome ready = admission.poll(1, outcome.ticket()).await();
        assertThat(ready.status()).isEqualTo(Status.READY);
        admission.release(1, ready.leaseId()).await();
        assertNothingHeld(admission);
    }

    @Test
    void answersLiveForTheirReplyLifetimeAndOutstandingQueriesAreBoundedInTotal() {
        tenPagesCheckpointAtFourEightBeingWritten();
        DemandAdmission admission = admission(1);
        Outcome miss = admission.submit(1, plan("m", 0, 9, 2, 2)).await();
        assertThat(miss.status()).isEqualTo(Status.MISS);
        Outcome pending = admission.submit(1, plan("p", 0, 1, 10, 10)).await();
        assertThat(pending.status()).isEqualTo(Status.PENDING);
        OrbitException full = catchThrowableOfType(OrbitException.class, () -> admission.submit(2, plan("q", 0, 1, 10, 10)));
        assertThat(full.reason()).isEqualTo(ErrorReason.TOO_MANY_OUTSTANDING);

        assertThat(admission.poll(1, miss.ticket()).await()).isEqualTo(miss);
        now += TTL + 1;
        OrbitException expired = catchThrowableOfType(OrbitException.class, () -> admission.poll(1, miss.ticket()));
        assertThat(expired.reason()).isEqualTo(ErrorReason.UNKNOWN_TICKET);
        // The request id is free again once its ticket is forgotten.
        assertThat(admission.releaseInstance(1).await().queries()).isEqualTo(1);
        assertNothingHeld(admission);
    }
    @Test
    void answeredTicketsAreBoundedPerInstanceAndInTotalAndOnlyLeaselessAnswersMakeRoom() {
        tenPagesCheckpointAtFourEightBeingWritten();
        DemandAdmission admission = new DemandAdmission(settings().maxOutstanding(8, 64).maxAnswered(2, 3).build(),
                registry, () -> now, planningPort(null));
        Outcome a = admission.submit(1, plan("a", 0, 1, 2, 2)).await();
        Outcome b = admission.submit(1, plan("b", 0, 2, 2, 2)).await();
        assertThat(List.of(a.status(), b.status())).containsOnly(Status.MISS);
        // A third answer of instance 1 exceeds its bound: the eldest answer (a) is forgotten early.
        admission.submit(1, plan("c", 0, 3, 2, 2)).await();
        assertThat(catchThrowableOfType(OrbitException.class, () -> admission.poll(1, a.ticket())).reason())
                .isEqualTo(ErrorReason.UNKNOWN_TICKET);
        assertThat(admission.poll(1, b.ticket()).await()).isEqualTo(b);
        Outcome x = admission.submit(2, plan("x", 0, 1, 4, 4)).await();
        assertThat(x.status()).isEqualTo(Status.READY);
        // The total bound (3): the eldest lease-less answer of any instance (b) makes room.
        Outcome y = admission.submit(2, plan("y", 0, 2, 4, 4)).await();
        assertThat(y.status()).isEqualTo(Status.READY);
        assertThat(catchThrowableOfType(OrbitException.class, () -> admission.poll(1, b.ticket())).reason())
                .isEqualTo(ErrorReason.UNKNOWN_TICKET);
        // Instance 2's answers both hold leases: nothing may be forgotten, so a new query is refused, reserving nothing.
        OrbitException refused = catchThrowableOfType(OrbitException.class, () -> admission.submit(2, plan("z", 0, 3, 4, 4)));
        assertThat(refused.reason()).isEqualTo(ErrorReason.TOO_MANY_ANSWERED);
        assertThat(admission.activeLeases()).isEqualTo(2);
        assertThat(admission.outstanding()).isZero();
        // Releasing x's lease makes its answer forgettable.
        admission.release(2, x.leaseId()).await();
        Outcome z = admission.submit(2, plan("z", 0, 3, 4, 4)).await();
        assertThat(z.status()).isEqualTo(Status.READY);
        assertThat(admission.answersEvicted()).isEqualTo(3);
        admission.release(2, y.leaseId()).await();
        admission.release(2, z.leaseId()).await();
        admission.releaseInstance(1).await();
        admission.releaseInstance(2).await();
        assertNothingHeld(admission);
    }

    @Test
    void confidenceScalesTheSpeculationADemandMayHold() {
        publish(0, range(10), true);
        publish(2, List.of(3), true);
        DemandAdmission admission = admission(100);
        DemandPlan base = plan("s", 0, 1, 10, 10);
        // 5 pages of 4 KiB = 20 KiB against a 64 KiB speculative cap: confidence 0.25 covers 16 KiB, too little.
        DemandPlan doubtful = new DemandPlan("s", 0, 1, "", RULES, 0, 10 * P, base.groups(), 0, 0, 0.25f, -1, true);
        Outcome refused = admission.submit(1, doubtful).await();
        assertThat(refused.status()).isEqualTo(Status.MISS);
        assertThat(registry.get("orbitkv.queries.speculation.refused").counter().count()).isEqualTo(1);
        assertThat(store.pinnedImages()).as("nothing pinned for it").isZero();
        // Confidence 0.5 covers 32 KiB: held RESIDENT.
        DemandPlan likely = new DemandPlan("s", 1, 1, "", RULES, 0, 10 * P, base.groups(), 0, 0, 0.5f, -1, true);
        Outcome resident = admission.submit(1, likely).await();
        assertThat(resident.status()).isEqualTo(Status.RESIDENT);
        admission.release(1, resident.leaseId()).await();
        assertNothingHeld(admission);
    }

    /**
     * A peer route with a stand-in for the peer role (its real execution runs against other Manager processes in
     * PeerDemandIT): acquire = the source lease, held until the test grants it; submit = the transfer, held until the
     * test lets the bytes land (published, sealed and pinned in the store).
     */
    @Test
    void aPeerPlanIsCandidateUntilTheSourceLeaseIsHeldThenReservedUntilItsBytesAreSealedThenReady() {
        PeerOwner source = new PeerOwner("manager-1", 7);
        Map<StateKey, ReplicaSet> peerRecords = new HashMap<>();
        List<StateKey> offered = new ArrayList<>();
        for (int p = 0; p < 4; p++) {
            offered.add(key(0, p));
        }
        offered.add(key(2, 3));
        long generation = 100;
        for (StateKey k : offered) {
            peerRecords.put(k, ReplicaSet.empty().withPeer(new ReplicaEvidence.PeerDram(source, generation, generation++,
                    ByteCount.of(PAGE), Optional.of(RepresentationFamily.RAW))));
        }
        Deque<Runnable> grants = new ArrayDeque<>();
        Deque<Runnable> transfers = new ArrayDeque<>();
        Map<Long, List<ImageRef>> pinned = new HashMap<>();
        ExecutionOwner peer = new ExecutionOwner() {
            long nextLease = 1;

            @Override
            public Future<SegmentLease> acquire(PlannedSegment segment) {
                Promise<SegmentLease> granted = Promise.promise();
                grants.add(() -> granted.complete(new SegmentLease(nextLease++, segment, List.of())));
                return granted.future();
            }

            @Override
            public Future<SegmentLease> submit(SegmentLease lease) {
                Promise<SegmentLease> landed = Promise.promise();
                transfers.add(() -> {
                    List<StateKey> keys = lease.segment().pages().stream().map(PlannedPage::key).toList();
                    AllocateResult slots = store.allocate(9, keys, keys.stream().map(k -> PAGE).toList());
                    store.seal(9, slots.publishId(), List.of(), List.of());
                    List<ImageRef> refs = store.pinExact(List.of(keys)).pinned().getFirst();
                    pinned.put(lease.leaseId(), refs);
                    landed.complete(lease.withHostPages(refs));
                });
                return landed.future();
            }

            @Override
            public Future<Boolean> release(SegmentLease lease) {
                List<ImageRef> refs = pinned.remove(lease.leaseId());
                if (refs != null) {
                    store.unpin(List.of(refs));
                }
                return Future.succeededFuture(true);
            }
        };
        LocalOwners local = new LocalOwners(port);
        Deque<Runnable> timers = new ArrayDeque<>();
        PlanExecutor executor = new PlanExecutor(Map.of(RouteTemplate.LOCAL_DRAM, local.dram(),
                RouteTemplate.HOST_FROM_PEER_DRAM, peer), null, TransferScheduler.Settings.uniform(1 << 20, 0.25, 64),
                () -> now, registry, (delay, task) -> timers.add(task));
        PlanningRole role = new PlanningRole(RouteCapabilities.localOnly(false).with(RouteTemplate.HOST_FROM_PEER_DRAM),
                source::equals, new RouteResources(new ResourceId(ResourceKind.DRAM_POOL, "dram", 1),
                        new ResourceId(ResourceKind.SSD_STORE, "ssd", 1)),
                ClusterEvidence.merged(local.evidence(), demand -> Future.succeededFuture(DemandEvidence.of(peerRecords))),
                EstimateSource.NONE, executor, () -> now, registry);
        planning = new PlanningHandlers(role, () -> Future.succeededFuture(false));
        DemandAdmission admission = new DemandAdmission(settings().maxOutstanding(8, 100).build(), registry, () -> now,
                planning);

        Outcome first = admission.submit(1, plan("r", 0, 1, 4, 4)).await();
        assertThat(first.status()).isEqualTo(Status.PENDING);
        assertThat(first.detail()).as("no source lease yet").isEqualTo(DemandState.CANDIDATE);
        assertThat(grants).hasSize(1);
        assertThat(admission.poll(1, first.ticket()).await().detail()).isEqualTo(DemandState.CANDIDATE);
        // Segments are acquired one after another (one per group): CANDIDATE until the last source lease is held.
        while (!grants.isEmpty()) {
            grants.poll().run();
            if (!grants.isEmpty()) {
                assertThat(admission.poll(1, first.ticket()).await().detail()).isEqualTo(DemandState.CANDIDATE);
            }
        }
        Outcome reserved = admission.poll(1, first.ticket()).await();
        assertThat(reserved.status()).isEqualTo(Status.PENDING);
        assertThat(reserved.detail()).as("every source lease held, no byte landed").isEqualTo(DemandState.RESERVED);
        assertThat(transfers).isNotEmpty();
        assertThat(store.pinnedImages()).as("nothing sealed here yet").isZero();
        while (!transfers.isEmpty()) {
            transfers.poll().run(); // the bytes land and are sealed: RESIDENT, boundary re-checked, READY
        }
        Outcome ready = admission.poll(1, first.ticket()).await();
        assertThat(ready.status()).isEqualTo(Status.READY);
        assertThat(ready.detail()).isEqualTo(DemandState.READY);
        assertThat(ready.boundaryTokens()).isEqualTo(4 * P);
        admission.release(1, ready.leaseId()).await();
        assertNothingHeld(admission);
    }
}
