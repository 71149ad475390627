package io.orbitkv.planning;

import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.model.cost.CostEstimate;
import io.orbitkv.model.cost.CostEstimateKey;
import io.orbitkv.model.cost.CostEstimateResult;
import io.orbitkv.model.cost.RepresentationFamily;
import io.orbitkv.model.cost.ShadowAlternative;
import io.orbitkv.model.cost.ShadowRequest;
import io.orbitkv.model.cost.SwitchGuard;
import io.orbitkv.recovery.BlockRange;
import io.orbitkv.recovery.GroupAvailability;
import io.orbitkv.recovery.GroupRanges;
import io.orbitkv.recovery.RecoveryContract;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.TreeSet;
import io.orbitkv.model.plan.BoundaryReason;
import io.orbitkv.model.plan.DemandView;
import io.orbitkv.model.plan.Plan;
import io.orbitkv.model.plan.PlanningException;
import io.orbitkv.model.plan.PlanningFailure;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.model.plan.DemandEvidence;
import io.orbitkv.model.plan.MembershipView;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.model.plan.ReplicaEvidence;
import io.orbitkv.model.plan.PlannedPage;
import io.orbitkv.model.plan.PlannedSegment;
import io.orbitkv.model.plan.TimeEstimate;
import io.orbitkv.model.plan.RouteResources;
import io.orbitkv.model.plan.RouteChoice;
import io.orbitkv.planning.PageOptions.Option;
import io.orbitkv.planning.PageOptions.Pick;

/**
 * The planning role's decision: evidence → replica sets → eligible routes → boundary → an immutable {@link Plan}.
 * Pure: no Vert.x, no I/O, no shared state; safe from any thread. Execution is {@link DemandPreparation}'s and
 * {@link PlanExecutor}'s; admission admits each plan's {@link Plan#requiredBytes()}.
 *
 * <ol>
 *   <li><b>Routes</b>, failing closed: {@link PlanningFailure#TARGET_UNAVAILABLE} without a restore executor for an
 *       engine-restore target, {@link PlanningFailure#REQUESTED_ROUTE_UNAVAILABLE} for an explicit route that cannot
 *       run here (never silently another). Allowed: the {@link RouteTemplate} default order filtered by capability
 *       and target (with an explicit route, only it and local DRAM).</li>
 *   <li><b>The local hit</b> ({@link LocalHitPlanner}): every page in local DRAM, host-ready, no prefill rate:
 *       decided in one step, the same plan as the steps below.</li>
 *   <li><b>Eligibility</b> per page ({@link PageOptions}): allowed routes with evidence of their medium; peer
 *       evidence only while its owner is a current member at that incarnation. Unknown stays unknown.</li>
 *   <li><b>Candidates</b>: per prefix of the allowed order, the longest legal boundary
 *       ({@link RecoveryContract#bestBoundary}) over the pages it reaches, or the longest below it within the byte
 *       cap; plus recomputation. At most {@value #MAX_CANDIDATES}; the default is the longest.</li>
 *   <li><b>Default routes</b>: each page its first option; a peer route keeps the previous page's owner where it can.
 *       Pages sharing route and source form a <em>batch</em>, the unit of estimation and selection.</li>
 *   <li><b>Guarded selection</b>: {@link SelectionMode#SELECT} switches a batch to an equal-coverage alternative only
 *       when all have fresh estimates of one representation and {@link SwitchGuard} passes; {@link SelectionMode#SHADOW}
 *       keeps the default and records the comparison.</li>
 *   <li><b>Boundary</b>: without a prefill rate the default; with one, {@link BoundaryChooser} picks the earliest
 *       first token from each candidate's state-ready time (its slowest batch; a DRAM lease counts zero).</li>
 *   <li><b>Plan</b>: per-group contiguous {@link PlannedSegment}s by route and source, exactly tiling
 *       {@link RecoveryContract#requiredRanges}.</li>
 * </ol>
 * Estimates come through a synchronous {@link EstimateLookup}: on the cost role's thread {@link PlanningRole} answers
 * them as asked (one pass); elsewhere it runs the decision once recording the keys asked (all unknown), fetches them,
 * and runs it again on the answers.
 */
final class Planner {

    /** Bound on boundary candidates: one per prefix of the route order, plus recomputation. */
    public static final int MAX_CANDIDATES = RouteTemplate.values().length + 1;

    /** What the cost flags allow. */
    public enum SelectionMode {
        /** Observations off: no comparisons, no estimates. */
        OFF,
        /** Observations on, selection off: the default order stands; comparisons go to shadow. */
        SHADOW,
        /** Observations and selection on: guarded switching among equal-coverage alternatives. */
        SELECT
    }

