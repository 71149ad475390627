package io.orbitkv.admission;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.admission.AdmissionCommands.DemandPlan;
import io.orbitkv.admission.AdmissionCommands.DemandState;
import io.orbitkv.admission.AdmissionCommands.GroupPlan;
import io.orbitkv.admission.AdmissionCommands.LeasedGroup;
import io.orbitkv.admission.AdmissionCommands.Outcome;
import io.orbitkv.admission.AdmissionCommands.Status;
import io.orbitkv.common.OrbitException;
import io.orbitkv.common.Ticker;
import io.orbitkv.cost.CompletionTarget;
import io.orbitkv.cost.CostEstimateKey;
import io.orbitkv.cost.CostPath;
import io.orbitkv.cost.CostProxy;
import io.orbitkv.cost.ObservationOutcome;
import io.orbitkv.cost.ObservationRecord;
import io.orbitkv.cost.ObservedBytes;
import io.orbitkv.cost.RepresentationFamily;
import io.orbitkv.cost.ResourceId;
import io.orbitkv.cost.SizeBucket;
import io.orbitkv.planning.BoundaryReason;
import io.orbitkv.planning.DemandView;
import io.orbitkv.planning.EngineDestination;
import io.orbitkv.planning.Plan;
import io.orbitkv.planning.PlannedPage;
import io.orbitkv.planning.PlannedSegment;
import io.orbitkv.planning.PlanningCommands;
import io.orbitkv.planning.PlanningException;
import io.orbitkv.planning.PlanningFailure;
import io.orbitkv.planning.PlanningPort;
import io.orbitkv.planning.PrefetchPolicy;
import io.orbitkv.planning.SegmentLease;
import io.orbitkv.protocol.engine.ErrorReason;
import io.orbitkv.recovery.GroupAvailability;
import io.orbitkv.recovery.GroupRanges;
import io.orbitkv.recovery.RecoveryContract;
import io.orbitkv.recovery.RecoveryException;
import io.orbitkv.restore.RestoreCommands.Restored;
import io.orbitkv.storage.ImageStore;
import io.orbitkv.storage.StateKey;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.OptionalDouble;
import java.util.OptionalLong;
import java.util.concurrent.TimeUnit;

/**
 * Demand admission: query tickets and their revisions, waiting budgets, byte budgets, and the leases handed to engines.
 * {@link AdmissionVerticle} wires it to the event bus; tests drive it directly with the planning role's handlers.
 * Admission owns tickets, revisions, waiting budgets, byte budgets, tenant shares and the engines' leases; the
 * planning role owns evidence, routes, boundaries, plans and their execution (see {@link io.orbitkv.planning.Planner}).
 *
 * <h2>Evaluation</h2>
 * A ticket is evaluated on submit and on every poll while it has no answer: (1) planning discovers the replicas of the
 * positions the demand allows (pins nothing: evidence, state CANDIDATE) and answers an immutable plan: the chosen legal
 * boundary and why, exactly the required ranges, and per segment its route and the evidence it relies on; (2) if pages
 * being written would allow a later boundary and waiting budget is left, answer PENDING; a recompute plan is a MISS;
 * (3) check and charge the plan's bytes against the budgets; (4) planning executes the plan: the execution owners
 * acquire and revalidate exactly what it names (DRAM: exact-generation pins; SSD: slots and exact-generation extent
 * leases, then read + seal + pin in one step), all or nothing. A plan that moves payload answers PENDING (RESERVED) at
 * once and its terminal answer becomes the ticket's; a plan with a peer segment answers PENDING (CANDIDATE) until
 * planning says every segment's lease is held (the source Manager granted), PENDING (RESERVED) from then on. Stale evidence or a rejection before any payload moved, or a
 * submitted transfer that failed (fenced by then), re-plans from fresh evidence (at most {@value #MAX_PLAN_ATTEMPTS}
 * plans, then PENDING); (5) re-check the boundary is legal on what was acquired, and only then answer READY (RESIDENT
 * for speculative warming). Evidence alone never answers READY. An explicitly requested route that cannot run here
 * fails closed (ROUTE_UNAVAILABLE), reserving nothing. A demand with an engine-restore destination is planned with
 * the completion target engine-restore; once host-ready under its lease, planning runs the plan's last step, the
 * device copy (the restore role is its owner), and the ticket answers READY when every copy is terminal.
 *
 * <h2>Lifecycle and ownership</h2>
 * One live ticket per (instance, request id) and per (instance, operation id). A resubmission with a higher revision
 * replaces the demand (a changed boundary or another group's ranges is a new demand even when the selected group's
 * hashes are equal), ends any lease of the old revision and re-evaluates; a lower revision is REVISION_BACKWARDS; an
 * equal revision with the identical demand gets the same answer, with another demand DUPLICATE_OPERATION (as does an
 * operation id held by another request). An evaluation in flight captures the ticket's generation; if the ticket is
 * revised or cancelled meanwhile, it drains (its pins are released when they arrive) instead of answering.
 * Cancel revokes scheduling interest at once (the ticket leaves every table, queued transfers of its execution are
 * dropped), waits for in-flight work to drain, then releases the ticket's lease. A lease ends exactly once: by release,
 * cancel, revision, or the end of its session.
 *
 * <h2>Take-over of a hint</h2>
 * A revision that turns a speculative hint into the real demand ({@link #takesOver} states the rule) does not end the
 * hint's preparation: the hint's lease ends (leaving the lease table and the speculative budget) and its prepared plan
 * is handed to the revision's evaluation, which answers READY on it under a new lease charged to the demand's budgets,
 * without planning, pinning or reading again. A hint still executing is joined: planning promotes its transfers to
 * demand reads, and when it completes (stale by then) its prepared plan is handed over instead of released. Whoever
 * holds a hand-over holds planning's execution: the evaluation that takes it over (or releases it when the rule no
 * longer holds or the budgets refuse), else cancel, session end or stop, which release it after draining.
 *
 * <h2>Budgets and bounds</h2>
 * Waiting: a PENDING ticket waits at most its budget (the demand's max wait, capped by the configured one, default
 * 5 s) from its latest revision, then settles on what is resident (a shorter legal boundary or MISS) so the engine
 * recomputes; the budget never interrupts pins already requested. Bytes: see {@link QueryBudgets}. Outstanding
 * (PENDING) tickets are bounded per instance and in total; an answer lives {@code replyTtlNanos} (while its lease
 * lives, longer), then the ticket is forgotten and polls get UNKNOWN_TICKET. Answered tickets are bounded per instance
 * and in total too ({@link AnsweredTickets}: the eldest lease-less answer makes room, else TOO_MANY_ANSWERED).
 *
 * <p>Confined to one event loop; futures from the {@link PlanningPort} must complete on it.
 */
