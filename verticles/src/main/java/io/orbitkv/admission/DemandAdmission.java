package io.orbitkv.admission;

import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.admission.AdmissionCommands.DemandPlan;
import io.orbitkv.admission.AdmissionCommands.DemandState;
import io.orbitkv.admission.AdmissionCommands.LeasedGroup;
import io.orbitkv.admission.AdmissionCommands.Outcome;
import io.orbitkv.admission.AdmissionCommands.Status;
import io.orbitkv.admission.Ticket.Lease;
import io.orbitkv.common.OrbitException;
import io.orbitkv.common.Ticker;
import io.orbitkv.cost.CostProxy;
import io.orbitkv.engine.ProducerPort;
import io.orbitkv.model.cost.ObservationOutcome;
import io.orbitkv.model.cost.ResourceId;
import io.orbitkv.model.plan.Plan;
import io.orbitkv.planning.PlanningCommands;
import io.orbitkv.model.plan.PlanningException;
import io.orbitkv.model.plan.PlanningFailure;
import io.orbitkv.planning.PlanningPort;
import io.orbitkv.model.plan.PreparationCallbacks;
import io.orbitkv.model.plan.PreparationResult;
import io.orbitkv.protocol.engine.ErrorReason;
import io.vertx.core.AsyncResult;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.function.Predicate;

/**
 * Demand admission: query tickets and their revisions, waiting budgets, byte budgets and tenant shares, and the leases
 * handed to engines. Planning decides and executes everything about a demand's pages: each evaluation is one
 * {@link PlanningPort#prepare}; planning asks back to admit each plan's bytes and reports how far it got
 * ({@link PreparationCallbacks}). Evidence alone never answers READY. Design note (ownership):
 * <ul>
 *   <li>Admission owns the ticket (its life is {@link Ticket.State}), the bytes charged for its current plan and the
 *       lease built on what planning prepared. Planning owns the plan and every page, under the preparation id
 *       admission chose, until admission releases or cancels that id.</li>
 *   <li>An evaluation's charge becomes the lease (READY, RESIDENT, or RESIDENT while the device copy runs) or is
 *       refunded when the preparation ends otherwise; once its ticket was revised or cancelled it is stale.</li>
 *   <li>Revision: the new preparation names the previous one, which planning takes over (a speculative hint) or
 *       cancels and drains first; a lease under a running device copy is drained first. A lower revision is
 *       REVISION_BACKWARDS; an equal one answers the same, or DUPLICATE_OPERATION for another demand.</li>
 *   <li>Cancel, session end, stop: the ticket leaves every table at once; planning cancels its preparation (queued
 *       transfers dropped, submitted work and copies drained) and releases what it held, quarantined at session end;
 *       only then does the lease leave the budgets. A lease ends exactly once.</li>
 *   <li>Timeout: a PENDING ticket waits at most its waiting budget from its latest revision; planning gets its end
 *       as the demand's deadline and then settles on what is resident (a shorter legal boundary or MISS).</li>
 *   <li>Producer: a demand naming a producer (P/D) is not planned before {@link ProducerWaits} lets it pass; while it
 *       waits it holds nothing.</li>
 *   <li>Bounds: {@link TicketTable} (outstanding and answered tickets, answer lifetimes), {@link QueryBudgets}.</li>
 *   <li>Confined to one event loop; planning's futures complete on it and its callbacks hop onto it.</li>
 * </ul>
 */
final class DemandAdmission {
    private final AdmissionVerticle.Settings settings;
    private final Ticker ticker;
    private final PlanningPort planning;
    private final QueryBudgets budgets;
    private final HostReadySamples samples;
    /** Planning's callbacks hop onto admission's loop (the context it started on; none when driven directly). */
    private final LoopHop loop = new LoopHop(Vertx.currentContext());
    private final TicketTable tickets;
    private final LeaseTable leases;
    private final AdmissionMeters meters;
    private final TicketAnswers answers;
    private final ProducerWaits producers;
    private long nextPreparation = 1;

    DemandAdmission(AdmissionVerticle.Settings settings, MeterRegistry registry, Ticker ticker, PlanningPort planning) {
        this(settings, registry, ticker, planning, null, null, null);
    }

