package io.orbitkv.admission;

import io.orbitkv.common.OrbitException;
import io.orbitkv.common.Ticker;
import io.orbitkv.protocol.engine.ErrorReason;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The live tickets of {@link DemandAdmission}: by id, by (instance, request id) and by (instance, operation id); the
 * outstanding bounds (PENDING tickets per instance and in total, counted by {@link Ticket.State#outstanding()}); and
 * answer lifetimes: an answer lives {@code replyTtlNanos} (while its lease lives, longer), then the ticket is forgotten
 * and polls get UNKNOWN_TICKET. Answered tickets are bounded too ({@link AnsweredTickets}). A ticket leaves every
 * table at once when forgotten; its lease, if any, is the lease table's. Confined to the admission role's loop.
 */
final class TicketTable {
    private record RequestKey(long instance, String requestId) {}

    private record OperationKey(long instance, long operationId) {}

    /** An answered ticket and when its answer may expire; queued in (nearly) expiry order, checked when popped. */
    private record Expiry(Ticket ticket, long atNanos) {}

    private final AdmissionVerticle.Settings settings;
    private final Ticker ticker;
    private final Map<Long, Ticket> tickets = new HashMap<>();
    private final Map<RequestKey, Ticket> byRequest = new HashMap<>();
    private final Map<OperationKey, Ticket> byOperation = new HashMap<>();
    private final Map<Long, Integer> outstandingByInstance = new HashMap<>();
    private final AnsweredTickets<Ticket> answered;
    /** Answer lifetimes are one constant from a monotonic clock, so this queue is in expiry order (see sweep). */
    private final ArrayDeque<Expiry> expiries = new ArrayDeque<>();
    private long outstanding;
    private long nextTicket = 1;

    TicketTable(AdmissionVerticle.Settings settings, Ticker ticker) {
        this.settings = settings;
        this.ticker = ticker;
        answered = new AnsweredTickets<>(settings.maxAnsweredPerInstance(), settings.maxAnswered(),
                t -> t.lease == null, this::forget);
    }

    /** The live ticket of a request, or null. */
    Ticket ofRequest(long instance, String requestId) {
        return byRequest.get(new RequestKey(instance, requestId));
    }

    boolean operationHeld(long instance, long operationId) {
        return byOperation.containsKey(new OperationKey(instance, operationId));
    }

    /** Makes room for one more answer of {@code instance}, or refuses TOO_MANY_ANSWERED. */
    void requireAnsweredRoom(long instance) {
        answered.requireRoom(instance);
    }

    void requireOutstandingRoom(long instance) {
        if (outstanding >= settings.maxOutstanding()) {
            throw new OrbitException(ErrorReason.TOO_MANY_OUTSTANDING, "the Manager has " + outstanding + " outstanding queries");
        }
        int mine = outstandingByInstance.getOrDefault(instance, 0);
        if (mine >= settings.maxOutstandingPerInstance()) {
            throw new OrbitException(ErrorReason.TOO_MANY_OUTSTANDING, "this instance has " + mine + " outstanding queries");
        }
    }

    Ticket open(long instance, AdmissionCommands.DemandPlan demand) {
        Ticket ticket = new Ticket(nextTicket++, instance, demand, ticker.nanos());
        tickets.put(ticket.id, ticket);
        if (demand.requestId() != null) {
            byRequest.put(new RequestKey(instance, demand.requestId()), ticket);
            byOperation.put(new OperationKey(instance, demand.operationId()), ticket);
        }
        return ticket;
    }

    /** Moves the ticket to {@code state}, keeping the outstanding counts. */
    void move(Ticket ticket, Ticket.State state) {
        int delta = (state.outstanding() ? 1 : 0) - (ticket.state != null && ticket.state.outstanding() ? 1 : 0);
        ticket.state = state;
        if (delta != 0) {
            outstanding += delta;
            outstandingByInstance.merge(ticket.instance, delta, Integer::sum);
            outstandingByInstance.remove(ticket.instance, 0);
        }
    }

    /** The ticket was answered: it counts against the answered bound and expires after its reply lifetime. */
    void answered(Ticket ticket) {
        ticket.answerExpiresNanos = ticker.nanos() + settings.replyTtlNanos();
        scheduleExpiry(ticket);
        answered.add(ticket.instance, ticket);
    }

    /** A revision took the ticket's answer back. */
    void reopened(Ticket ticket) {
        answered.remove(ticket.instance, ticket);
    }

    /** The ticket's lease ended: its answer lives at most one more reply lifetime. */
    void leaseEnded(Ticket ticket) {
        ticket.answerExpiresNanos = Math.min(ticket.answerExpiresNanos, ticker.nanos() + settings.replyTtlNanos());
        scheduleExpiry(ticket);
    }

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

    /** Removes a ticket from every table (its lease, if any, lives on until released). */
    void forget(Ticket ticket) {
        if (tickets.remove(ticket.id) != ticket) {
            return;
        }
        move(ticket, Ticket.State.ENDED);
        ticket.evaluation = null;
        answered.remove(ticket.instance, ticket);
        if (ticket.demand.requestId() != null) {
            byRequest.remove(new RequestKey(ticket.instance, ticket.demand.requestId()), ticket);
            byOperation.remove(new OperationKey(ticket.instance, ticket.demand.operationId()), ticket);
        }
    }

    /** The instance's live ticket {@code id}, or UNKNOWN_TICKET (never issued, cancelled or expired). */
    Ticket owned(long instance, long id) {
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

    List<Ticket> all() {
        return List.copyOf(tickets.values());
    }

    int size() {
        return tickets.size();
    }

    long outstanding() {
        return outstanding;
    }

    int outstanding(long instance) {
        return outstandingByInstance.getOrDefault(instance, 0);
    }

    /** Answered tickets forgotten early to keep the answered bound (orbitkv.queries.answers.evicted). */
    long answersEvicted() {
        return answered.evicted();
    }
}