final class DemandAdmission {
    static final int MAX_PLAN_ATTEMPTS = 3;
    static final long RETRY_AFTER_MICROS = 1000;

    private record RequestKey(long instance, String requestId) {}

    private record OperationKey(long instance, long operationId) {}

    private static final class Ticket {
        final long id;
        final long instance;
        DemandPlan plan;
        long revisedNanos;
        int generation;
        boolean cancelled;
        boolean outstanding;
        Outcome answer;
        long answerExpiresNanos;
        DemandState lastDetail = DemandState.MISS;
        Future<Void> inFlight;
        Lease lease;
        int drainedPages;
        /** A Manager-executed restore of this ticket's lease is running (the evaluation in flight waits for it). */
        boolean restoring;
        /** The prepared plan whose device copy is running (valid while {@code restoring}). */
        long restoringExecution;
        /** Completes when the running restore is terminal and its outcome recorded; null when none. */
        Future<Void> restoreDone;
        /** A restore that failed: the next poll answers it (and forgets the ticket). */
        Throwable restoreFailure;
        /** The execution this ticket's evaluation has in flight (0: none), the revision it serves, and its plan. */
        long executing;
        DemandPlan executingFor;
        Plan executingPlan;
        /** A real demand joined the in-flight hint execution {@code joining}: it is handed over, not released. */
        long joining;
        /** What a hint prepared, waiting for this ticket's next evaluation to take it over (released if not). */
        Handover handover;

        Ticket(long id, long instance, DemandPlan plan, long now) {
            this.id = id;
            this.instance = instance;
            this.plan = plan;
            this.revisedNanos = now;
        }
    }

    /** An engine's lease: the prepared plan planning holds under {@code execution}, and what it charged. */
    private record Lease(long id, long instance, Ticket ticket, String tenant, boolean speculative, long execution,
                         long bytes, int pages, Plan plan, List<LeasedGroup> leased) {}

    /** Where a take-over found what the hint prepared (metric label). */
    enum TakeOver { RESIDENT, IN_FLIGHT }

    /**
     * What a speculative hint prepared, no longer under any lease, on its way to the real demand that takes it over:
     * planning still holds it under {@code execution}; charged to no budget meanwhile.
     */
    private record Handover(long execution, DemandPlan hint, Plan plan, List<LeasedGroup> leased, long bytes,
                            int pages, TakeOver from) {}

    private final AdmissionVerticle.Settings settings;
    private final Ticker ticker;
    private final PlanningPort planning;
    private final QueryBudgets budgets;
    private final Map<Long, Ticket> tickets = new HashMap<>();
    private final Map<RequestKey, Ticket> byRequest = new HashMap<>();
    private final Map<OperationKey, Ticket> byOperation = new HashMap<>();
    private final Map<Long, Lease> leases = new HashMap<>();
    private final Map<Long, Integer> outstandingByInstance = new HashMap<>();
    private final AnsweredTickets<Ticket> answered;
    private final Map<Status, Counter> queriesByOutcome = new EnumMap<>(Status.class);
    private final Counter restoredBytes;
    private final Counter replans;
    private final Counter speculationRefused;
    private final Map<TakeOver, Counter> takeOvers = new EnumMap<>(TakeOver.class);
    private final CostProxy cost;
    private final ResourceId dramPool;
    private final Map<Long, CostEstimateKey> hostReadyKeys = new HashMap<>();
    private long outstanding;
    private long leasedBytes;
    private long nextTicket = 1;
    private long nextLease = 1;
    private long nextExecution = 1;

    DemandAdmission(AdmissionVerticle.Settings settings, MeterRegistry registry, Ticker ticker, PlanningPort planning) {
        this(settings, registry, ticker, planning, null, null);
    }

    /**
     * @param cost     where complete-route samples go (HOST_READY_ROUTE: revision → READY); null = not observed
     * @param dramPool the resource identity of this Manager's DRAM pool (with its incarnation)
     */
    DemandAdmission(AdmissionVerticle.Settings settings, MeterRegistry registry, Ticker ticker, PlanningPort planning,
                    CostProxy cost, ResourceId dramPool) {
        this.cost = cost;
        this.dramPool = dramPool;
        this.settings = settings;
        this.ticker = ticker;
        this.planning = planning;
        this.budgets = new QueryBudgets(settings.leaseBudgetBytes(), settings.instanceBudgetBytes(),
                settings.speculativeBudgetBytes(), settings.tenantShares());
        for (Status status : Status.values()) {
            queriesByOutcome.put(status, Counter.builder("orbitkv.queries").tag("outcome", status.name().toLowerCase())
                    .description("Query answers by outcome").register(registry));
        }
        restoredBytes = Counter.builder("orbitkv.restored.bytes").baseUnit("bytes")
                .description("Bytes handed to engines under READY leases").register(registry);
        answered = new AnsweredTickets<>(settings.maxAnsweredPerInstance(), settings.maxAnswered(),
                t -> t.lease == null, this::forget);
        speculationRefused = Counter.builder("orbitkv.queries.speculation.refused")
                .description("Speculative demands answered MISS because their confidence did not cover their bytes")
                .register(registry);
        for (TakeOver from : TakeOver.values()) {
            takeOvers.put(from, Counter.builder("orbitkv.queries.takeovers").tag("from", from.name().toLowerCase())
                    .description("Real demands answered with what their speculative hint prepared, without planning"
                            + " or reading again").register(registry));
        }
        replans = Counter.builder("orbitkv.queries.replans")
                .description("Plans whose pages were lost between evidence and pinning").register(registry);
    }

    // ---- commands ----