    /** Synchronous access to the estimates fetched for one planning pass. */
    @FunctionalInterface
    public interface EstimateLookup {
        CostEstimateResult estimate(CostEstimateKey key);

        /** Nothing known. */
        EstimateLookup NONE = key -> new CostEstimateResult.Unavailable(CostEstimateResult.Reason.NO_ENTRY, 0);
    }

    /** What stays the same across a Manager's plans (until capabilities or membership change). */
    public record Context(RouteCapabilities capabilities, MembershipView members, RouteResources resources,
                          SelectionMode selection) {
        public Context {
            Objects.requireNonNull(capabilities, "capabilities");
            Objects.requireNonNull(members, "members");
            Objects.requireNonNull(resources, "resources");
            Objects.requireNonNull(selection, "selection");
        }
    }

    /** A plan and the route comparisons to record in shadow (empty unless observations are on). */
    public record Result(Plan plan, List<ShadowRequest> comparisons) {
        public Result {
            Objects.requireNonNull(plan, "plan");
            comparisons = List.copyOf(comparisons);
        }
    }

    private Planner() {}

    /** Route plus source: pages sharing one are one transfer batch. */
    private record BatchKey(RouteTemplate route, Optional<PeerOwner> owner) {}

    private static final class Batch {
        BatchKey key;
        final List<Pick> picks = new ArrayList<>();
        long bytes;

        Batch(BatchKey key) {
            this.key = key;
        }
    }

    /** One candidate worked out: its picks (in required order), batches, choices and state-ready time. */
    private record Worked(long boundaryTokens, List<GroupRanges> required, List<Pick> picks, long bytes,
                          List<RouteChoice> choices, List<ShadowRequest> comparisons, TimeEstimate stateReady) {}

    /**
     * Plans one demand.
     *
     * @throws PlanningException {@link PlanningFailure#TARGET_UNAVAILABLE} or
     *                           {@link PlanningFailure#REQUESTED_ROUTE_UNAVAILABLE}: fail closed, nothing planned
     */
    public static Result plan(DemandView demand, DemandEvidence evidence, Context context, long nowNanos,
                              EstimateLookup estimates) {
        List<RouteTemplate> allowed = allowedRoutes(demand, context.capabilities());
        Plan hit = LocalHitPlanner.plan(demand, evidence, allowed);
        if (hit != null) {
            return new Result(hit, List.of());
        }
        return general(demand, evidence, context, nowNanos, estimates, allowed);
    }

    /** The general decision, without the local-hit short cut (the property tests compare the two). */
    static Result general(DemandView demand, DemandEvidence evidence, Context context, long nowNanos,
                          EstimateLookup estimates) {
        return general(demand, evidence, context, nowNanos, estimates, allowedRoutes(demand, context.capabilities()));
    }

    private static Result general(DemandView demand, DemandEvidence evidence, Context context, long nowNanos,
                                  EstimateLookup estimates, List<RouteTemplate> allowed) {
        PageOptions pages = new PageOptions(demand, evidence, allowed, context.members());
        long origin = demand.validPrefixTokens();
        long end = demand.selectedEndTokens();

        TreeSet<Long> candidates = new TreeSet<>();
        candidates.add(origin);
        long longest = origin;
        for (int prefix = 1; prefix <= allowed.size(); prefix++) {
            List<GroupAvailability> availability = pages.availability(prefix);
            OptionalLong best = RecoveryContract.bestBoundary(demand.rules(), availability, origin, end);
            if (best.isEmpty()) {
                continue;
            }
            longest = Math.max(longest, best.getAsLong());
            OptionalLong fitting = longestFitting(demand, pages, availability, best.getAsLong());
            fitting.ifPresent(candidates::add);
        }
        long defaultTokens = candidates.last();

        List<Worked> worked = new ArrayList<>();
        if (demand.prefillTokensPerSecond().isEmpty()) {
            worked.add(work(demand, pages, context, defaultTokens, estimates));
        } else {
            for (long candidate : candidates.descendingSet()) {
                worked.add(work(demand, pages, context, candidate, estimates));
            }
        }
        List<BoundaryChooser.Candidate> timed = worked.stream()
                .map(w -> new BoundaryChooser.Candidate(w.boundaryTokens(), w.stateReady())).toList();
        long admissionNanos = demand.firstUseNanos().isPresent()
                ? Math.max(0, demand.firstUseNanos().getAsLong() - nowNanos) : 0;
        BoundaryChooser.Choice choice = BoundaryChooser.choose(timed, defaultTokens, longest,
                demand.prefillTokensPerSecond(), end, admissionNanos);
        Worked chosen = worked.stream().filter(w -> w.boundaryTokens() == choice.boundaryTokens()).findFirst()
                .orElseThrow();
        return new Result(toPlan(demand, pages, chosen, choice.reason(), longest), chosen.comparisons());
    }