    /**
     * @param cost      where complete-route samples go (HOST_READY_ROUTE: revision → READY); null = not observed
     * @param dramPool  the resource identity of this Manager's DRAM pool (with its incarnation)
     * @param producers where demands naming a producer ask for it (P/D); null: they wait out their budget
     */
    DemandAdmission(AdmissionVerticle.Settings settings, MeterRegistry registry, Ticker ticker, PlanningPort planning,
                    CostProxy cost, ResourceId dramPool, ProducerPort producers) {
        this.producers = new ProducerWaits(producers, ticker, registry);
        this.settings = settings;
        this.ticker = ticker;
        this.planning = planning;
        this.samples = new HostReadySamples(cost, dramPool, ticker);
        this.budgets = new QueryBudgets(settings.leaseBudgetBytes(), settings.instanceBudgetBytes(),
                settings.speculativeBudgetBytes(), settings.tenantShares());
        this.meters = new AdmissionMeters(registry);
        tickets = new TicketTable(settings, ticker);
        leases = new LeaseTable(budgets, tickets);
        answers = new TicketAnswers(tickets, meters);
    }

    // ---- commands ----

    Future<Outcome> submit(long instance, DemandPlan demand) {
        tickets.sweep();
        if (demand.requestId() != null) {
            Ticket existing = tickets.ofRequest(instance, demand.requestId());
            if (existing != null) {
                return resubmit(existing, demand);
            }
            if (tickets.operationHeld(instance, demand.operationId())) {
                throw new OrbitException(ErrorReason.DUPLICATE_OPERATION, "operation "
                        + Long.toUnsignedString(demand.operationId()) + " is held by another live request of this instance");
            }
        }
        tickets.requireOutstandingRoom(instance);
        budgets.requireHeadroom(instance, demand.tenant(), demand.speculative());
        tickets.requireAnsweredRoom(instance);
        return evaluate(tickets.open(instance, demand), 0);
    }

    private Future<Outcome> resubmit(Ticket ticket, DemandPlan demand) {
        int order = Long.compareUnsigned(demand.revision(), ticket.demand.revision());
        if (order < 0) {
            throw new OrbitException(ErrorReason.REVISION_BACKWARDS, "revision " + Long.toUnsignedString(demand.revision())
                    + " of request '" + demand.requestId() + "' is older than its live revision "
                    + Long.toUnsignedString(ticket.demand.revision()));
        }
        if (order == 0) {
            if (!demand.equals(ticket.demand)) {
                throw new OrbitException(ErrorReason.DUPLICATE_OPERATION, "revision " + Long.toUnsignedString(demand.revision())
                        + " of request '" + demand.requestId() + "' was already claimed by another demand; raise the revision to change it");
            }
            return poll(ticket.instance, ticket.id);
        }
        if (demand.operationId() != ticket.demand.operationId()) {
            throw new OrbitException(ErrorReason.DUPLICATE_OPERATION, "request '" + demand.requestId()
                    + "' is operation " + Long.toUnsignedString(ticket.demand.operationId()) + "; a revision keeps its operation id");
        }
        if (!ticket.state.outstanding()) {
            tickets.requireOutstandingRoom(ticket.instance);
        }
        budgets.requireHeadroom(ticket.instance, demand.tenant(), demand.speculative());
        Lease old = ticket.lease;
        boolean copying = ticket.state == Ticket.State.COPYING;
        // Bytes prepared under one tenant's share are never handed to another's demand.
        long replaces = copying || !Objects.equals(demand.tenant(), ticket.demand.tenant()) ? 0 : ticket.preparation;
        ticket.demand = demand;
        ticket.revisedNanos = ticker.nanos();
        ticket.producerSealed = false;
        ticket.answer = null;
        ticket.evaluation = null;
        ticket.detail = DemandState.MISS;
        tickets.reopened(ticket);
        tickets.move(ticket, Ticket.State.PREPARING);
        Future<Integer> before = Future.succeededFuture(0);
        if (replaces == 0) {
            // Not offered for take-over: drained first (a running copy still reads the old lease's pages).
            before = planning.cancel(ticket.preparation, false);
            before.onComplete(ar -> leases.drop(old));
        } else {
            leases.drop(old); // its pages stay with planning, which takes them over or releases them
        }
        return before.compose(n -> ticket.state == Ticket.State.ENDED ? Future.succeededFuture(answers.pending(ticket))
                : evaluate(ticket, replaces));
    }

    Future<Outcome> poll(long instance, long ticketId) {
        Ticket ticket = tickets.owned(instance, ticketId);
        return switch (ticket.state) {
            case COPY_FAILED -> {
                tickets.forget(ticket);
                yield Future.failedFuture(ticket.copyFailure);
            }
            case ANSWERED -> Future.succeededFuture(ticket.answer);
            case WAITING -> evaluate(ticket, 0);
            default -> Future.succeededFuture(answers.pending(ticket));
        };
    }