    Future<Outcome> submit(long instance, DemandPlan plan) {
        sweep();
        if (plan.requestId() != null) {
            Ticket existing = byRequest.get(new RequestKey(instance, plan.requestId()));
            if (existing != null) {
                return resubmit(existing, plan);
            }
            Ticket holder = byOperation.get(new OperationKey(instance, plan.operationId()));
            if (holder != null) {
                throw new OrbitException(ErrorReason.DUPLICATE_OPERATION, "operation " + Long.toUnsignedString(plan.operationId())
                        + " is held by another live request of this instance");
            }
        }
        requireOutstandingRoom(instance);
        budgets.requireHeadroom(instance, plan.tenant(), plan.speculative());
        answered.requireRoom(instance);
        Ticket ticket = new Ticket(nextTicket++, instance, plan, ticker.nanos());
        tickets.put(ticket.id, ticket);
        if (plan.requestId() != null) {
            byRequest.put(new RequestKey(instance, plan.requestId()), ticket);
            byOperation.put(new OperationKey(instance, plan.operationId()), ticket);
        }
        markOutstanding(ticket, true);
        return evaluate(ticket);
    }

    private Future<Outcome> resubmit(Ticket ticket, DemandPlan plan) {
        int order = Long.compareUnsigned(plan.revision(), ticket.plan.revision());
        if (order < 0) {
            throw new OrbitException(ErrorReason.REVISION_BACKWARDS, "revision " + Long.toUnsignedString(plan.revision())
                    + " of request '" + plan.requestId() + "' is older than its live revision "
                    + Long.toUnsignedString(ticket.plan.revision()));
        }
        if (order == 0) {
            if (!plan.equals(ticket.plan)) {
                throw new OrbitException(ErrorReason.DUPLICATE_OPERATION, "revision " + Long.toUnsignedString(plan.revision())
                        + " of request '" + plan.requestId() + "' was already claimed by another demand; raise the revision to change it");
            }
            return poll(ticket.instance, ticket.id);
        }
        if (plan.operationId() != ticket.plan.operationId()) {
            throw new OrbitException(ErrorReason.DUPLICATE_OPERATION, "request '" + plan.requestId()
                    + "' is operation " + Long.toUnsignedString(ticket.plan.operationId()) + "; a revision keeps its operation id");
        }
        if (!ticket.outstanding) {
            requireOutstandingRoom(ticket.instance);
        }
        budgets.requireHeadroom(ticket.instance, plan.tenant(), plan.speculative());
        DemandPlan previous = ticket.plan;
        ticket.plan = plan;
        ticket.generation++;
        ticket.revisedNanos = ticker.nanos();
        ticket.answer = null;
        answered.remove(ticket.instance, ticket);
        ticket.lastDetail = DemandState.MISS;
        markOutstanding(ticket, true);
        // A restore copying from the old lease drains first: its sources are released only once nothing reads them.
        Lease old = ticket.lease;
        cancelRestore(ticket);
        Future<Integer> released;
        if (old != null && !ticket.restoring && old.speculative() && takesOver(previous, plan, old.plan())) {
            // The hint's lease ends here; what it pinned waits for this revision's evaluation (below) to take it over.
            handOver(old, previous);
            released = Future.succeededFuture(0);
        } else {
            if (ticket.executing != 0 && takesOver(ticket.executingFor, plan, ticket.executingPlan)) {
                // Join the hint still being prepared: its result is handed over when it completes, and from now on its
                // transfers are demand reads (queued ones stop waiting for their start and can no longer be dropped).
                ticket.joining = ticket.executing;
                planning.promote(ticket.executing);
            } else {
                revokeExecution(ticket);
            }
            released = old == null ? Future.succeededFuture(0)
                    : ticket.restoring ? drained(ticket).compose(v -> endLease(old)) : endLease(old);
        }
        return released.compose(n -> drained(ticket)).compose(v -> {
            if (ticket.cancelled) {
                return Future.succeededFuture(pending(ticket));
            }
            return ticket.answer != null ? Future.succeededFuture(ticket.answer) : evaluate(ticket);
        });
    }

    Future<Outcome> poll(long instance, long ticketId) {
        Ticket ticket = ownedTicket(instance, ticketId);
        if (ticket.restoreFailure != null) {
            forget(ticket);
            return Future.failedFuture(ticket.restoreFailure);
        }
        if (ticket.answer != null) {
            return Future.succeededFuture(ticket.answer);
        }
        if (ticket.inFlight != null) {
            return Future.succeededFuture(pending(ticket));
        }
        return evaluate(ticket);
    }

    /** Revokes interest now; completes after in-flight work drained and the lease (if any) is released. */
    Future<Integer> cancel(long instance, long ticketId) {
        Ticket ticket = ownedTicket(instance, ticketId);
        forget(ticket);
        if (ticket.answer == null) {
            observeHostReady(ticket, ObservationOutcome.CANCELLED, -1, -1);
        }
        ticket.cancelled = true;
        ticket.generation++;
        cancelRestore(ticket);
        revokeExecution(ticket);
        return drained(ticket).compose(v -> dropHandover(ticket, false))
                .compose(dropped -> (ticket.lease != null ? endLease(ticket.lease) : Future.succeededFuture(0))
                        .map(n -> n + dropped + ticket.drainedPages));
    }

    Future<Integer> release(long instance, long leaseId) {
        Lease lease = leases.get(leaseId);
        if (lease == null || lease.instance() != instance) {
            throw new OrbitException(ErrorReason.UNKNOWN_LEASE, "no lease " + leaseId
                    + " held by this instance (never granted or already released)");
        }
        return endLease(lease);
    }

    /**
     * The instance's session ended (lapse, unregister, resume): its leases end with their slots quarantined (the
     * engine may still be copying), its tickets are forgotten and their in-flight work drained. Answers the ids of
     * the leases it ended, so the engine role can tell a late release that the lease did not stay valid.
     */
    Future<AdmissionCommands.InstanceReleased> releaseInstance(long instance) {
        List<Future<?>> waits = new ArrayList<>();
        List<Long> ended = new ArrayList<>();
        List<Future<?>> restores = new ArrayList<>();
        for (Ticket ticket : tickets.values()) {
            if (ticket.instance == instance && ticket.restoring) {
                // Copies from these leases drain before the leases end (stale first, so the restore's completion
                // leaves the lease to this release).
                ticket.cancelled = true;
                ticket.generation++;
                cancelRestore(ticket);
                restores.add(drained(ticket));
            }
        }
        for (Lease lease : List.copyOf(leases.values())) {
            if (lease.instance() == instance) {
                ended.add(lease.id());
                waits.add(lease.ticket().restoring
                        ? drained(lease.ticket()).compose(v -> endLease(lease, true)) : endLease(lease, true));
            }
        }
        int queries = 0;
        for (Ticket ticket : List.copyOf(tickets.values())) {
            if (ticket.instance == instance) {
                if (ticket.outstanding) {
                    queries++;
                }
                forget(ticket);
                ticket.cancelled = true;
                ticket.generation++;
                revokeExecution(ticket);
                waits.add(drained(ticket).compose(v -> dropHandover(ticket, true)));
            }
        }
        int cancelled = queries;
        return Future.join(waits).transform(ar -> Future.succeededFuture(
                new AdmissionCommands.InstanceReleased(ended.size(), cancelled, List.copyOf(ended))));
    }

