package io.orbitkv.admission;

import io.orbitkv.common.OrbitException;
import io.orbitkv.protocol.engine.ErrorReason;
import java.util.HashMap;
import java.util.Map;

/**
 * Byte budgets of query leases: the query byte budget, per-instance budgets, tenant shares and the speculative cap.
 *
 * <p>Design note: a demand's bytes are charged when its pins are requested (a reservation) and stay charged while its
 * lease lives; a refused or lost reservation is refunded at once, so a partial reservation never outlives the
 * evaluation that made it. Checks come before anything is pinned: {@link #requireHeadroom} before a demand is even
 * compared with what is resident (a share with no room refuses at once), {@link #check} with the exact bytes of the
 * chosen pages before they are pinned.
 *
 * <p>Speculative warming (a demand with {@code speculative}) holds DRAM pool pins only: it claims no engine (HBM)
 * pages, so it is not charged to the instance's or the tenant's budget. It is capped by {@code speculativeBudgetBytes}
 * and may only use what demand leaves of the query byte budget, so it is the first to be refused when bytes are tight,
 * and a demand is never refused because of speculative bytes (demand checks count demand bytes only). Worst case the
 * pins of both add up to query budget + speculative cap.
 *
 * <p>Confidence: a speculative demand with confidence {@code c} may bring speculative bytes in use up to {@code c} of
 * the speculative cap; 0 means unknown and admits up to the whole cap. Lower confidence therefore gets refused first as
 * the cap fills ({@link #admitSpeculation}).
 *
 * <p>Confined to the admission role's event loop.
 */
final class QueryBudgets {
    enum SpeculationAdmission { ADMITTED, REFUSED_BY_CONFIDENCE, REFUSED_BY_BUDGET }

    private final long queryBudgetBytes;
    private final long instanceBudgetBytes;
    private final long speculativeBudgetBytes;
    private final TenantShares shares;
    private final Map<Long, Long> byInstance = new HashMap<>();
    private final Map<String, Long> byTenant = new HashMap<>();
    private long demandBytes;
    private long speculativeBytes;

    QueryBudgets(long queryBudgetBytes, long instanceBudgetBytes, long speculativeBudgetBytes, TenantShares shares) {
        this.queryBudgetBytes = queryBudgetBytes;
        this.instanceBudgetBytes = instanceBudgetBytes;
        this.speculativeBudgetBytes = speculativeBudgetBytes;
        this.shares = shares;
    }

    /**
     * Whether {@code requestBytes} more speculative bytes are admitted with {@code speculativeInUseBytes} already held
     * against {@code speculativeBudgetBytes}, scaled by {@code confidence} (0 = unknown = 1). Pure arithmetic.
     */
    static SpeculationAdmission admitSpeculation(float confidence, long requestBytes, long speculativeInUseBytes,
                                                 long speculativeBudgetBytes) {
        if (!(confidence >= 0 && confidence <= 1)) {
            throw new IllegalArgumentException("confidence " + confidence + " is outside [0, 1]");
        }
        long after = speculativeInUseBytes + requestBytes;
        if (after > speculativeBudgetBytes || after < 0) {
            return SpeculationAdmission.REFUSED_BY_BUDGET;
        }
        double scale = confidence == 0 ? 1.0 : confidence;
        return after <= (long) Math.floor(speculativeBudgetBytes * scale) ? SpeculationAdmission.ADMITTED
                : SpeculationAdmission.REFUSED_BY_CONFIDENCE;
    }

    /** Refuses, before any lookup, a demand whose budgets have no byte left. */
    void requireHeadroom(long instance, String tenant, boolean speculative) {
        check(instance, tenant, speculative, 1);
    }

    /** Refuses with BUDGET_EXCEEDED if charging {@code bytes} would overrun any budget the demand counts against. */
    void check(long instance, String tenant, boolean speculative, long bytes) {
        if (speculative) {
            if (speculativeBytes + bytes > speculativeBudgetBytes) {
                throw refuse("speculative leases would hold " + (speculativeBytes + bytes) + " bytes, cap " + speculativeBudgetBytes);
            }
            if (demandBytes + speculativeBytes + bytes > queryBudgetBytes) {
                throw refuse("speculative warming yields to demand: " + demandBytes + " demand + " + speculativeBytes
                        + " speculative + " + bytes + " bytes exceed the query byte budget " + queryBudgetBytes);
            }
            return;
        }
        if (demandBytes + bytes > queryBudgetBytes) {
            throw refuse("leases would pin " + (demandBytes + bytes) + " bytes, query byte budget " + queryBudgetBytes);
        }
        long mine = byInstance.getOrDefault(instance, 0L);
        if (mine + bytes > instanceBudgetBytes) {
            throw refuse("this instance's leases would pin " + (mine + bytes) + " bytes, instance budget " + instanceBudgetBytes);
        }
        long tenantHeld = byTenant.getOrDefault(tenant, 0L);
        long share = tenantShareBytes(tenant);
        if (tenantHeld + bytes > share) {
            throw refuse("tenant '" + tenant + "' leases would pin " + (tenantHeld + bytes) + " bytes, its share " + share);
        }
    }

    long tenantShareBytes(String tenant) {
        if (shares.configured()) {
            return (long) (queryBudgetBytes * shares.fractionOf(tenant));
        }
        int active = byTenant.containsKey(tenant) ? byTenant.size() : byTenant.size() + 1;
        return queryBudgetBytes / active;
    }

    void charge(long instance, String tenant, boolean speculative, long bytes) {
        if (speculative) {
            speculativeBytes += bytes;
            return;
        }
        demandBytes += bytes;
        byInstance.merge(instance, bytes, Long::sum);
        byTenant.merge(tenant, bytes, Long::sum);
    }

    void refund(long instance, String tenant, boolean speculative, long bytes) {
        if (speculative) {
            speculativeBytes -= bytes;
            return;
        }
        demandBytes -= bytes;
        byInstance.merge(instance, -bytes, Long::sum);
        byInstance.remove(instance, 0L);
        byTenant.merge(tenant, -bytes, Long::sum);
        byTenant.remove(tenant, 0L);
    }

    long demandBytes() {
        return demandBytes;
    }

    long speculativeBytes() {
        return speculativeBytes;
    }

    /** True when nothing is charged anywhere (what tests assert after every scenario). */
    boolean isEmpty() {
        return demandBytes == 0 && speculativeBytes == 0 && byInstance.isEmpty() && byTenant.isEmpty();
    }

    private static OrbitException refuse(String message) {
        return new OrbitException(ErrorReason.BUDGET_EXCEEDED, message);
    }
}
