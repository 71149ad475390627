package io.orbitkv.storage;

import io.orbitkv.common.OrbitException;
import io.orbitkv.common.Ticker;
import io.orbitkv.model.StateKey;
import io.orbitkv.protocol.engine.ErrorReason;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.TreeMap;
import java.util.function.ToDoubleFunction;

/**
 * Retention hints: which keys engines or applications asked to keep, at which priority, until when, and each tenant's
 * retained bytes against its budget.
 *
 * <p>Design note (budget): a retention counts its chains' pages times their page lengths against its tenant, resident
 * or not, from {@link #retain} until it expires or is released; a refusal changes nothing. A tenant's budget is
 * {@code budgetBytes} times its configured share ({@code shares}), or, without configured shares, an equal share
 * among the tenants holding retentions now (the asking one included): a tenant alone may use it all, and nothing
 * already retained is revoked when another tenant arrives. All tenants together never hold more than
 * {@code budgetBytes}: a tenant's budget is also capped by what the others leave. The table owns no memory; it only
 * ranks keys.
 *
 * <p>Eviction: a key's priority is the highest of its live retentions ({@link #priorityOf}, {@code -1}: none). Every
 * change of it is reported to {@code onPriorityChanged} so that the eviction order ({@link EvictionOrder}) moves the
 * resident image at once; retention never pins: under pressure a retained image goes after every unretained one.
 *
 * <p>Expiry: deadlines come from the injected {@link Ticker}; {@link #expire} ends the retentions whose deadline
 * passed. The storage role calls it before it evicts and once a second. Loop-confined to the storage role.
 */
final class RetentionTable {
    /** No retention on a key. */
    static final int NOT_RETAINED = -1;

    /** Reports a key's new effective priority ({@link #NOT_RETAINED} when its last retention ended). */
    interface PriorityListener {
        void changed(StateKey key, int priority);
    }

    record Retention(long id, String tenant, List<StateKey> keys, long bytes, int priority, long expiresAtNanos) {}

    /** A granted retention and its tenant's figures after it. */
    record Granted(Retention retention, long tenantRetainedBytes, long tenantBudgetBytes) {}

    private final Ticker ticker;
    private final long budgetBytes;
    private final long maxTtlNanos;
    /** A tenant's configured fraction of the budget; null: equal shares among holding tenants. */
    private final ToDoubleFunction<String> shares;
    private PriorityListener listener = (key, priority) -> {};
    private final Map<Long, Retention> byId = new HashMap<>();
    /** Per key: priority → live retentions at it. */
    private final Map<StateKey, TreeMap<Integer, Integer>> priorities = new HashMap<>();
    private final Map<String, Long> tenantBytes = new HashMap<>();
    private final PriorityQueue<Retention> byDeadline =
            new PriorityQueue<>((a, b) -> Long.compare(a.expiresAtNanos(), b.expiresAtNanos()));
    private long nextId = 1;
    private long retainedBytes;
    private long expired;

    RetentionTable(Ticker ticker, long budgetBytes, long maxTtlNanos, ToDoubleFunction<String> shares) {
        if (budgetBytes < 0 || maxTtlNanos <= 0) {
            throw new IllegalArgumentException("retention budget must be >= 0 and max ttl > 0, got " + budgetBytes
                    + " bytes, " + maxTtlNanos + " ns");
        }
        this.ticker = ticker;
        this.budgetBytes = budgetBytes;
        this.maxTtlNanos = maxTtlNanos;
        this.shares = shares;
    }

    void listener(PriorityListener listener) {
        this.listener = listener;
    }