    /**
     * Ordered stop: every ticket is cancelled (it leaves every table, its in-flight work drains) and every lease
     * ends with its prepared plan released, before the planning and storage roles beneath are stopped. Completes when all of it drained.
     */
    Future<Void> shutdown() {
        List<Future<?>> waits = new ArrayList<>();
        for (Ticket ticket : List.copyOf(tickets.values())) {
            forget(ticket);
            ticket.cancelled = true;
            ticket.generation++;
            cancelRestore(ticket);
            revokeExecution(ticket);
            waits.add(drained(ticket).compose(v -> dropHandover(ticket, false)));
        }
        for (Lease lease : List.copyOf(leases.values())) {
            // A lease a restore still copies from ends once its copies drained.
            waits.add(lease.ticket().restoring ? drained(lease.ticket()).compose(v -> endLease(lease)) : endLease(lease));
        }
        return Future.join(waits).transform(ar -> Future.succeededFuture());
    }

    AdmissionCommands.AdmissionStats stats(long instance) {
        long mine = leases.values().stream().filter(l -> l.instance() == instance).count();
        return new AdmissionCommands.AdmissionStats(leases.size(), leasedBytes, outstanding, mine,
                outstandingByInstance.getOrDefault(instance, 0));
    }

    /** An answered ticket and when its answer may expire; queued in (nearly) expiry order, checked when popped. */
    private record Expiry(Ticket ticket, long atNanos) {}

    /** Answer lifetimes are one constant from a monotonic clock, so this queue is in expiry order (see sweep). */
    private final ArrayDeque<Expiry> expiries = new ArrayDeque<>();

    private void scheduleExpiry(Ticket ticket) {
        expiries.addLast(new Expiry(ticket, ticket.answerExpiresNanos));
    }

    /**
     * Forgets answered tickets whose reply lifetime ended and that hold no lease: O(expired), so it can run on every
     * submit. A ticket still leasing is skipped here and queued again when its lease ends.
     */
    void sweep() {
        long now = ticker.nanos();
        while (!expiries.isEmpty() && now - expiries.peekFirst().atNanos() > 0) {
            Ticket ticket = expiries.pollFirst().ticket();
            if (ticket.answer != null && ticket.lease == null && now - ticket.answerExpiresNanos > 0) {
                forget(ticket);
            }
        }
    }

    int activeLeases() {
        return leases.size();
    }

    long leasedBytes() {
        return leasedBytes;
    }

    long outstanding() {
        return outstanding;
    }

    /** Answered tickets forgotten early to keep the answered bound (orbitkv.queries.answers.evicted). */
    long answersEvicted() {
        return answered.evicted();
    }

    int liveTickets() {
        return tickets.size();
    }

    QueryBudgets budgets() {
        return budgets;
    }

    // ---- evaluation ----

    private Future<Outcome> evaluate(Ticket ticket) {
        if (ticket.inFlight != null) {
            return Future.succeededFuture(pending(ticket));
        }
        Promise<Void> done = Promise.promise();
        ticket.inFlight = done.future();
        int generation = ticket.generation;
        // The engine's answer: the terminal outcome, or PENDING as soon as payload started moving (then the terminal
        // outcome becomes the ticket's answer, for the next poll).
        Promise<Outcome> reply = Promise.promise();
        Future<Outcome> result;
        try {
            Handover handover = ticket.handover;
            ticket.handover = null;
            result = handover != null ? takeOver(ticket, generation, handover, reply)
                    : attempt(ticket, generation, MAX_PLAN_ATTEMPTS, reply);
        } catch (RuntimeException e) {
            result = Future.failedFuture(e);
        }
        result.onComplete(ar -> {
            Future<Void> restoring = ticket.restoreDone;
            if (restoring == null) {
                ticket.inFlight = null;
                done.complete();
            } else {
                // The evaluation answered (PENDING) but stays in flight until its restore's copies are terminal.
                restoring.onComplete(v -> {
                    ticket.restoreDone = null;
                    ticket.inFlight = null;
                    done.complete();
                });
            }
            if (ar.failed()) {
                if (ticket.generation == generation) {
                    forget(ticket);
                }
                reply.tryFail(typed(ar.cause()));
            } else {
                reply.tryComplete(ar.result());
            }
        });
        return reply.future();
    }

    /**
     * One plan: ask planning (evidence → plan, holding nothing), then wait, miss, or charge the plan's bytes and have
     * it executed. A plan that failed before any payload moved (stale evidence, a rejected source), or whose submitted
     * transfer failed (fenced by then: planning completes only after it is terminal), is planned again from fresh
     * evidence, at most {@value #MAX_PLAN_ATTEMPTS} times in all; then the ticket stays PENDING (CANDIDATE).
     */
    private Future<Outcome> attempt(Ticket ticket, int generation, int attemptsLeft, Promise<Outcome> reply) {
        DemandPlan plan = ticket.plan;
        DemandView view = view(ticket);
        return planning.plan(view).compose(planned -> {
            if (stale(ticket, generation)) {
                return Future.succeededFuture(current(ticket));
            }
            Plan chosen = planned.plan();
            boolean later = planned.waitingFor().isPresent();
            if (later && !waitLeft(ticket)) {
                // The waiting budget ran out with preparation unfinished: the route to the later boundary is censored.
                observeHostReady(ticket, ObservationOutcome.TIMED_OUT, -1, -1);
            }
            if (later && waitLeft(ticket)) {
                // Pages being written (a publish, or a read back from SSD) allow a later boundary: poll again.
                ticket.lastDetail = DemandState.CANDIDATE;
                return Future.succeededFuture(pending(ticket));
            }
            if (chosen.isRecompute()) {
                return Future.succeededFuture(answer(ticket, Status.MISS, DemandState.MISS, 0, null, chosen.reason()));
            }
            ticket.lastDetail = DemandState.CANDIDATE;
            return reserve(ticket, generation, view, chosen, attemptsLeft, reply);
        }, failure -> Future.failedFuture(routeFailure(failure)));
    }