    /** Revokes interest now; completes after planning drained and released, with the pages it released. */
    Future<Integer> cancel(long instance, long ticketId) {
        Ticket ticket = tickets.owned(instance, ticketId);
        if (ticket.answer == null) {
            samples.observe(ticket.revisedNanos, ObservationOutcome.CANCELLED, -1, -1);
        }
        tickets.forget(ticket);
        Lease lease = ticket.lease;
        return planning.cancel(ticket.preparation, false).onComplete(ar -> leases.drop(lease));
    }

    Future<Integer> release(long instance, long leaseId) {
        Lease lease = leases.get(leaseId);
        if (lease == null || lease.instance() != instance) {
            throw new OrbitException(ErrorReason.UNKNOWN_LEASE, "no lease " + leaseId
                    + " held by this instance (never granted or already released)");
        }
        return endLease(lease, false);
    }

    /**
     * The instance's session ended (lapse, unregister, resume): its tickets are forgotten, and planning cancels their
     * preparations and releases what they held into quarantine (the engine may still be copying). Answers the ids of
     * the leases it ended, so the engine role can tell a late release that the lease did not stay valid.
     */
    Future<AdmissionCommands.InstanceReleased> releaseInstance(long instance) {
        List<Long> ended = leases.all().stream().filter(l -> l.instance() == instance).map(Lease::id).toList();
        int cancelled = (int) tickets.all().stream().filter(t -> t.instance == instance && t.state.outstanding()).count();
        return endAll(ticket -> ticket.instance == instance, lease -> lease.instance() == instance, true)
                .map(v -> new AdmissionCommands.InstanceReleased(ended.size(), cancelled, List.copyOf(ended)));
    }

    /** Ordered stop: every ticket and lease ends as on cancel, before the planning and storage roles stop. */
    Future<Void> shutdown() {
        return endAll(ticket -> true, lease -> true, false);
    }

    private Future<Void> endAll(Predicate<Ticket> ended, Predicate<Lease> leased, boolean quarantine) {
        List<Future<?>> waits = new ArrayList<>();
        for (Lease lease : leases.all()) {
            if (leased.test(lease)) {
                waits.add(planning.cancel(lease.preparation(), quarantine).onComplete(ar -> leases.drop(lease)));
            }
        }
        for (Ticket ticket : tickets.all()) {
            if (ended.test(ticket)) {
                tickets.forget(ticket);
                if (ticket.lease == null) {
                    waits.add(planning.cancel(ticket.preparation, quarantine));
                }
            }
        }
        return Future.join(waits).transform(ar -> Future.succeededFuture());
    }

    AdmissionCommands.AdmissionStats stats(long instance) {
        return new AdmissionCommands.AdmissionStats(leases.size(), leases.leasedBytes(), tickets.outstanding(),
                leases.countOf(instance), tickets.outstanding(instance));
    }

    /** Forgets answered tickets whose reply lifetime ended and that hold no lease. */
    void sweep() {
        tickets.sweep();
        producers.sweep();
    }

    int waitingForProducer() {
        return producers.waiting();
    }

    int activeLeases() {
        return leases.size();
    }

    long leasedBytes() {
        return leases.leasedBytes();
    }

    long outstanding() {
        return tickets.outstanding();
    }

    long answersEvicted() {
        return tickets.answersEvicted();
    }

    int liveTickets() {
        return tickets.size();
    }

    QueryBudgets budgets() {
        return budgets;
    }

    // ---- evaluation ----

    private Future<Outcome> evaluate(Ticket ticket, long replaces) {
        if (ProducerWaits.gated(ticket)) {
            return awaitProducer(ticket, replaces);
        }
        producers.leave(ticket);
        Evaluation evaluation = new Evaluation(ticket, nextPreparation++);
        ticket.evaluation = evaluation;
        ticket.preparation = evaluation.id;
        tickets.move(ticket, Ticket.State.PREPARING);
        Future<PreparationResult> prepared;
        try {
            prepared = planning.prepare(new PlanningCommands.Prepare(evaluation.id,
                    ticket.view(settings, samples.incarnation()), ticket.destination(), replaces, evaluation));
        } catch (RuntimeException e) {
            prepared = Future.failedFuture(e);
        }
        prepared.onComplete(evaluation::ended);
        return evaluation.reply.future();
    }