    /**
     * Retains {@code keys} (with their page lengths; repeated keys count once) for {@code ttlNanos} at {@code priority}
     * for {@code tenant}, or throws {@link OrbitException} (INVALID_RETENTION_TTL, RETENTION_OVER_BUDGET) and changes
     * nothing.
     */
    Granted retain(String tenant, List<StateKey> keys, List<Long> lengths, long ttlNanos, int priority) {
        if (keys.size() != lengths.size() || priority < 0) {
            throw new IllegalArgumentException("one length per key and a priority >= 0");
        }
        if (ttlNanos <= 0 || ttlNanos > maxTtlNanos) {
            throw new OrbitException(ErrorReason.INVALID_RETENTION_TTL, "ttl must be in 1.." + maxTtlNanos / 1_000_000
                    + " ms, got " + ttlNanos / 1_000_000 + " ms");
        }
        expire();
        LinkedHashSet<StateKey> distinct = new LinkedHashSet<>();
        long bytes = 0;
        for (int i = 0; i < keys.size(); i++) {
            if (distinct.add(keys.get(i))) {
                bytes += lengths.get(i);
            }
        }
        long held = tenantBytes.getOrDefault(tenant, 0L);
        long budget = budgetOf(tenant);
        if (held + bytes > budget) {
            throw new OrbitException(ErrorReason.RETENTION_OVER_BUDGET, "tenant '" + tenant + "' would retain "
                    + (held + bytes) + " bytes, budget " + budget);
        }
        Retention retention = new Retention(nextId++, tenant, List.copyOf(distinct), bytes, priority,
                ticker.nanos() + ttlNanos);
        byId.put(retention.id(), retention);
        byDeadline.add(retention);
        tenantBytes.merge(tenant, bytes, Long::sum);
        retainedBytes += bytes;
        for (StateKey key : retention.keys()) {
            TreeMap<Integer, Integer> at = priorities.computeIfAbsent(key, k -> new TreeMap<>());
            int before = at.isEmpty() ? NOT_RETAINED : at.lastKey();
            at.merge(priority, 1, Integer::sum);
            if (priority > before) {
                listener.changed(key, priority);
            }
        }
        return new Granted(retention, held + bytes, budget);
    }

    /** Ends {@code tenant}'s retention {@code id}; answers its bytes, or throws UNKNOWN_RETENTION (nothing changes). */
    long release(String tenant, long id) {
        Retention retention = byId.get(id);
        if (retention == null || !retention.tenant().equals(tenant)) {
            throw new OrbitException(ErrorReason.UNKNOWN_RETENTION, "no retention " + Long.toUnsignedString(id)
                    + " of this tenant (ended, expired or never granted)");
        }
        byDeadline.remove(retention);
        end(retention);
        return retention.bytes();
    }

    /** Ends every retention whose deadline passed; answers how many. */
    int expire() {
        long now = ticker.nanos();
        int ended = 0;
        while (!byDeadline.isEmpty() && byDeadline.peek().expiresAtNanos() - now <= 0) {
            end(byDeadline.poll());
            ended++;
        }
        expired += ended;
        return ended;
    }

    private void end(Retention retention) {
        byId.remove(retention.id());
        tenantBytes.merge(retention.tenant(), -retention.bytes(), Long::sum);
        tenantBytes.remove(retention.tenant(), 0L);
        retainedBytes -= retention.bytes();
        for (StateKey key : retention.keys()) {
            TreeMap<Integer, Integer> at = priorities.get(key);
            int before = at.lastKey();
            if (at.merge(retention.priority(), -1, Integer::sum) == 0) {
                at.remove(retention.priority());
            }
            int after = at.isEmpty() ? NOT_RETAINED : at.lastKey();
            if (at.isEmpty()) {
                priorities.remove(key);
            }
            if (after != before) {
                listener.changed(key, after);
            }
        }
    }

    /** The highest priority of the key's live retentions, or {@link #NOT_RETAINED}. */
    int priorityOf(StateKey key) {
        TreeMap<Integer, Integer> at = priorities.get(key);
        return at == null ? NOT_RETAINED : at.lastKey();
    }

    /** The budget {@code tenant} has now (see the design note). */
    long budgetOf(String tenant) {
        long share;
        if (shares != null) {
            share = (long) (budgetBytes * shares.applyAsDouble(tenant));
        } else {
            share = budgetBytes / (tenantBytes.size() + (tenantBytes.containsKey(tenant) ? 0 : 1));
        }
        long othersHold = retainedBytes - tenantBytes.getOrDefault(tenant, 0L);
        return Math.min(share, budgetBytes - othersHold);
    }

    long retainedBytes() {
        return retainedBytes;
    }

    long tenantRetainedBytes(String tenant) {
        return tenantBytes.getOrDefault(tenant, 0L);
    }

    int retentions() {
        return byId.size();
    }

    long expired() {
        return expired;
    }

    /** Live retentions (for tests and the stats). */
    List<Retention> all() {
        return new ArrayList<>(byId.values());
    }
}