    private Future<Outcome> reserve(Ticket ticket, int generation, DemandView view, Plan chosen, int attemptsLeft,
                                    Promise<Outcome> reply) {
        DemandPlan plan = ticket.plan;
        long reserved = chosen.requiredBytes();
        if (plan.speculative() && PrefetchPolicy.admitSpeculation(plan.confidence(), reserved,
                budgets.speculativeBytes(), settings.speculativeBudgetBytes())
                == PrefetchPolicy.Admission.REFUSED_BY_CONFIDENCE) {
            // The engine doubts it will use the state: its share of the speculative cap is scaled by its confidence.
            speculationRefused.increment();
            return Future.succeededFuture(answer(ticket, Status.MISS, DemandState.MISS, 0, null, chosen.reason()));
        }
        budgets.check(ticket.instance, plan.tenant(), plan.speculative(), reserved);
        budgets.charge(ticket.instance, plan.tenant(), plan.speculative(), reserved);
        long execution = nextExecution++;
        ticket.executing = execution;
        ticket.executingFor = plan;
        ticket.executingPlan = chosen;
        Future<PlanningCommands.PreparedPlan> executed = planning.execute(execution, view, chosen);
        if (chosen.movesPayloadToHost()) {
            // A peer segment's source lease is asked of another Manager: the plan stays CANDIDATE until every
            // segment's lease is held (the source granted, local slots allocated), then it is RESERVED until its bytes
            // are sealed here (RESIDENT) and the boundary is re-checked (READY).
            boolean peerPlan = chosen.segments().stream().anyMatch(s -> s.route().medium().isPeer());
            ticket.lastDetail = peerPlan ? DemandState.CANDIDATE : DemandState.RESERVED;
            reply.tryComplete(pending(ticket));
            if (peerPlan) {
                planning.acquired(execution).onSuccess(held -> {
                    if (held && ticket.executing == execution && !stale(ticket, generation)
                            && ticket.lastDetail == DemandState.CANDIDATE) {
                        ticket.lastDetail = DemandState.RESERVED;
                    }
                });
            }
        }
        return executed.compose(prepared -> {
            boolean joined = executionEnded(ticket, execution);
            if (stale(ticket, generation)) {
                budgets.refund(ticket.instance, plan.tenant(), plan.speculative(), reserved);
                if (joined) {
                    // A real demand joined this hint: its next evaluation takes over what was prepared.
                    ticket.handover = new Handover(execution, plan, chosen, leasedGroups(prepared), reserved,
                            chosen.pages(), TakeOver.IN_FLIGHT);
                    return Future.succeededFuture(current(ticket));
                }
                return planning.release(execution, false).map(n -> {
                    ticket.drainedPages += chosen.pages();
                    return current(ticket);
                });
            }
            ticket.lastDetail = DemandState.RESERVED;
            List<LeasedGroup> leased = leasedGroups(prepared);
            // Re-check legality on what was acquired, not on the evidence.
            List<GroupAvailability> acquired = new ArrayList<>(leased.size());
            for (LeasedGroup group : leased) {
                BitSet bits = new BitSet();
                group.positions().forEach(bits::set);
                acquired.add(GroupAvailability.of(group.groupId(), bits));
            }
            if (!RecoveryContract.isLegal(plan.rules(), acquired, plan.validPrefixTokens(), chosen.boundaryTokens())) {
                budgets.refund(ticket.instance, plan.tenant(), plan.speculative(), reserved);
                return planning.release(execution, false).compose(n -> Future.failedFuture(new IllegalStateException(
                        "acquired pages do not make boundary " + chosen.boundaryTokens() + " legal")));
            }
            ticket.lastDetail = DemandState.RESIDENT;
            Lease lease = new Lease(nextLease++, ticket.instance, ticket, plan.tenant(), plan.speculative(), execution,
                    reserved, chosen.pages(), chosen, leased);
            leases.put(lease.id(), lease);
            leasedBytes += lease.bytes();
            ticket.lease = lease;
            if (plan.speculative()) {
                return Future.succeededFuture(answer(ticket, Status.RESIDENT, DemandState.RESIDENT,
                        chosen.boundaryTokens(), leased, chosen.reason()));
            }
            if (plan.engineRestore() != null) {
                return restoreIntoEngine(ticket, generation, chosen.boundaryTokens(), chosen.reason(), lease, leased);
            }
            restoredBytes.increment(lease.bytes());
            observeHostReady(ticket, ObservationOutcome.SUCCEEDED, lease.bytes(), lease.pages());
            return Future.succeededFuture(answer(ticket, Status.READY, DemandState.READY, chosen.boundaryTokens(),
                    leased, chosen.reason()));
        }, failure -> {
            executionEnded(ticket, execution);
            budgets.refund(ticket.instance, plan.tenant(), plan.speculative(), reserved);
            PlanningFailure cause = PlanningException.failureOf(failure);
            if (cause == null) {
                return Future.failedFuture(failure);
            }
            if (stale(ticket, generation)) {
                return Future.succeededFuture(current(ticket));
            }
            switch (cause) {
                case STALE_EVIDENCE, SOURCE_REJECTED, TRANSFER_FAILED -> {
                    replans.increment();
                    if (attemptsLeft > 1) {
                        return attempt(ticket, generation, attemptsLeft - 1, reply);
                    }
                    if (!waitLeft(ticket)) {
                        // Sources kept refusing or failing until the waiting budget ran out: recompute.
                        return Future.succeededFuture(answer(ticket, Status.MISS, DemandState.MISS, 0, null,
                                chosen.reason()));
                    }
                    ticket.lastDetail = DemandState.CANDIDATE;
                    return Future.succeededFuture(pending(ticket));
                }
                case QUEUE_FULL, CANCELLED -> {
                    ticket.lastDetail = DemandState.CANDIDATE;
                    return Future.succeededFuture(pending(ticket));
                }
                case SPECULATION_DROPPED -> {
                    return Future.succeededFuture(answer(ticket, Status.MISS, DemandState.MISS, 0, null,
                            chosen.reason()));
                }
                default -> {
                    return Future.failedFuture(routeFailure(failure));
                }
            }
        });
    }

    // ---- take-over of a hint ----

