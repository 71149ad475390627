package io.orbitkv.admission;

import io.orbitkv.model.TenantName;
import java.util.Map;
import java.util.TreeMap;

/**
 * Tenants' shares of the query byte budget, from config {@code query.tenant-shares}.
 *
 * <p>Design note: empty (the default) means <em>equal shares among the tenants holding query bytes now</em>: a tenant
 * alone may use the whole budget; with n tenants holding bytes each new reservation of a tenant is checked against
 * budget/n. Shares bound new reservations only; nothing already leased is revoked when another tenant arrives.
 * Configured ({@code "a=0.5,b=0.3"}): each listed tenant gets its fraction; every unlisted tenant (the empty default
 * tenant included) is checked against the remainder {@code 1 - sum}, which may be zero (then it is refused).
 */
public final class TenantShares {
    private final Map<String, Double> fractions;
    private final double remainder;

    private TenantShares(Map<String, Double> fractions) {
        this.fractions = Map.copyOf(fractions);
        double sum = 0;
        for (double f : fractions.values()) {
            sum += f;
        }
        this.remainder = Math.max(0, 1 - sum);
    }

    public static TenantShares equalShares() {
        return new TenantShares(Map.of());
    }

    /** Parses {@code "a=0.5,b=0.5"}; empty text gives equal shares. Throws IllegalArgumentException naming the fault. */
    public static TenantShares parse(String text) {
        Map<String, Double> fractions = new TreeMap<>();
        if (text == null || text.isBlank()) {
            return equalShares();
        }
        double sum = 0;
        for (String part : text.split(",")) {
            String[] kv = part.strip().split("=", -1);
            if (kv.length != 2 || kv[0].isBlank() || !TenantName.valid(kv[0].strip())) {
                throw new IllegalArgumentException("expected tenant=fraction with a tenant of [A-Za-z0-9._-]{1,64}, got '" + part + "'");
            }
            double f;
            try {
                f = Double.parseDouble(kv[1].strip());
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("share of tenant '" + kv[0].strip() + "' is not a number: '" + kv[1] + "'");
            }
            if (!(f > 0 && f <= 1)) {
                throw new IllegalArgumentException("share of tenant '" + kv[0].strip() + "' must be in (0, 1], got " + f);
            }
            if (fractions.put(kv[0].strip(), f) != null) {
                throw new IllegalArgumentException("tenant '" + kv[0].strip() + "' listed twice");
            }
            sum += f;
        }
        if (sum > 1 + 1e-9) {
            throw new IllegalArgumentException("tenant shares add up to " + sum + ", more than 1");
        }
        return new TenantShares(fractions);
    }

    public boolean configured() {
        return !fractions.isEmpty();
    }

    /** The configured fraction of {@code tenant} (the remainder for an unlisted one); only when {@link #configured}. */
    public double fractionOf(String tenant) {
        return fractions.getOrDefault(tenant, remainder);
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof TenantShares that && fractions.equals(that.fractions);
    }

    @Override
    public int hashCode() {
        return fractions.hashCode();
    }

    @Override
    public String toString() {
        return fractions.isEmpty() ? "TenantShares[equal]" : "TenantShares" + fractions;
    }
}
