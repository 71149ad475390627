package io.orbitkv.admission;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.common.Ticker;
import io.orbitkv.engine.ProducerPort;
import io.orbitkv.model.ProducerRef;
import io.orbitkv.model.ProducerState;
import io.orbitkv.model.StateKey;
import io.vertx.core.Future;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * The gate of demands that name a producer (P/D, {@code Demand.producer}): a ticket whose revision names one is not
 * planned until the producer's session sealed every page the demand lists under the named request (on this Manager,
 * or on the producer's Manager, which the engine role asks: {@link ProducerPort}). Until then it is PENDING with detail
 * WAITING_FOR_PRODUCER.
 *
 * <p>Design note (ownership and life):
 * <ul>
 *   <li><b>Who owns the wait.</b> Admission, as for any PENDING ticket: the ticket stays in {@link TicketTable} (its
 *       outstanding bounds apply), in state WAITING between polls. This class only decides, at each evaluation of such
 *       a ticket (submit, each poll, a revision), whether it may go on: PASS (the producer sealed; planning takes over
 *       and the ticket goes on as any other), WAIT, or MISS because the producer's session ended or the demand's
 *       waiting budget ran out. A waiting ticket holds nothing: no plan, no lease, no pool bytes, no byte budget, no
 *       peer credit; the producer evidence it asks for is keys only.</li>
 *   <li><b>What releases it.</b> The producer's seal (PASS at the next poll); the producer's end (ENDED: the engine
 *       role drops a session's evidence when it unregisters, lapses or resumes, so the next poll answers MISS); the
 *       waiting budget (from the latest revision, as for every ticket). Polls drive it: the engine polls a PENDING
 *       ticket anyway, and an unpolled wait costs only its ticket. A ticket has at most one ask in flight (polls
 *       meanwhile answer PENDING without asking), so a producer's Manager sees at most one ask per waiting demand.</li>
 *   <li><b>Cancel, consumer crash, revision.</b> The ticket leaves the tables as any other; an ask in flight finds it
 *       stale when it answers and changes nothing. A revision asks again (the producer or the keys may differ).</li>
 *   <li><b>Manager restart.</b> Tickets and sessions do not survive it: the consumer submits again, naming a session
 *       that no longer exists (MISS). A restarted producer's Manager answers ENDED for its old sessions; one that does
 *       not answer is WAITING until the budget runs out.</li>
 *   <li><b>After PASS</b> a producer on another Manager may still be missing from this Manager's inventory (its batch
 *       lags its seal): a plan that finds nothing to restore waits again, until the budget, instead of answering MISS
 *       ({@link #awaitingEvidence}).</li>
 * </ul>
 * Metrics: {@code orbitkv_producer_waiting} (tickets waiting now, as of the last sweep or change) and
 * {@code orbitkv_producer_waits_total{outcome="satisfied"|"producer_ended"|"budget_spent"}}. No request id or
 * producer identity is logged or labelled. Confined to admission's loop; the port's answers hop back onto it.
 */
final class ProducerWaits {
    /** What an evaluation of a gated ticket does next: plan it, wait, or answer MISS (its producer ended, its budget). */
    enum Verdict { PASS, WAIT, PRODUCER_ENDED, BUDGET_SPENT }

    private final ProducerPort producers;
    private final Ticker ticker;
    private final Set<Ticket> waiting = new HashSet<>();
    private volatile int waitingNow;
    private final Counter satisfied;
    private final Counter producerEnded;
    private final Counter budgetSpent;

    /** {@code producers} null: no engine role to ask (tests that drive admission alone): every ask is WAIT. */
    ProducerWaits(ProducerPort producers, Ticker ticker, MeterRegistry registry) {
        this.producers = producers;
        this.ticker = ticker;
        Gauge.builder("orbitkv.producer.waiting", this, w -> w.waitingNow)
                .description("Demands waiting for their producer's pages (P/D)").register(registry);
        satisfied = outcome(registry, "satisfied");
        producerEnded = outcome(registry, "producer_ended");
        budgetSpent = outcome(registry, "budget_spent");
    }

    private static Counter outcome(MeterRegistry registry, String outcome) {
        return Counter.builder("orbitkv.producer.waits").tag("outcome", outcome)
                .description("Demands that waited for a producer, by how the wait ended").register(registry);
    }

    /** Whether the ticket's current revision must still pass its producer before it is planned. */
    static boolean gated(Ticket ticket) {
        return ticket.demand.producer() != null && !ticket.producerSealed;
    }

    /** Asks where the producer stands; changes nothing ({@link #settled} does, once the ticket is known current). */
    Future<Verdict> check(Ticket ticket, long deadlineNanos) {
        if (ticker.nanos() >= deadlineNanos) {
            return Future.succeededFuture(Verdict.BUDGET_SPENT);
        }
        Future<ProducerState> asked = producers == null ? Future.succeededFuture(ProducerState.WAITING)
                : producers.status(ticket.demand.producer(), keys(ticket.demand));
        return asked.otherwise(ProducerState.WAITING).map(state -> switch (state) {
            case SEALED -> Verdict.PASS;
            case ENDED -> Verdict.PRODUCER_ENDED;
            case WAITING -> ticker.nanos() >= deadlineNanos ? Verdict.BUDGET_SPENT : Verdict.WAIT;
        });
    }

    /** The verdict applies to the ticket (still current): counted, and the ticket joins or leaves the waiting. */
    void settled(Ticket ticket, Verdict verdict) {
        switch (verdict) {
            case WAIT -> waiting.add(ticket);
            case PASS -> {
                waiting.remove(ticket);
                satisfied.increment();
            }
            case PRODUCER_ENDED -> {
                waiting.remove(ticket);
                producerEnded.increment();
            }
            case BUDGET_SPENT -> {
                waiting.remove(ticket);
                budgetSpent.increment();
            }
        }
        waitingNow = waiting.size();
    }

    /**
     * A plan of a producer's demand found nothing to restore: for a producer on another Manager whose pages this
     * Manager's inventory has not shown yet, wait again while the budget lasts.
     */
    boolean awaitingEvidence(Ticket ticket, long deadlineNanos) {
        ProducerRef producer = ticket.demand.producer();
        if (producer == null || producer.local() || ticker.nanos() >= deadlineNanos) {
            return false;
        }
        waiting.add(ticket);
        waitingNow = waiting.size();
        return true;
    }

    /** The ticket is being planned: it waits for its producer no more. */
    void leave(Ticket ticket) {
        if (waiting.remove(ticket)) {
            waitingNow = waiting.size();
        }
    }

    /** Forgets tickets that stopped waiting elsewhere (cancelled, session ended, revised, answered). */
    void sweep() {
        waiting.removeIf(t -> t.state == Ticket.State.ENDED || t.detail != AdmissionCommands.DemandState.WAITING_FOR_PRODUCER);
        waitingNow = waiting.size();
    }

    int waiting() {
        return waitingNow;
    }

    /** Every key the demand lists (its declared ranges): all of them must be the producer's. */
    static List<StateKey> keys(AdmissionCommands.DemandPlan demand) {
        List<StateKey> keys = new ArrayList<>();
        for (AdmissionCommands.GroupPlan group : demand.groups()) {
            group.keys().forEach(k -> keys.add(k.key()));
        }
        return keys;
    }
}