    /**
     * A demand naming a producer: not planned before the producer sealed its pages ({@link ProducerWaits}). While the
     * ask runs the ticket is PREPARING (polls answer PENDING); a cancel or revision meanwhile makes the answer stale.
     * A preparation the revision would have taken over is cancelled first: a waiting ticket holds nothing.
     */
    private Future<Outcome> awaitProducer(Ticket ticket, long replaces) {
        Object ask = new Object();
        AdmissionCommands.DemandPlan demand = ticket.demand;
        ticket.evaluation = ask;
        ticket.detail = DemandState.WAITING_FOR_PRODUCER;
        tickets.move(ticket, Ticket.State.PREPARING);
        Future<Integer> before = replaces == 0 ? Future.succeededFuture(0) : planning.cancel(replaces, false);
        return before.transform(cancelled -> producers.check(ticket, ticket.waitDeadlineNanos(settings)))
                .compose(verdict -> loop.run(() -> {
                    if (ticket.evaluation != ask || ticket.demand != demand || ticket.state == Ticket.State.ENDED) {
                        return Future.succeededFuture(ticket.answer != null ? ticket.answer : answers.pending(ticket));
                    }
                    ticket.evaluation = null;
                    producers.settled(ticket, verdict);
                    return switch (verdict) {
                        case PASS -> {
                            ticket.producerSealed = true;
                            ticket.detail = DemandState.CANDIDATE;
                            yield evaluate(ticket, 0);
                        }
                        case WAIT -> {
                            tickets.move(ticket, Ticket.State.WAITING);
                            yield Future.succeededFuture(answers.pending(ticket));
                        }
                        case PRODUCER_ENDED, BUDGET_SPENT ->
                                Future.succeededFuture(answers.answer(ticket, Status.MISS, DemandState.MISS, 0, null, null));
                    };
                }));
    }

    /**
     * One evaluation of a ticket: admission's side of its preparation. It charges what planning's current plan needs,
     * answers PENDING as soon as payload moves, and turns the charge into a lease or refunds it at the end.
     */
    private final class Evaluation implements PreparationCallbacks {
        final Ticket ticket;
        final long id;
        final DemandPlan demand;
        final Promise<Outcome> reply = Promise.promise();
        long charged;

        Evaluation(Ticket ticket, long id) {
            this.ticket = ticket;
            this.id = id;
            this.demand = ticket.demand;
        }

        private boolean current() {
            return ticket.evaluation == this && ticket.state != Ticket.State.ENDED;
        }

        @Override
        public Future<Boolean> admit(Plan plan) {
            return loop.run(() -> Future.succeededFuture(charge(plan)));
        }

        private boolean charge(Plan plan) {
            if (!current()) {
                throw new PlanningException(PlanningFailure.CANCELLED, "the ticket was revised or cancelled");
            }
            refund();
            long bytes = plan.requiredBytes();
            if (demand.speculative() && QueryBudgets.admitSpeculation(demand.confidence(), bytes,
                    budgets.speculativeBytes(), settings.speculativeBudgetBytes())
                    == QueryBudgets.SpeculationAdmission.REFUSED_BY_CONFIDENCE) {
                // The engine doubts it will use the state: its share of the speculative cap is scaled by its confidence.
                meters.speculationRefused.increment();
                return false;
            }
            budgets.check(ticket.instance, demand.tenant(), demand.speculative(), bytes);
            budgets.charge(ticket.instance, demand.tenant(), demand.speculative(), bytes);
            charged = bytes;
            ticket.detail = DemandState.CANDIDATE;
            return true;
        }

        private void refund() {
            budgets.refund(ticket.instance, demand.tenant(), demand.speculative(), charged);
            charged = 0;
        }

        @Override
        public void moving(Stage stage) {
            loop.run(() -> {
                if (current()) {
                    if (stage == Stage.CANDIDATE) {
                        ticket.detail = DemandState.CANDIDATE;
                    } else if (ticket.detail.compareTo(DemandState.RESERVED) < 0) {
                        ticket.detail = DemandState.RESERVED;
                    }
                    if (!reply.future().isComplete()) {
                        reply.complete(answers.pending(ticket));
                    }
                }
                return Future.succeededFuture();
            });
        }

