package io.orbitkv.planning;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.common.Ticker;
import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.model.cost.CostEstimateKey;
import io.orbitkv.model.cost.CostEstimateResult;
import io.orbitkv.model.cost.ObservationOutcome;
import io.orbitkv.model.cost.ObservationRecord;
import io.orbitkv.model.cost.ObservedBytes;
import io.orbitkv.model.cost.RepresentationFamily;
import io.orbitkv.model.cost.ShadowRequest;
import io.vertx.core.Future;
import io.orbitkv.recovery.GroupAvailability;
import io.orbitkv.recovery.GroupRule;
import io.orbitkv.recovery.RecoveryContract;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.UnaryOperator;
import io.orbitkv.model.PositionedKey;
import io.orbitkv.model.plan.BoundaryReason;
import io.orbitkv.model.plan.DemandView;
import io.orbitkv.model.plan.Plan;
import io.orbitkv.model.plan.PlanningException;
import io.orbitkv.model.plan.PlanningFailure;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.model.plan.DemandEvidence;
import io.orbitkv.model.plan.EvidenceSource;
import io.orbitkv.model.plan.MembershipView;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.model.plan.ReplicaEvidence;
import io.orbitkv.model.plan.ReplicaSet;
import io.orbitkv.model.plan.PlannedPage;
import io.orbitkv.model.plan.PlannedSegment;
import io.orbitkv.model.plan.Medium;
import io.orbitkv.model.plan.RouteResources;
import io.orbitkv.model.plan.RouteChoice;

/**
 * The planning role's decisions: discovery → estimates → {@link Planner} → plan, one plan's execution through the
 * {@link PlanExecutor}, the peers left out of plans for a while, and the counters of both. Free of the event bus (its
 * ports are plain interfaces returning futures); {@link DemandPreparation} drives it across replans.
 *
 * <p>Concurrency: confined to the planning role's event loop.
 */
public final class PlanningRole {
    public static final int MAX_PLAN_ATTEMPTS = 3;
    /**
     * How long a peer owner whose segment was refused or whose transfer failed is left out of plans: long enough for
     * the replans of the same demand (and the demands behind it) to take another peer, local SSD, or recompute, short
     * against the membership lease ttl that removes a dead peer for good.
     */
    public static final long PEER_AVOID_NANOS = TimeUnit.SECONDS.toNanos(2);
    /** Bound on avoided owners held at once (members are few; expired entries go first). */
    static final int MAX_AVOIDED_PEERS = 64;

    private static final CostEstimateResult UNKNOWN =
            new CostEstimateResult.Unavailable(CostEstimateResult.Reason.NO_ENTRY, 0);

    private final RouteCapabilities capabilities;
    private final MembershipView members;
    private final RouteResources resources;
    private final EvidenceSource evidence;
    private final EstimateSource estimates;
    private final PlanExecutor executor;
    private final Ticker ticker;
    private final Map<BoundaryReason, Counter> plans = new EnumMap<>(BoundaryReason.class);
    private final Map<PlanningFailure, Counter> replans = new EnumMap<>(PlanningFailure.class);
    private final Map<RouteChoice.Outcome, Counter> routeChoices = new EnumMap<>(RouteChoice.Outcome.class);
    private final Counter failedPlans;
    private final Counter routeSamples;
    private final Counter peersAvoided;
    private final Counter shortHits;
    /** Peer owners left out of plans until the time here (see {@link #PEER_AVOID_NANOS}). */
    private final Map<PeerOwner, Long> avoidedUntil = new HashMap<>();
    /** Membership as plans see it: current members, less the owners avoided now. */
    private final MembershipView available;

