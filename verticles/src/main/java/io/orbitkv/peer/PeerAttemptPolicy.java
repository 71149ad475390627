package io.orbitkv.peer;

import io.orbitkv.common.ConfigException;
import io.orbitkv.common.ConfigValues;
import io.orbitkv.model.plan.TimeEstimate;
import java.util.concurrent.TimeUnit;

/**
 * How long one peer attempt (a segment's source lease, its transfer and the checksum-verified seal) may last before the
 * requester gives up on it: the transfer is fenced, the slots freed, and the planner takes another medium (local SSD,
 * local DRAM, another peer) within the same waiting budget.
 *
 * <p>Design note: a peer can hang instead of failing (SIGSTOP, a stalled link, a full socket buffer); nothing on the
 * connection says so, only the requester's own deadline ends the attempt. Were that deadline the demand's whole
 * waiting budget, the fence would come when nothing is left for a fallback, and a demand whose pages also lie on local
 * SSD or another peer would end MISS. So an attempt is bounded by the least of:
 * <ul>
 *   <li>what the demand has left of its waiting budget, less a reserve for the fallback route
 *       ({@code peer.fallback-reserve-ms}; at most half of what is left, so the peer attempt keeps the other half);</li>
 *   <li>the planner's expected time for the plan times {@value #MARGIN}, never below {@link #FLOOR_NANOS}, when it
 *       had an estimate (route selection on): a transfer far slower than its route's history is treated as hung;</li>
 *   <li>the configured ceiling ({@code peer.attempt-timeout-ms}; 0: none);</li>
 *   <li>the owner's cap: the source's longest lease ({@code peer.max-lease-ms}, the source unpins at its expiry
 *       anyway) and, for a caller that names no waiting budget, the owner's default budget.</li>
 * </ul>
 * The bound covers reserve to READY; the source lease is asked for exactly as long. What happens at the bound is the
 * same as for a killed source: the receive is fenced first (nothing more can land), then the slots are aborted (nothing
 * of it is sealed), and only then does the segment fail; the planner replans only after that (its executor waits for
 * the submit to complete), so a segment never moves to another medium while its peer work may still write.
 *
 * @param ceilingMillis         the longest any peer attempt may take; 0: no ceiling of its own
 * @param fallbackReserveMillis the part of a demand's remaining waiting budget a peer attempt leaves for the fallback
 */
public record PeerAttemptPolicy(long ceilingMillis, long fallbackReserveMillis) {
    /** How many times the expected time a peer attempt may take before it counts as hung. */
    public static final int MARGIN = 4;
    /** The least an estimate-based bound allows (short estimates are noisy: a GC pause must not look like a hang). */
    public static final long FLOOR_NANOS = TimeUnit.MILLISECONDS.toNanos(250);
    public static final long CEILING_DEFAULT_MS = 0;
    public static final long FALLBACK_RESERVE_DEFAULT_MS = 1000;
    public static final PeerAttemptPolicy DEFAULT = new PeerAttemptPolicy(CEILING_DEFAULT_MS, FALLBACK_RESERVE_DEFAULT_MS);

    public PeerAttemptPolicy {
        if (ceilingMillis < 0) {
            throw new IllegalArgumentException("peer attempt ceiling " + ceilingMillis + " ms is negative");
        }
        if (fallbackReserveMillis < 0) {
            throw new IllegalArgumentException("fallback reserve " + fallbackReserveMillis + " ms is negative");
        }
    }

    /**
     * The bound of one attempt, in nanos from its start.
     *
     * @param remainingNanos what the demand has left of its waiting budget; {@link Long#MAX_VALUE}: it names none (no
     *                       reserve is kept then); zero or less: spent
     * @param expected       the planner's expected time for the plan (unknown: no estimate-based bound)
     * @param capNanos       the owner's cap (&gt; 0)
     * @return the bound (&gt; 0), or 0 when the budget is spent and the attempt must not start
     */
    public long attemptNanos(long remainingNanos, TimeEstimate expected, long capNanos) {
        if (capNanos <= 0) {
            throw new IllegalArgumentException("cap " + capNanos + " ns must be > 0");
        }
        if (remainingNanos <= 0) {
            return 0;
        }
        long bound = capNanos;
        if (ceilingMillis > 0) {
            bound = Math.min(bound, TimeUnit.MILLISECONDS.toNanos(ceilingMillis));
        }
        if (expected.known()) {
            long upper = expected.upperNanos();
            long scaled = upper > Long.MAX_VALUE / MARGIN ? Long.MAX_VALUE : upper * MARGIN;
            bound = Math.min(bound, Math.max(FLOOR_NANOS, scaled));
        }
        if (remainingNanos != Long.MAX_VALUE) {
            long reserve = Math.min(TimeUnit.MILLISECONDS.toNanos(fallbackReserveMillis), remainingNanos / 2);
            bound = Math.min(bound, Math.max(1, remainingNanos - reserve));
        }
        return bound;
    }

    /**
     * The {@code peer.attempt-timeout-ms} and {@code peer.fallback-reserve-ms} keys: how a requester bounds one peer attempt: a ceiling of its own (0: none; never above {@code peer.max-lease-ms},
     * which caps it anyway) and the reserve it leaves of a demand's waiting budget for the fallback route.
     */
    public static PeerAttemptPolicy fromConfig(ConfigValues v) {
        long ceiling = v.integer("peer.attempt-timeout-ms", 0, 600_000);
        long maxLease = v.integer("peer.max-lease-ms", 10, 600_000);
        if (ceiling > maxLease) {
            throw new ConfigException("peer.attempt-timeout-ms", "must not exceed peer.max-lease-ms (" + maxLease
                    + "): a source lease never lasts longer, got " + ceiling);
        }
        if (ceiling > 0 && ceiling < 10) {
            throw new ConfigException("peer.attempt-timeout-ms", "must be 0 (no ceiling) or at least 10 ms, got "
                    + ceiling);
        }
        return new PeerAttemptPolicy(ceiling, v.integer("peer.fallback-reserve-ms", 0, 600_000));
    }
}
