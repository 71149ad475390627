package io.orbitkv.admission;

import io.orbitkv.admission.Ticket.Lease;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The leases admission handed to engines and the bytes they keep charged. A lease is opened on what planning prepared
 * and ends exactly once ({@link #drop}): out of the table and the budgets, its ticket's answer then expiring like any
 * other; planning's pages are settled by the caller (released, or cancelled and drained). Confined to the admission
 * role's loop.
 */
final class LeaseTable {
    private final QueryBudgets budgets;
    private final TicketTable tickets;
    private final Map<Long, Lease> leases = new HashMap<>();
    private long leasedBytes;
    private long nextLease = 1;

    LeaseTable(QueryBudgets budgets, TicketTable tickets) {
        this.budgets = budgets;
        this.tickets = tickets;
    }

    /** Opens the ticket's lease on {@code pages} pages planning holds under {@code preparation}, already charged. */
    Lease open(Ticket ticket, AdmissionCommands.DemandPlan demand, long preparation, long bytes, int pages,
               List<AdmissionCommands.LeasedGroup> leased) {
        Lease lease = new Lease(nextLease++, ticket.instance, ticket, demand.tenant(), demand.speculative(),
                preparation, bytes, pages, List.copyOf(leased));
        leases.put(lease.id(), lease);
        leasedBytes += bytes;
        ticket.lease = lease;
        return lease;
    }

    /** Ends a lease in admission's books, once: answers false when it had ended already (or is null). */
    boolean drop(Lease lease) {
        if (lease == null || leases.remove(lease.id()) == null) {
            return false;
        }
        leasedBytes -= lease.bytes();
        budgets.refund(lease.instance(), lease.tenant(), lease.speculative(), lease.bytes());
        Ticket ticket = lease.ticket();
        if (ticket.lease == lease) {
            ticket.lease = null;
            tickets.leaseEnded(ticket);
        }
        return true;
    }

    Lease get(long id) {
        return leases.get(id);
    }

    List<Lease> all() {
        return List.copyOf(leases.values());
    }

    int size() {
        return leases.size();
    }

    long leasedBytes() {
        return leasedBytes;
    }

    long countOf(long instance) {
        return leases.values().stream().filter(l -> l.instance() == instance).count();
    }
}