    public PlanningRole(RouteCapabilities capabilities, MembershipView members, RouteResources resources,
                        EvidenceSource evidence, EstimateSource estimates, PlanExecutor executor, Ticker ticker,
                        MeterRegistry registry) {
        this.capabilities = Objects.requireNonNull(capabilities, "capabilities");
        this.members = Objects.requireNonNull(members, "members");
        this.resources = Objects.requireNonNull(resources, "resources");
        this.evidence = Objects.requireNonNull(evidence, "evidence");
        this.estimates = Objects.requireNonNull(estimates, "estimates");
        this.executor = Objects.requireNonNull(executor, "executor");
        this.ticker = Objects.requireNonNull(ticker, "ticker");
        for (BoundaryReason reason : BoundaryReason.values()) {
            plans.put(reason, Counter.builder("orbitkv.planning.plans").tag("reason", label(reason))
                    .description("Plans made, by why their boundary was chosen").register(registry));
        }
        for (PlanningFailure failure : PlanningFailure.values()) {
            replans.put(failure, Counter.builder("orbitkv.planning.replans").tag("cause", label(failure))
                    .description("Plans made again after a preparation failed").register(registry));
        }
        failedPlans = Counter.builder("orbitkv.queries.replans")
                .description("Plans whose pages were lost between evidence and pinning").register(registry);
        available = owner -> this.members.isCurrent(owner) && !avoided(owner);
        peersAvoided = Counter.builder("orbitkv.planning.peers.avoided")
                .description("Peer owners left out of plans for a while after a refused or failed segment")
                .register(registry);
        shortHits = Counter.builder("orbitkv.planning.short.hits")
                .description("Plans all in local DRAM for host-ready, pinned in one step without the transfer queues")
                .register(registry);
        routeSamples = Counter.builder("orbitkv.planning.route.samples")
                .description("Complete-route samples reported to the cost role by executed plans").register(registry);
        for (RouteChoice.Outcome outcome : RouteChoice.Outcome.values()) {
            routeChoices.put(outcome, Counter.builder("orbitkv.planning.route.choices").tag("outcome", label(outcome))
                    .description("Route choices of transfer batches that had equal-coverage alternatives")
                    .register(registry));
        }
    }

    private static String label(Enum<?> value) {
        return value.name().toLowerCase(Locale.ROOT);
    }

    /** Discovery, estimates, plan; route comparisons go to shadow when observations are on. */
    public Future<Planner.Result> plan(DemandView demand) {
        return evidence.discover(demand).compose(found -> planOn(demand, found));
    }

    private Future<Planner.Result> planOn(DemandView demand, DemandEvidence found) {
        Planner.Context context = new Planner.Context(capabilities, available, resources, estimates.mode());
        long now = ticker.nanos();
        try {
            FirstPass first = new FirstPass(estimates, context.selection() != Planner.SelectionMode.OFF);
            Planner.Result result = Planner.plan(demand, found, context, now, first);
            Set<CostEstimateKey> asked = first.toFetch();
            if (asked.isEmpty()) {
                return Future.succeededFuture(recorded(result));
            }
            return estimates.estimates(asked).map(answers -> recorded(Planner.plan(demand, found, context, now,
                    key -> answers.getOrDefault(key, UNKNOWN))));
        } catch (RuntimeException e) {
            return Future.failedFuture(e);
        }
    }

    /**
     * The estimates of a plan's first pass. On the cost role's thread they are answered as asked, and the plan is
     * final (one pass); elsewhere each is unknown and its key is kept, so that the plan is made again on the fetched
     * answers. Nothing is set up before the plan asks (a local hit asks nothing); with selection OFF nothing is
     * asked for.
     */
    private static final class FirstPass implements Planner.EstimateLookup {
        private final EstimateSource source;
        private final boolean estimating;
        private boolean resolved;
        private Planner.EstimateLookup inPlace;
        private Set<CostEstimateKey> asked;

        FirstPass(EstimateSource source, boolean estimating) {
            this.source = source;
            this.estimating = estimating;
        }

        @Override
        public CostEstimateResult estimate(CostEstimateKey key) {
            if (!estimating) {
                return UNKNOWN;
            }
            if (!resolved) {
                resolved = true;
                inPlace = source.inPlace();
            }
            if (inPlace != null) {
                return inPlace.estimate(key);
            }
            if (asked == null) {
                asked = new LinkedHashSet<>();
            }
            asked.add(key);
            return UNKNOWN;
        }

        /** The keys to fetch for a second pass: none when answered in place or nothing was asked. */
        Set<CostEstimateKey> toFetch() {
            return asked == null ? Set.of() : asked;
        }
    }

    private Planner.Result recorded(Planner.Result result) {
        plans.get(result.plan().reason()).increment();
        for (RouteChoice choice : result.plan().choices()) {
            routeChoices.get(choice.outcome()).increment();
        }
        for (ShadowRequest comparison : result.comparisons()) {
            estimates.recordShadow(comparison);
        }
        return result;
    }

    /**
     * A plan, and whether waiting could do better: {@code waitingFor} is a legal boundary longer than
     * any the evidence allows now, reachable once pages being written (a publish in progress, a read back) are
     * sealed; empty when none. The plan holds nothing.
     */
    public record Planned(Planner.Result result, OptionalLong waitingFor) {
        public Plan plan() {
            return result.plan();
        }
    }