    /** The allowed routes in default order, after the fail-closed checks. */
    static List<RouteTemplate> allowedRoutes(DemandView demand, RouteCapabilities capabilities) {
        if (demand.target().intent() == CompletionTarget.Intent.ENGINE_RESTORE
                && capabilities.engineRestoreCause().isPresent()) {
            throw new PlanningException(PlanningFailure.TARGET_UNAVAILABLE, "engine restore is not possible here: "
                    + capabilities.engineRestoreCause().get());
        }
        Optional<RouteTemplate> requested = demand.requestedRoute();
        if (requested.isPresent()) {
            RouteTemplate route = requested.get();
            if (!route.serves(demand.target())) {
                throw new PlanningException(PlanningFailure.REQUESTED_ROUTE_UNAVAILABLE, route + " does not end "
                        + demand.target().intent());
            }
            if (!capabilities.executable(route)) {
                throw new PlanningException(PlanningFailure.REQUESTED_ROUTE_UNAVAILABLE, route + " cannot run here: "
                        + capabilities.cause(route).orElseThrow());
            }
        }
        List<RouteTemplate> allowed = new ArrayList<>();
        for (RouteTemplate route : RouteTemplate.DEFAULT_ORDER) {
            boolean requestedOnly = requested.isPresent() && route != requested.get() && route != RouteTemplate.LOCAL_DRAM;
            if (route.serves(demand.target()) && capabilities.executable(route) && !requestedOnly) {
                allowed.add(route);
            }
        }
        return allowed;
    }

    /** {@code longest} when it fits the byte cap, else the longest legal boundary below it that does. */
    private static OptionalLong longestFitting(DemandView demand, PageOptions pages, List<GroupAvailability> availability,
                                               long longest) {
        if (pages.requiredBytes(longest) <= demand.byteCapBytes()) {
            return OptionalLong.of(longest);
        }
        List<Long> legal = RecoveryContract.legalBoundaries(demand.rules(), availability, demand.validPrefixTokens(),
                longest);
        for (int i = legal.size() - 1; i >= 0; i--) {
            if (pages.requiredBytes(legal.get(i)) <= demand.byteCapBytes()) {
                return OptionalLong.of(legal.get(i));
            }
        }
        return OptionalLong.empty();
    }

    /** Picks, batches, selection and state-ready time for one candidate boundary. */
    private static Worked work(DemandView demand, PageOptions pages, Context context, long boundary,
                               EstimateLookup estimates) {
        if (boundary == demand.validPrefixTokens()) {
            return new Worked(boundary, List.of(), List.of(), 0, List.of(), List.of(), TimeEstimate.NONE);
        }
        List<GroupRanges> required = RecoveryContract.requiredRanges(demand.rules(), boundary,
                demand.validPrefixTokens());
        List<Pick> picks = new ArrayList<>();
        Map<BatchKey, Batch> batches = new LinkedHashMap<>();
        long bytes = 0;
        for (GroupRanges ranges : required) {
            int g = pages.groupIndex(ranges.groupId());
            Pick previous = null;
            for (BlockRange range : ranges.ranges()) {
                for (int p = range.startInclusive(); p < range.endExclusive(); p++) {
                    Option option = pages.defaultOption(g, p, previous);
                    Pick pick = new Pick(g, p, pages.key(g, p), option);
                    picks.add(pick);
                    Batch batch = batches.computeIfAbsent(new BatchKey(option.route(), option.owner()), Batch::new);
                    batch.picks.add(pick);
                    batch.bytes += pages.bytesPerPage(g);
                    bytes += pages.bytesPerPage(g);
                    previous = pick;
                }
            }
        }
        List<RouteChoice> choices = new ArrayList<>();
        List<ShadowRequest> comparisons = new ArrayList<>();
        boolean switched = false;
        if (context.selection() != SelectionMode.OFF) {
            for (Batch batch : List.copyOf(batches.values())) {
                switched |= select(demand, pages, context, batch, batches, estimates, choices, comparisons);
            }
        }
        TimeEstimate ready = TimeEstimate.NONE;
        for (Batch batch : batches.values()) {
            ready = ready.latest(batchTime(demand, context, batch, estimates));
        }
        if (!switched) {
            return new Worked(boundary, required, picks, bytes, choices, comparisons, ready);
        }
        // Picks were rewritten in place by selection (see select): rebuild them in required order.
        List<Pick> finalPicks = new ArrayList<>(picks.size());
        Map<Long, Pick> byPosition = new HashMap<>();
        for (Batch batch : batches.values()) {
            for (Pick pick : batch.picks) {
                byPosition.put(((long) pick.groupIndex() << 32) | pick.position(), pick);
            }
        }
        for (Pick pick : picks) {
            finalPicks.add(byPosition.get(((long) pick.groupIndex() << 32) | pick.position()));
        }
        return new Worked(boundary, required, finalPicks, bytes, choices, comparisons, ready);
    }

