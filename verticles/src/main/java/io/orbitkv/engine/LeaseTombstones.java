package io.orbitkv.engine;

import io.orbitkv.common.Ticker;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What the engine role remembers about leases that ended with their holder's session, so that a late
 * {@code ReleaseLease} is answered {@code lease_valid = false, invalid_reason = SESSION_ENDED} rather than an error.
 *
 * <p>Design note: a session ends (lapse, unregister, resume) before the admission role has told which leases it held,
 * so the end is first recorded as pending for the instance ({@link #sessionEnding}): a release racing the cleanup is
 * answered "ended" too, never "valid". When admission answers, the pending mark becomes one tombstone per lease id
 * ({@link #sessionEnded}). Lease ids are unique for the Manager's life, so a tombstone is keyed by id and checked
 * against the caller's instance. Tombstones live {@code retentionNanos} (at least the quarantine time: within it the
 * engine's copy may be the real bytes, after it the slots may hold another's) and at most {@code maxTombstones} of
 * them are kept, eldest dropped first (counted): a forgotten lease is answered with an error, which the contract also
 * treats as "discard". Confined to the engine role's event loop.
 */
final class LeaseTombstones {
    private record Tombstone(long instance, long endedNanos) {}

    private final Ticker ticker;
    private final long retentionNanos;
    private final int maxTombstones;
    /** Insertion order is end order, and every tombstone lives equally long: the eldest expires first. */
    private final LinkedHashMap<Long, Tombstone> byLease = new LinkedHashMap<>();
    /** Instances with a session end in progress, by count (a resumed instance may end twice quickly). */
    private final Map<Long, Integer> pending = new HashMap<>();
    /** Written on the engine loop only; volatile so a metrics scrape on another thread reads it whole. */
    private volatile long dropped;

    LeaseTombstones(Ticker ticker, long retentionNanos, int maxTombstones) {
        this.ticker = ticker;
        this.retentionNanos = retentionNanos;
        this.maxTombstones = maxTombstones;
    }

    /** The instance's session just ended; its leases are not known yet. */
    void sessionEnding(long instance) {
        pending.merge(instance, 1, Integer::sum);
    }

    /** The cleanup of a session end finished: these leases (possibly none, if it failed) ended with it. */
    void sessionEnded(long instance, List<Long> leaseIds) {
        pending.computeIfPresent(instance, (k, n) -> n == 1 ? null : n - 1);
        long now = ticker.nanos();
        for (long leaseId : leaseIds) {
            byLease.put(leaseId, new Tombstone(instance, now));
        }
        Iterator<Tombstone> eldest = byLease.values().iterator();
        while (byLease.size() > maxTombstones) {
            eldest.next();
            eldest.remove();
            dropped++;
        }
    }

    /** Whether this lease of this instance ended with a session (or a session end of the instance is in progress). */
    boolean endedWithSession(long instance, long leaseId) {
        expire();
        Tombstone tombstone = byLease.get(leaseId);
        return (tombstone != null && tombstone.instance() == instance) || pending.containsKey(instance);
    }

    /** Forgets tombstones older than the retention time. */
    void expire() {
        long now = ticker.nanos();
        Iterator<Tombstone> eldest = byLease.values().iterator();
        while (eldest.hasNext()) {
            if (now - eldest.next().endedNanos() <= retentionNanos) {
                break;
            }
            eldest.remove();
        }
    }

    int size() {
        return byLease.size();
    }

    /** Tombstones dropped before their retention time because the table was full. */
    long dropped() {
        return dropped;
    }
}