    /**
     * The take-over rule: whether the real demand {@code demand} may be answered with what its speculative hint
     * {@code hint} prepared under {@code prepared}, instead of planning and reading again. Only along one request's
     * revisions (same session, request id and operation id: the engine's own statement that the demand follows the
     * hint; a hint of another request is that request's and is never taken from it), when:
     * <ul>
     *   <li>the hint was speculative and the demand is not, and the demand restores engine-local (host-ready);</li>
     *   <li>tenant, recovery rules, valid prefix, requested route and prefill rate are the same, so the hint's
     *       boundary is legal for the demand and its required ranges are the same ranges;</li>
     *   <li>the hint's boundary lies within the demand's selected end and is not a recompute;</li>
     *   <li>every page the hint prepared is, in the demand, the same key at the same position of the same group, with
     *       the same registered page size.</li>
     * </ul>
     * The demand then gets the hint's boundary and reason, even if a page published since would allow a longer one:
     * the wait saved is the point, and the engine can raise the revision again to have it planned afresh.
     */
    static boolean takesOver(DemandPlan hint, DemandPlan demand, Plan prepared) {
        if (hint == null || prepared == null || !hint.speculative() || demand.speculative()
                || demand.engineRestore() != null || prepared.isRecompute()
                || !Objects.equals(hint.tenant(), demand.tenant()) || !hint.rules().equals(demand.rules())
                || hint.validPrefixTokens() != demand.validPrefixTokens()
                || prepared.boundaryTokens() > demand.selectedEndTokens()
                || !hint.requestedRoute().equals(demand.requestedRoute())
                || Double.compare(hint.prefillTokensPerSecond(), demand.prefillTokensPerSecond()) != 0) {
            return false;
        }
        Map<Integer, GroupPlan> hintGroups = new HashMap<>();
        hint.groups().forEach(g -> hintGroups.put(g.groupId(), g));
        Map<Integer, Map<Integer, StateKey>> demandKeys = new HashMap<>();
        Map<Integer, Long> demandPageBytes = new HashMap<>();
        for (GroupPlan group : demand.groups()) {
            Map<Integer, StateKey> at = new HashMap<>();
            group.keys().forEach(k -> at.put(k.position(), k.key()));
            demandKeys.put(group.groupId(), at);
            demandPageBytes.put(group.groupId(), group.bytesPerPage());
        }
        for (PlannedSegment segment : prepared.segments()) {
            GroupPlan hintGroup = hintGroups.get(segment.groupId());
            Map<Integer, StateKey> at = demandKeys.get(segment.groupId());
            if (hintGroup == null || at == null
                    || demandPageBytes.get(segment.groupId()) != hintGroup.bytesPerPage()) {
                return false;
            }
            for (PlannedPage page : segment.pages()) {
                if (!page.key().equals(at.get(page.position()))) {
                    return false;
                }
            }
        }
        return true;
    }

    /**
     * Ends the hint's lease {@code lease} for a revision that takes it over: it leaves the lease table and the
     * speculative budget now (it ended, once), while planning keeps its pages pinned under the same execution for the
     * ticket's next evaluation ({@link #takeOver}).
     */
    private void handOver(Lease lease, DemandPlan hint) {
        leases.remove(lease.id());
        leasedBytes -= lease.bytes();
        budgets.refund(lease.instance(), lease.tenant(), lease.speculative(), lease.bytes());
        lease.ticket().lease = null;
        lease.ticket().handover = new Handover(lease.execution(), hint, lease.plan(), lease.leased(), lease.bytes(),
                lease.pages(), TakeOver.RESIDENT);
    }

    /**
     * The real demand takes over what its hint prepared: READY at once on the hint's pages, under a new lease charged
     * to the demand's budgets. If the demand changed meanwhile so that the rule no longer holds, or its budgets
     * cannot hold the bytes, the prepared plan is released and the demand is planned as any other. No complete-route
     * sample is reported: the route's time was spent under the hint, not this revision.
     */
    private Future<Outcome> takeOver(Ticket ticket, int generation, Handover handover, Promise<Outcome> reply) {
        DemandPlan plan = ticket.plan;
        boolean fits = takesOver(handover.hint(), plan, handover.plan());
        if (fits) {
            try {
                budgets.check(ticket.instance, plan.tenant(), false, handover.bytes());
            } catch (OrbitException refused) {
                fits = false;
            }
        }
        if (!fits) {
            return planning.release(handover.execution(), false).compose(n -> stale(ticket, generation)
                    ? Future.succeededFuture(current(ticket)) : attempt(ticket, generation, MAX_PLAN_ATTEMPTS, reply));
        }
        budgets.charge(ticket.instance, plan.tenant(), false, handover.bytes());
        Lease lease = new Lease(nextLease++, ticket.instance, ticket, plan.tenant(), false, handover.execution(),
                handover.bytes(), handover.pages(), handover.plan(), handover.leased());
        leases.put(lease.id(), lease);
        leasedBytes += lease.bytes();
        ticket.lease = lease;
        takeOvers.get(handover.from()).increment();
        restoredBytes.increment(lease.bytes());
        return Future.succeededFuture(answer(ticket, Status.READY, DemandState.READY,
                handover.plan().boundaryTokens(), handover.leased(), handover.plan().reason()));
    }

    /** Releases a handed-over preparation nobody took over (cancel, session end, stop); answers its pages. */
    private Future<Integer> dropHandover(Ticket ticket, boolean quarantine) {
        Handover handover = ticket.handover;
        if (handover == null) {
            return Future.succeededFuture(0);
        }
        ticket.handover = null;
        return planning.release(handover.execution(), quarantine).map(n -> handover.pages());
    }

    /**
     * The ticket no longer wants its execution in flight (cancel, a revision that does not take it over, session end,
     * stop): if it moves payload, its queued transfers are dropped at once instead of waiting for their start (a hint
     * may wait for seconds), submitted ones drain. The evaluation that started it still completes (failed CANCELLED,
     * or with a plan it then releases), and that is what callers wait for. A plan that only pins DRAM completes at once
     * anyway and is left to drain (its pins then count in the cancel's released pages).
     */
    private void revokeExecution(Ticket ticket) {
        if (ticket.executing != 0 && ticket.executingPlan.movesPayloadToHost()) {
            ticket.joining = 0;
            planning.cancel(ticket.executing);
        }
    }