    /** An equal-coverage alternative for a batch: a route, an owner, and the evidence of each of its pages. */
    private record Alternative(BatchKey key, List<ReplicaEvidence> evidence) {}

    /** Compares a batch with its equal-coverage alternatives; answers whether it switched to one. */
    private static boolean select(DemandView demand, PageOptions pages, Context context, Batch batch,
                                  Map<BatchKey, Batch> batches, EstimateLookup estimates, List<RouteChoice> choices,
                                  List<ShadowRequest> comparisons) {
        if (batch.key.route() == RouteTemplate.LOCAL_DRAM) {
            return false;
        }
        List<Alternative> alternatives = alternatives(pages, batch, batches);
        if (alternatives.isEmpty()) {
            return false;
        }
        long pageCount = batch.picks.size();
        Optional<CostEstimateKey> currentKey = batch.key.route().costKey(context.resources(), batch.key.owner(),
                representation(batch.picks.stream().map(p -> p.option().evidence()).toList()), batch.bytes, pageCount,
                demand.target());
        List<Optional<CostEstimateKey>> alternativeKeys = new ArrayList<>();
        for (Alternative alternative : alternatives) {
            alternativeKeys.add(alternative.key().route().costKey(context.resources(), alternative.key().owner(),
                    representation(alternative.evidence()), batch.bytes, pageCount, demand.target()));
        }
        if (currentKey.isPresent()) {
            List<ShadowAlternative> shadow = alternativeKeys.stream().flatMap(Optional::stream)
                    .map(key -> new ShadowAlternative(key, true)).toList();
            if (!shadow.isEmpty()) {
                comparisons.add(ShadowRequest.routes(currentKey.get(), shadow));
            }
        }
        RouteChoice.Outcome outcome;
        int switchTo = -1;
        if (context.selection() == SelectionMode.SHADOW) {
            outcome = RouteChoice.Outcome.DEFAULT_SELECTION_OFF;
        } else {
            // Ask for every key first, whatever the answers: the recording pass must see each key that may matter.
            Optional<CostEstimate> current = currentKey.flatMap(key -> estimates.estimate(key).usable());
            List<Optional<CostEstimate>> fresh = new ArrayList<>();
            for (Optional<CostEstimateKey> key : alternativeKeys) {
                fresh.add(key.flatMap(k -> estimates.estimate(k).usable()));
            }
            boolean allFresh = current.isPresent() && fresh.stream().allMatch(Optional::isPresent)
                    && alternativeKeys.stream().allMatch(k -> k.isPresent()
                    && k.get().representation() == currentKey.get().representation());
            if (!allFresh) {
                outcome = RouteChoice.Outcome.DEFAULT_UNKNOWN;
            } else {
                double bestUpper = Double.POSITIVE_INFINITY;
                boolean fasterMean = false;
                for (int i = 0; i < fresh.size(); i++) {
                    CostEstimate alternative = fresh.get(i).orElseThrow();
                    fasterMean |= alternative.predictedNanos() < current.get().predictedNanos();
                    double upper = (double) alternative.predictedNanos() + alternative.errorNanos();
                    if (SwitchGuard.clearlyFaster(current.get(), alternative) && upper < bestUpper) {
                        bestUpper = upper;
                        switchTo = i;
                    }
                }
                outcome = switchTo >= 0 ? RouteChoice.Outcome.SWITCHED
                        : fasterMean ? RouteChoice.Outcome.DEFAULT_WITHIN_MARGIN : RouteChoice.Outcome.DEFAULT_FASTEST;
            }
        }
        BatchKey defaultKey = batch.key;
        if (switchTo >= 0) {
            Alternative alternative = alternatives.get(switchTo);
            batches.remove(defaultKey);
            batch.key = alternative.key();
            for (int i = 0; i < batch.picks.size(); i++) {
                Pick pick = batch.picks.get(i);
                batch.picks.set(i, new Pick(pick.groupIndex(), pick.position(), pick.key(),
                        new Option(alternative.key().route(), alternative.evidence().get(i))));
            }
            batches.put(batch.key, batch);
        }
        choices.add(new RouteChoice(defaultKey.route(), defaultKey.owner(), batch.key.route(), batch.key.owner(),
                batch.picks.size(), outcome));
        return switchTo >= 0;
    }