    /**
     * Discovery ({@code filter} drops records found stale before), a plan, and the boundary waiting for writes in
     * progress could reach (see {@link Planned}).
     */
    Future<Planned> planWithWrites(DemandView demand, UnaryOperator<DemandEvidence> filter) {
        return evidence.discover(demand).map(filter).compose(found -> planOn(demand, found)
                .map(result -> new Planned(result, laterWithWrites(demand, found, result.plan()))));
    }

    private OptionalLong laterWithWrites(DemandView demand, DemandEvidence found, Plan plan) {
        if (found.writingKeys().isEmpty()) {
            return OptionalLong.empty(); // nothing being written: no later boundary to wait for
        }
        List<GroupAvailability> reachable = new ArrayList<>();
        boolean anyWriting = false;
        for (GroupRule rule : demand.rules().groups()) {
            BitSet bits = new BitSet();
            DemandView.GroupKeys group = demand.group(rule.groupId());
            if (group != null) {
                for (PositionedKey pk : group.keys()) {
                    boolean writing = found.writing(pk.key());
                    anyWriting |= writing;
                    if (writing || eligible(found.replicas(pk.key()))) {
                        bits.set(pk.position());
                    }
                }
            }
            reachable.add(GroupAvailability.of(rule.groupId(), bits));
        }
        if (!anyWriting) {
            return OptionalLong.empty();
        }
        OptionalLong later = RecoveryContract.bestBoundary(demand.rules(), reachable, demand.validPrefixTokens(),
                demand.selectedEndTokens());
        return later.isPresent() && later.getAsLong() > plan.longestLegalTokens() ? later : OptionalLong.empty();
    }

    /** Whether a replica set has a record some allowed route could use (local media, or a current peer). */
    private boolean eligible(ReplicaSet replicas) {
        if (replicas.localDram().isPresent()) {
            return true;
        }
        if (replicas.localSsd().isPresent() && capabilities.executable(RouteTemplate.HOST_FROM_LOCAL_SSD)) {
            return true;
        }
        for (ReplicaEvidence peer : replicas.peers()) {
            RouteTemplate route = peer.medium() == Medium.PEER_DRAM ? RouteTemplate.HOST_FROM_PEER_DRAM
                    : RouteTemplate.HOST_FROM_PEER_SSD;
            if (capabilities.executable(route) && peer.peerOwner().map(available::isCurrent).orElse(false)) {
                return true;
            }
        }
        return false;
    }

    /**
     * Executes one plan as it is (no replan here: {@link DemandPreparation} plans again, so admission admits the
     * bytes of every plan). Speculative demands are scheduled by their deadline.
     */
    public PlanExecutor.Preparation execute(DemandView demand, Plan plan, boolean dramTight) {
        long startNanos = ticker.nanos();
        PlanExecutor.Preparation preparation = executor.prepare(plan, schedule(demand, plan, dramTight),
                demand.waitDeadlineNanos().orElse(Long.MAX_VALUE));
        preparation.result().onSuccess(prepared -> observe(plan, ticker.nanos() - startNanos))
                .onFailure(this::avoidFailedPeer);
        return preparation;
    }

    /**
     * The short hit path: a plan all in local DRAM for host-ready moves nothing, so it is pinned at once
     * ({@link PlanExecutor#pinHit}): no transfer queue, no schedule, no complete-route sample (there is no payload
     * batch to time). Exact-generation pins, the caller's legality re-check and release are those of any plan.
     */
    PlanExecutor.Pinning pinHit(Plan plan) {
        shortHits.increment();
        return executor.pinHit(plan);
    }

    /**
     * A peer segment refused before payload (unreachable, no credit, not a member) or whose transfer failed (fenced by
     * now) leaves its owner out of plans for {@link #PEER_AVOID_NANOS}, so the replan takes another peer, local SSD or
     * recomputation instead of asking the same source again. Stale evidence is not the owner's fault: its record alone
     * is dropped by the next discovery.
     */
    private void avoidFailedPeer(Throwable failure) {
        PlanningFailure cause = PlanningException.failureOf(failure);
        if (cause != PlanningFailure.SOURCE_REJECTED && cause != PlanningFailure.TRANSFER_FAILED) {
            return;
        }
        Optional<PeerOwner> owner = ((PlanningException) failure).page().flatMap(p -> p.evidence().peerOwner());
        if (owner.isEmpty()) {
            return;
        }
        long now = ticker.nanos();
        if (avoidedUntil.size() >= MAX_AVOIDED_PEERS) {
            avoidedUntil.values().removeIf(until -> until - now <= 0);
            if (avoidedUntil.size() >= MAX_AVOIDED_PEERS) {
                return; // bounded: without room the owner is simply planned again
            }
        }
        avoidedUntil.put(owner.get(), now + PEER_AVOID_NANOS);
        peersAvoided.increment();
    }

