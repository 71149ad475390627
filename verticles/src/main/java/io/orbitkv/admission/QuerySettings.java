package io.orbitkv.admission;

import io.orbitkv.common.ConfigException;
import io.orbitkv.common.ConfigValues;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The admission role's section of the Manager's configuration ({@code query.*}): bounds on queries, their waiting
 * budget, how long answers stay pollable, and the byte budgets as fractions of the pool (or of the query budget).
 *
 * @param maxOutstandingPerInstance queries of one engine instance in the Manager at once
 * @param maxOutstanding            queries in the Manager at once
 * @param waitBudgetMillis          the longest a query waits for its state
 * @param replyTtlMillis            how long an answered query stays pollable
 * @param byteBudgetFraction        of the pool: bytes demand leases may hold
 * @param instanceBudgetFraction    of the query byte budget: what one engine instance's demand leases may hold
 * @param speculativeFraction       of the pool: the cap on speculative warming leases
 * @param tenantShares              tenants' shares of the query byte budget (and of the retention budget)
 * @param answered                  answered queries kept pollable at most
 */
public record QuerySettings(int maxOutstandingPerInstance, int maxOutstanding, long waitBudgetMillis,
                            long replyTtlMillis, double byteBudgetFraction, double instanceBudgetFraction,
                            double speculativeFraction, TenantShares tenantShares, AnsweredBounds answered) {

    /** The keys and defaults this section adds to the Manager's configuration. */
    public static final Map<String, String> DEFAULTS = Map.ofEntries(
            Map.entry("query.max-outstanding-per-instance", "256"),
            Map.entry("query.max-outstanding", "8192"),
            Map.entry("query.max-answered-per-instance", "1024"),
            Map.entry("query.max-answered", "32768"),
            Map.entry("query.wait-budget-ms", "5000"),
            Map.entry("query.reply-ttl-ms", "30000"),
            Map.entry("query.byte-budget-fraction", "0.75"),
            // Of the query byte budget: demand lease bytes one engine instance may hold.
            Map.entry("query.instance-budget-fraction", "1.0"),
            // Of the pool: the cap on speculative warming leases (they also only use what demand leaves of the budget).
            Map.entry("query.speculative-fraction", "0.1"),
            // "a=0.5,b=0.5": tenants' shares of the query byte budget; empty = equal shares among active tenants.
            Map.entry("query.tenant-shares", ""));

    /**
     * Answered queries kept pollable ({@code query.reply-ttl-ms}): at most {@code perInstance} per engine instance and
     * {@code total} in the Manager; beyond, the eldest answer without a lease is forgotten early, else a new query is
     * refused TOO_MANY_ANSWERED.
     */
    public record AnsweredBounds(int perInstance, int total) {}

    public static QuerySettings fromConfig(ConfigValues v) {
        return new QuerySettings(
                (int) v.integer("query.max-outstanding-per-instance", 1, 1 << 20),
                (int) v.integer("query.max-outstanding", 1, 1 << 24),
                v.integer("query.wait-budget-ms", 0, 3600_000),
                v.integer("query.reply-ttl-ms", 100, 3600_000),
                v.fraction("query.byte-budget-fraction"),
                v.fraction("query.instance-budget-fraction"),
                v.fraction("query.speculative-fraction"),
                tenantShares(v, "query.tenant-shares"),
                new AnsweredBounds((int) v.integer("query.max-answered-per-instance", 1, 1 << 20),
                        (int) v.integer("query.max-answered", 1, 1 << 24)));
    }

    private static TenantShares tenantShares(ConfigValues v, String key) {
        try {
            return TenantShares.parse(v.string(key));
        } catch (IllegalArgumentException e) {
            throw new ConfigException(key, e.getMessage());
        }
    }

    /** The admission role's settings: these bounds, and the byte budgets of a pool of {@code poolBytes}. */
    public AdmissionVerticle.Settings admissionSettings(long poolBytes) {
        return AdmissionVerticle.Settings.builder()
                .maxOutstanding(maxOutstandingPerInstance, maxOutstanding)
                .waitBudgetNanos(TimeUnit.MILLISECONDS.toNanos(waitBudgetMillis))
                .replyTtlNanos(TimeUnit.MILLISECONDS.toNanos(replyTtlMillis))
                .leaseBudgetBytes((long) (poolBytes * byteBudgetFraction))
                .instanceBudgetBytes((long) (poolBytes * byteBudgetFraction * instanceBudgetFraction))
                .speculativeBudgetBytes((long) (poolBytes * speculativeFraction))
                .tenantShares(tenantShares)
                .maxAnswered(answered.perInstance(), answered.total())
                .build();
    }
}