        @Override
        public void copying(Plan plan, List<PreparationResult.HeldGroup> held) {
            loop.run(() -> {
                if (current()) {
                    lease(plan, held);
                    ticket.detail = DemandState.RESIDENT;
                    tickets.move(ticket, Ticket.State.COPYING);
                    reply.tryComplete(answers.pending(ticket));
                }
                return Future.succeededFuture();
            });
        }

        /** The charge becomes the ticket's lease on what planning holds under this preparation. */
        private Lease lease(Plan plan, List<PreparationResult.HeldGroup> held) {
            List<LeasedGroup> groups = new ArrayList<>(held.size());
            held.forEach(g -> groups.add(new LeasedGroup(g.groupId(), g.positions(), g.refs())));
            Lease lease = leases.open(ticket, demand, id, charged, plan.pages(), groups);
            charged = 0;
            return lease;
        }

        void ended(AsyncResult<PreparationResult> ar) {
            if (!current()) {
                refund();
                if (!reply.future().isComplete()) {
                    reply.complete(ticket.answer != null ? ticket.answer : answers.pending(ticket));
                }
                return;
            }
            ticket.evaluation = null;
            if (ar.failed()) {
                if (ticket.state == Ticket.State.COPYING) {
                    // Answered (so the ticket expires like any answer), but the next poll gets the failure.
                    Lease lease = ticket.lease;
                    endLease(lease, false).onComplete(released -> {
                        answers.answer(ticket, Status.MISS, DemandState.MISS, 0, null, null);
                        ticket.copyFailure = TicketAnswers.typed(ar.cause());
                        tickets.move(ticket, Ticket.State.COPY_FAILED);
                    });
                    return;
                }
                refund();
                tickets.forget(ticket);
                reply.tryFail(TicketAnswers.typed(TicketAnswers.routeFailure(ar.cause())));
                return;
            }
            PreparationResult result = ar.result();
            Plan plan = result.plan();
            if (result.waitSpent()) {
                // The waiting budget ran out with writes unfinished: the route to the later boundary is censored.
                samples.observe(ticket.revisedNanos, ObservationOutcome.TIMED_OUT, -1, -1);
            }
            switch (result.kind()) {
                case WAITING_FOR_WRITES, RETRY_LATER -> {
                    refund();
                    ticket.detail = DemandState.CANDIDATE;
                    tickets.move(ticket, Ticket.State.WAITING);
                    reply.tryComplete(answers.pending(ticket));
                }
                case RECOMPUTE -> {
                    refund();
                    if (producers.awaitingEvidence(ticket, ticket.waitDeadlineNanos(settings))) {
                        ticket.detail = DemandState.WAITING_FOR_PRODUCER;
                        tickets.move(ticket, Ticket.State.WAITING);
                        reply.tryComplete(answers.pending(ticket));
                        return;
                    }
                    reply.tryComplete(answers.answer(ticket, Status.MISS, DemandState.MISS, 0, null, plan.reason()));
                }
                case HOST_READY -> {
                    Lease lease = lease(plan, result.held());
                    Status status = demand.speculative() ? Status.RESIDENT : Status.READY;
                    if (result.takenOver().isPresent()) {
                        // The route's time was spent under the hint, not this revision: no complete-route sample.
                        meters.tookOver(result.takenOver().get());
                    } else if (!demand.speculative()) {
                        samples.observe(ticket.revisedNanos, ObservationOutcome.SUCCEEDED, lease.bytes(), lease.pages());
                    }
                    if (!demand.speculative()) {
                        meters.restoredBytes.increment(lease.bytes());
                    }
                    reply.tryComplete(answers.answer(ticket, status, DemandState.valueOf(status.name()), plan.boundaryTokens(),
                            lease.leased(), plan.reason()));
                }
                case RESTORED -> {
                    List<LeasedGroup> leased = ticket.lease.leased();
                    endLease(ticket.lease, false).onComplete(released -> {
                        // The engine holds the bytes now: its sources are released and it gets no lease.
                        meters.restoredBytes.increment(result.restored().bytes());
                        answers.answer(ticket, Status.READY, DemandState.READY, plan.boundaryTokens(), leased, plan.reason(),
                                result.restored());
                    });
                }
            }
        }
    }

    /** Ends a lease exactly once: out of the books, then planning releases its pages; answers its pages. */
    private Future<Integer> endLease(Lease lease, boolean quarantine) {
        if (!leases.drop(lease)) {
            return Future.succeededFuture(0);
        }
        return planning.release(lease.preparation(), quarantine).map(n -> lease.pages());
    }
}