    private boolean avoided(PeerOwner owner) {
        Long until = avoidedUntil.get(owner);
        if (until == null) {
            return false;
        }
        if (until - ticker.nanos() <= 0) {
            avoidedUntil.remove(owner);
            return false;
        }
        return true;
    }

    /**
     * Reports the complete-route time of each payload-moving batch of an executed plan (pages sharing route and
     * source: the unit the planner estimates) under the same key the planner asks for, measured from the start of the
     * execution to the whole plan reaching its target (its batches run in parallel, so that is each batch's finish as
     * far as the plan is concerned, queueing included). Successful executions only.
     */
    private void observe(Plan plan, long elapsedNanos) {
        if (estimates.mode() == Planner.SelectionMode.OFF
                || plan.target().intent() != CompletionTarget.Intent.HOST_READY) {
            // An engine-restore plan is complete only after its device copy: the restore role reports that route.
            return;
        }
        Map<List<Object>, List<PlannedSegment>> batches = new LinkedHashMap<>();
        for (PlannedSegment segment : plan.segments()) {
            // A peer route's complete-route sample (same key) is the peer role's own (reserve to READY): not twice.
            if (segment.movesPayload() && !segment.route().medium().isPeer()) {
                batches.computeIfAbsent(List.of(segment.route(), segment.owner()), k -> new ArrayList<>()).add(segment);
            }
        }
        for (List<PlannedSegment> batch : batches.values()) {
            long bytes = 0;
            long pages = 0;
            Optional<RepresentationFamily> representation =
                    batch.getFirst().pages().getFirst().evidence().representation();
            for (PlannedSegment segment : batch) {
                bytes += segment.bytes();
                pages += segment.pages().size();
                for (PlannedPage page : segment.pages()) {
                    if (!page.evidence().representation().equals(representation)) {
                        representation = Optional.empty();
                    }
                }
            }
            PlannedSegment first = batch.getFirst();
            long batchBytes = bytes;
            first.route().costKey(resources, first.owner(), representation, bytes, pages, plan.target())
                    .ifPresent(key -> reportSample(ObservationRecord.of(key,
                            ObservationOutcome.SUCCEEDED, elapsedNanos,
                            ObservedBytes.logicalOnly(batchBytes))));
        }
    }

    private void reportSample(ObservationRecord record) {
        routeSamples.increment();
        estimates.report(record);
    }

    /**
     * Counts a plan that failed before payload or whose transfer failed ({@code orbitkv.queries.replans}), and the
     * replan it causes when {@code replanning}.
     */
    void planFailed(PlanningFailure cause, boolean replanning) {
        failedPlans.increment();
        if (replanning) {
            replans.get(cause).increment();
        }
    }

    long nanos() {
        return ticker.nanos();
    }

    private PlanExecutor.Schedule schedule(DemandView demand, Plan plan, boolean dramTight) {
        long now = ticker.nanos();
        if (demand.speculative()) {
            PrefetchPolicy.Start start = PrefetchPolicy.speculativeStart(now, demand.firstUseNanos(),
                    plan.stateReady(), dramTight);
            return new PlanExecutor.Schedule(TransferScheduler.TransferClass.SPECULATIVE, start.latestStartNanos(),
                    start.startAtNanos(), demand.priority());
        }
        return new PlanExecutor.Schedule(TransferScheduler.TransferClass.DEMAND,
                PrefetchPolicy.demandLatestStartNanos(now, demand.firstUseNanos(), plan.stateReady()),
                Long.MIN_VALUE, demand.priority());
    }

    /** A real demand took over a speculative preparation: its transfers are demand reads due now from here on. */
    public void promote(PlanExecutor.Preparation preparation) {
        preparation.promote(PlanExecutor.Schedule.demandNow(ticker.nanos()));
    }

    public PlanExecutor executor() {
        return executor;
    }
}
