package io.orbitkv.admission;

import io.orbitkv.admission.AdmissionCommands.DemandState;
import io.orbitkv.admission.AdmissionCommands.LeasedGroup;
import io.orbitkv.admission.AdmissionCommands.Outcome;
import io.orbitkv.admission.AdmissionCommands.Status;
import io.orbitkv.common.OrbitException;
import io.orbitkv.model.plan.BoundaryReason;
import io.orbitkv.model.plan.PlanningException;
import io.orbitkv.model.plan.PlanningFailure;
import io.orbitkv.model.plan.Restored;
import io.orbitkv.protocol.engine.ErrorReason;
import io.orbitkv.recovery.RecoveryException;
import java.util.List;

/**
 * What a ticket answers: a PENDING outcome (nothing recorded), or its final answer, recorded on the ticket, moved to
 * ANSWERED and counted; and the typed failures the engine sees. Confined to admission's loop, like the tickets.
 */
final class TicketAnswers {
    static final long RETRY_AFTER_MICROS = 1000;

    private final TicketTable tickets;
    private final AdmissionMeters meters;

    TicketAnswers(TicketTable tickets, AdmissionMeters meters) {
        this.tickets = tickets;
        this.meters = meters;
    }

    Outcome pending(Ticket ticket) {
        meters.answered(Status.PENDING);
        return new Outcome(ticket.id, Status.PENDING, ticket.detail, 0, ticket.demand.rules().pageSizeTokens(), 0,
                List.of(), ticket.demand.revision(), ticket.demand.requestId(), ticket.demand.operationId(),
                RETRY_AFTER_MICROS);
    }

    Outcome answer(Ticket ticket, Status status, DemandState detail, long boundary, List<LeasedGroup> leased,
                   BoundaryReason reason) {
        return answer(ticket, status, detail, boundary, leased, reason, null);
    }

    Outcome answer(Ticket ticket, Status status, DemandState detail, long boundary, List<LeasedGroup> leased,
                   BoundaryReason reason, Restored restored) {
        ticket.detail = detail;
        ticket.answer = new Outcome(ticket.id, status, detail, boundary, ticket.demand.rules().pageSizeTokens(),
                ticket.lease == null ? 0 : ticket.lease.id(), leased == null ? List.of() : List.copyOf(leased),
                ticket.demand.revision(), ticket.demand.requestId(), ticket.demand.operationId(), 0, reason, restored);
        tickets.move(ticket, Ticket.State.ANSWERED);
        tickets.answered(ticket);
        meters.answered(status);
        return ticket.answer;
    }

    /** Planning refusals the engine must see typed: an unavailable explicit route or target fails closed. */
    static Throwable routeFailure(Throwable failure) {
        PlanningFailure cause = PlanningException.failureOf(failure);
        if (cause == PlanningFailure.REQUESTED_ROUTE_UNAVAILABLE || cause == PlanningFailure.TARGET_UNAVAILABLE) {
            return new OrbitException(ErrorReason.ROUTE_UNAVAILABLE, ((PlanningException) failure).detail());
        }
        return failure;
    }

    /** Contract failures travel as their engine-API reason. */
    static Throwable typed(Throwable failure) {
        if (failure instanceof RecoveryException recovery) {
            return new OrbitException(recovery.reason().wireReason(), recovery.getMessage());
        }
        return failure;
    }
}