    /** Execution {@code execution} of the ticket completed; answers whether a real demand joined it (and still wants it). */
    private static boolean executionEnded(Ticket ticket, long execution) {
        if (ticket.executing == execution) {
            ticket.executing = 0;
            ticket.executingFor = null;
            ticket.executingPlan = null;
        }
        boolean joined = ticket.joining == execution;
        if (joined) {
            ticket.joining = 0;
        }
        return joined && !ticket.cancelled;
    }

    /** Planning refusals the engine must see typed: an unavailable explicit route or target fails closed. */
    private static Throwable routeFailure(Throwable failure) {
        PlanningFailure cause = PlanningException.failureOf(failure);
        if (cause == PlanningFailure.REQUESTED_ROUTE_UNAVAILABLE || cause == PlanningFailure.TARGET_UNAVAILABLE) {
            return new OrbitException(ErrorReason.ROUTE_UNAVAILABLE, ((PlanningException) failure).detail());
        }
        return failure;
    }

    /** The prepared plan's host pages per group, in the plan's required order (groups ascending, positions ascending). */
    private static List<LeasedGroup> leasedGroups(PlanningCommands.PreparedPlan prepared) {
        Map<Integer, List<Integer>> positions = new LinkedHashMap<>();
        Map<Integer, List<ImageStore.ImageRef>> refs = new HashMap<>();
        for (GroupRanges ranges : prepared.plan().required()) {
            positions.put(ranges.groupId(), new ArrayList<>());
            refs.put(ranges.groupId(), new ArrayList<>());
        }
        for (SegmentLease lease : prepared.leases()) {
            PlannedSegment segment = lease.segment();
            for (int i = 0; i < segment.pages().size(); i++) {
                positions.get(segment.groupId()).add(segment.pages().get(i).position());
                refs.get(segment.groupId()).add(lease.hostPages().get(i));
            }
        }
        List<LeasedGroup> leased = new ArrayList<>(positions.size());
        positions.forEach((group, at) -> leased.add(new LeasedGroup(group, List.copyOf(at), List.copyOf(refs.get(group)))));
        return leased;
    }

    /** What planning needs of the ticket's demand: its keys, rules, rate, route, first use and the byte cap. */
    private DemandView view(Ticket ticket) {
        DemandPlan plan = ticket.plan;
        List<DemandView.GroupKeys> groups = new ArrayList<>(plan.groups().size());
        for (GroupPlan group : plan.groups()) {
            groups.add(new DemandView.GroupKeys(group.groupId(), group.bytesPerPage(), group.keys()));
        }
        OptionalLong firstUse = plan.firstUseMicros() > 0
                ? OptionalLong.of(ticket.revisedNanos + TimeUnit.MICROSECONDS.toNanos(plan.firstUseMicros()))
                : OptionalLong.empty();
        OptionalDouble rate = plan.prefillTokensPerSecond() > 0 ? OptionalDouble.of(plan.prefillTokensPerSecond())
                : OptionalDouble.empty();
        // The cap is what the pool can lease at all: a demand longer than that gets the longest legal boundary that
        // fits (reason BUDGET) instead of waiting for the impossible; shares and headroom are checked on the plan.
        // An engine_restore destination makes the plan end at the engine: its execution's last step is the device copy.
        CompletionTarget target = plan.engineRestore() == null ? CompletionTarget.hostReady()
                : CompletionTarget.engineRestore(plan.engineRestore().device(dramPool == null ? 0 : dramPool.incarnation()));
        // The waiting budget's end: execution tells each acquisition what is left of it, so a peer attempt that
        // times out (fenced) still leaves room for a fallback route within the same budget.
        return new DemandView(plan.rules(), plan.validPrefixTokens(), plan.selectedEndTokens(), groups,
                target, plan.requestedRoute(), rate, firstUse, plan.priority(), plan.confidence(),
                plan.speculative(), settings.leaseBudgetBytes(),
                OptionalLong.of(ticket.revisedNanos + waitBudgetNanos(ticket)));
    }

    /**
     * Completion target engine-restore: the plan's execution made the pages RESIDENT under the lease; its last step,
     * the device copy (the restore role is its execution owner), runs in the planning role. The ticket answers PENDING
     * (detail RESIDENT) meanwhile, and its evaluation stays in flight until every copy is terminal; READY only once all
     * succeeded, and the lease (the sources) ends then, since the engine holds the bytes. A cancel or revision
     * meanwhile stops the copy; the canceller ends the lease, which planning releases only after the copies drained. A
     * failed restore ends the lease and the next poll answers RESTORE_FAILED.
     */
    private Future<Outcome> restoreIntoEngine(Ticket ticket, int generation, long boundary, BoundaryReason reason,
                                              Lease lease, List<LeasedGroup> leased) {
        ticket.restoring = true;
        ticket.restoringExecution = lease.execution();
        Promise<Void> copied = Promise.promise();
        ticket.restoreDone = copied.future();
        Future<Restored> restored;
        try {
            restored = planning.finish(lease.execution(),
                    new EngineDestination(ticket.instance, ticket.id, ticket.plan.engineRestore()));
        } catch (RuntimeException e) {
            restored = Future.failedFuture(e);
        }
        restored.onComplete(ar -> {
            ticket.restoring = false;
            if (stale(ticket, generation)) {
                copied.complete();
                return;
            }
            endLease(lease).onComplete(released -> {
                if (ar.failed()) {
                    // Answered (so the ticket expires like any answer) but the next poll gets the failure.
                    ticket.restoreFailure = typed(ar.cause());
                    answer(ticket, Status.MISS, DemandState.MISS, 0, null, reason);
                } else {
                    restoredBytes.increment(ar.result().bytes());
                    answer(ticket, Status.READY, DemandState.READY, boundary, leased, reason, ar.result());
                }
                copied.complete();
            });
        });
        return Future.succeededFuture(current(ticket));
    }

    private void cancelRestore(Ticket ticket) {
        if (ticket.restoring) {
            planning.cancelFinish(ticket.restoringExecution);
        }
    }