    /** Routes and owners covering every page of {@code batch}, other than its own and those other batches use. */
    private static List<Alternative> alternatives(PageOptions pages, Batch batch, Map<BatchKey, Batch> batches) {
        Map<BatchKey, List<ReplicaEvidence>> covering = new LinkedHashMap<>();
        boolean first = true;
        for (Pick pick : batch.picks) {
            Map<BatchKey, ReplicaEvidence> here = new LinkedHashMap<>();
            for (Option option : pages.options(pick.groupIndex(), pick.position())) {
                if (option.route() != RouteTemplate.LOCAL_DRAM) {
                    here.putIfAbsent(new BatchKey(option.route(), option.owner()), option.evidence());
                }
            }
            if (first) {
                here.forEach((key, ev) -> covering.put(key, new ArrayList<>(List.of(ev))));
                first = false;
            } else {
                covering.keySet().retainAll(here.keySet());
                covering.forEach((key, list) -> list.add(here.get(key)));
            }
            if (covering.isEmpty()) {
                return List.of();
            }
        }
        List<Alternative> alternatives = new ArrayList<>();
        covering.forEach((key, evidence) -> {
            if (!key.equals(batch.key) && !batches.containsKey(key)) {
                alternatives.add(new Alternative(key, List.copyOf(evidence)));
            }
        });
        return alternatives;
    }

    /** The batch's estimated time to the target: exactly none when it moves nothing, unknown without an estimate. */
    private static TimeEstimate batchTime(DemandView demand, Context context, Batch batch, EstimateLookup estimates) {
        if (!batch.key.route().movesPayload(demand.target())) {
            return TimeEstimate.NONE;
        }
        Optional<CostEstimateKey> key = batch.key.route().costKey(context.resources(), batch.key.owner(),
                representation(batch.picks.stream().map(p -> p.option().evidence()).toList()), batch.bytes,
                batch.picks.size(), demand.target());
        return key.flatMap(k -> estimates.estimate(k).usable()).map(TimeEstimate::of).orElse(TimeEstimate.UNKNOWN);
    }

    /** The common representation of the evidence, or empty when unknown for any or mixed. */
    private static Optional<RepresentationFamily> representation(List<ReplicaEvidence> evidence) {
        Optional<RepresentationFamily> common = evidence.getFirst().representation();
        for (ReplicaEvidence ev : evidence) {
            if (ev.representation().isEmpty() || !ev.representation().equals(common)) {
                return Optional.empty();
            }
        }
        return common;
    }

    private static Plan toPlan(DemandView demand, PageOptions pages, Worked chosen, BoundaryReason reason, long longest) {
        List<PlannedSegment> segments = new ArrayList<>();
        List<PlannedPage> run = new ArrayList<>();
        Pick runStart = null;
        for (Pick pick : chosen.picks()) {
            boolean continues = runStart != null && pick.groupIndex() == runStart.groupIndex()
                    && pick.position() == runStart.position() + run.size()
                    && pick.option().route() == runStart.option().route()
                    && pick.option().owner().equals(runStart.option().owner());
            if (!continues && runStart != null) {
                segments.add(segment(demand, pages, runStart, run));
                run = new ArrayList<>();
            }
            if (!continues) {
                runStart = pick;
            }
            run.add(new PlannedPage(pick.position(), pick.key(), pick.option().evidence()));
        }
        if (runStart != null) {
            segments.add(segment(demand, pages, runStart, run));
        }
        return new Plan(demand.validPrefixTokens(), chosen.boundaryTokens(), reason, demand.target(), chosen.required(),
                segments, chosen.bytes(), longest, chosen.stateReady(), chosen.choices());
    }

    private static PlannedSegment segment(DemandView demand, PageOptions pages, Pick start, List<PlannedPage> run) {
        return new PlannedSegment(pages.groupId(start.groupIndex()),
                new BlockRange(start.position(), start.position() + run.size()), start.option().route(), run,
                pages.bytesPerPage(start.groupIndex()) * run.size(), demand.target());
    }
}
