package io.orbitkv.admission;

import io.orbitkv.common.OrbitException;
import io.orbitkv.protocol.engine.ErrorReason;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.Predicate;

/**
 * The bound on answered tickets (READY, RESIDENT or MISS answers kept pollable for {@code query.reply-ttl-ms}), per
 * instance and in total.
 *
 * <p>Design note: an answer was already handed to the engine when it was made (submit and poll answer in place); the
 * table keeps it only so a poll or an identical resubmission gets the same answer. So when a new ticket would exceed a
 * bound, the eldest answered ticket that holds no lease is forgotten early (later polls of it get UNKNOWN_TICKET) and
 * counted; a ticket whose lease is still held cannot be forgotten (the lease is the engine's), so when every answered
 * ticket in the way holds one, the new query is refused {@code TOO_MANY_ANSWERED}. Insertion order is answer order, so
 * the scan for an evictable ticket starts at the eldest. Confined to the admission role's loop, like its owner.
 *
 * @param <T> the ticket type (identity semantics)
 */
final class AnsweredTickets<T> {
    private final int maxPerInstance;
    private final int maxTotal;
    private final Predicate<T> evictable;
    private final Consumer<T> forget;
    private final Map<Long, LinkedHashSet<T>> byInstance = new HashMap<>();
    private final LinkedHashSet<T> all = new LinkedHashSet<>();
    private long evicted;

    /**
     * @param evictable whether a ticket may be forgotten early (it holds no lease)
     * @param forget    removes a ticket from every table of the owner (and so, through {@link #remove}, from this one)
     */
    AnsweredTickets(int maxPerInstance, int maxTotal, Predicate<T> evictable, Consumer<T> forget) {
        this.maxPerInstance = maxPerInstance;
        this.maxTotal = maxTotal;
        this.evictable = evictable;
        this.forget = forget;
    }

    void add(long instance, T ticket) {
        if (all.add(ticket)) {
            byInstance.computeIfAbsent(instance, i -> new LinkedHashSet<>()).add(ticket);
        }
    }

    void remove(long instance, T ticket) {
        if (all.remove(ticket)) {
            LinkedHashSet<T> mine = byInstance.get(instance);
            mine.remove(ticket);
            if (mine.isEmpty()) {
                byInstance.remove(instance);
            }
        }
    }

    /** Makes room for one more ticket of {@code instance}, or throws TOO_MANY_ANSWERED changing nothing it need not. */
    void requireRoom(long instance) {
        LinkedHashSet<T> mine = byInstance.get(instance);
        if (mine != null && mine.size() >= maxPerInstance && !evictEldest(mine)) {
            throw new OrbitException(ErrorReason.TOO_MANY_ANSWERED, "this instance holds " + mine.size()
                    + " answered queries whose leases are not released (query.max-answered-per-instance)");
        }
        if (all.size() >= maxTotal && !evictEldest(all)) {
            throw new OrbitException(ErrorReason.TOO_MANY_ANSWERED, "the Manager holds " + all.size()
                    + " answered queries whose leases are not released (query.max-answered)");
        }
    }

    private boolean evictEldest(LinkedHashSet<T> tickets) {
        for (Iterator<T> it = tickets.iterator(); it.hasNext(); ) {
            T ticket = it.next();
            if (evictable.test(ticket)) {
                forget.accept(ticket);
                evicted++;
                return true;
            }
        }
        return false;
    }

    int size() {
        return all.size();
    }

    /** Answered tickets forgotten before their reply lifetime ended, to make room. */
    long evicted() {
        return evicted;
    }
}