    /**
     * A complete-route sample: from the ticket's latest revision to the state being host-ready (leased in local DRAM).
     * Only the completion owner (this role, at READY) reports it; a cancelled ticket reports CANCELLED, which never
     * trains an estimate.
     */
    private void observeHostReady(Ticket ticket, ObservationOutcome outcome, long bytes, long pages) {
        if (cost == null || !cost.observationsEnabled()) {
            return;
        }
        SizeBucket byteBucket = bytes < 0 ? SizeBucket.UNKNOWN : SizeBucket.of(bytes);
        SizeBucket pageBucket = pages < 0 ? SizeBucket.UNKNOWN : SizeBucket.of(pages);
        // Few distinct (bytes, pages) buckets occur: reuse their keys instead of building one per query.
        CostEstimateKey key = hostReadyKeys.computeIfAbsent((long) byteBucket.log2() << 32 | (pageBucket.log2() & 0xffffffffL),
                k -> CostEstimateKey.route(CostPath.HOST_READY_ROUTE, dramPool,
                        RepresentationFamily.RAW, byteBucket, pageBucket, CompletionTarget.hostReady()));
        cost.report(ObservationRecord.of(key, outcome, Math.max(0, ticker.nanos() - ticket.revisedNanos),
                bytes < 0 ? ObservedBytes.UNKNOWN : ObservedBytes.logicalOnly(bytes)));
    }

    private boolean waitLeft(Ticket ticket) {
        return ticker.nanos() - ticket.revisedNanos < waitBudgetNanos(ticket);
    }

    /** The ticket's waiting budget: the demand's max wait, capped by the configured one. */
    private long waitBudgetNanos(Ticket ticket) {
        long budget = settings.waitBudgetNanos();
        if (ticket.plan.maxWaitNanos() >= 0) {
            budget = Math.min(budget, ticket.plan.maxWaitNanos());
        }
        return budget;
    }

    private static boolean stale(Ticket ticket, int generation) {
        return ticket.cancelled || ticket.generation != generation;
    }

    private Outcome current(Ticket ticket) {
        return ticket.answer != null ? ticket.answer : pending(ticket);
    }

    private Outcome pending(Ticket ticket) {
        queriesByOutcome.get(Status.PENDING).increment();
        return new Outcome(ticket.id, Status.PENDING, ticket.lastDetail, 0, ticket.plan.rules().pageSizeTokens(), 0,
                List.of(), ticket.plan.revision(), ticket.plan.requestId(), ticket.plan.operationId(), RETRY_AFTER_MICROS);
    }

    private Outcome answer(Ticket ticket, Status status, DemandState detail, long boundary, List<LeasedGroup> leased,
                           BoundaryReason reason) {
        return answer(ticket, status, detail, boundary, leased, reason, null);
    }

    private Outcome answer(Ticket ticket, Status status, DemandState detail, long boundary, List<LeasedGroup> leased,
                           BoundaryReason reason, Restored restored) {
        ticket.lastDetail = detail;
        ticket.answer = new Outcome(ticket.id, status, detail, boundary, ticket.plan.rules().pageSizeTokens(),
                ticket.lease == null ? 0 : ticket.lease.id(), leased == null ? List.of() : List.copyOf(leased),
                ticket.plan.revision(), ticket.plan.requestId(), ticket.plan.operationId(), 0, reason, restored);
        ticket.answerExpiresNanos = ticker.nanos() + settings.replyTtlNanos();
        scheduleExpiry(ticket);
        markOutstanding(ticket, false);
        answered.add(ticket.instance, ticket);
        queriesByOutcome.get(status).increment();
        return ticket.answer;
    }

    // ---- tables ----

    private Future<Void> drained(Ticket ticket) {
        return ticket.inFlight == null ? Future.succeededFuture() : ticket.inFlight;
    }

    private void requireOutstandingRoom(long instance) {
        if (outstanding >= settings.maxOutstanding()) {
            throw new OrbitException(ErrorReason.TOO_MANY_OUTSTANDING, "the Manager has " + outstanding + " outstanding queries");
        }
        int mine = outstandingByInstance.getOrDefault(instance, 0);
        if (mine >= settings.maxOutstandingPerInstance()) {
            throw new OrbitException(ErrorReason.TOO_MANY_OUTSTANDING, "this instance has " + mine + " outstanding queries");
        }
    }

    private void markOutstanding(Ticket ticket, boolean now) {
        if (ticket.outstanding == now) {
            return;
        }
        ticket.outstanding = now;
        int delta = now ? 1 : -1;
        outstanding += delta;
        outstandingByInstance.merge(ticket.instance, delta, Integer::sum);
        outstandingByInstance.remove(ticket.instance, 0);
    }

    /** Removes a ticket from every table (its lease, if any, lives on until released). */
    private void forget(Ticket ticket) {
        if (tickets.remove(ticket.id) != ticket) {
            return;
        }
        markOutstanding(ticket, false);
        answered.remove(ticket.instance, ticket);
        if (ticket.plan.requestId() != null) {
            byRequest.remove(new RequestKey(ticket.instance, ticket.plan.requestId()), ticket);
            byOperation.remove(new OperationKey(ticket.instance, ticket.plan.operationId()), ticket);
        }
    }

    private Ticket ownedTicket(long instance, long id) {
        Ticket ticket = tickets.get(id);
        if (ticket != null && ticket.answer != null && ticket.lease == null && ticker.nanos() - ticket.answerExpiresNanos > 0) {
            forget(ticket);
            ticket = null;
        }
        if (ticket == null || ticket.instance != instance) {
            throw new OrbitException(ErrorReason.UNKNOWN_TICKET, "no ticket " + id
                    + " for this instance (never issued, cancelled or expired)");
        }
        return ticket;
    }

    private Future<Integer> endLease(Lease lease) {
        return endLease(lease, false);
    }

    /** Ends a lease exactly once; {@code quarantine}: its holder's session ended, so its slots are quarantined. */
    private Future<Integer> endLease(Lease lease, boolean quarantine) {
        if (leases.remove(lease.id()) == null) {
            return Future.succeededFuture(0);
        }
        leasedBytes -= lease.bytes();
        budgets.refund(lease.instance(), lease.tenant(), lease.speculative(), lease.bytes());
        if (lease.ticket().lease == lease) {
            lease.ticket().lease = null;
            lease.ticket().answerExpiresNanos = Math.min(lease.ticket().answerExpiresNanos,
                    ticker.nanos() + settings.replyTtlNanos());
            scheduleExpiry(lease.ticket());
        }
        return planning.release(lease.execution(), quarantine).map(n -> lease.pages());
    }

    /** Contract failures travel as their engine-API reason. */
    static Throwable typed(Throwable failure) {
        if (failure instanceof RecoveryException recovery) {
            return new OrbitException(recovery.reason().wireReason(), recovery.getMessage());
        }
        return failure;
    }
}
