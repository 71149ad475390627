package io.orbitkv.model.cost;

/**
 * Logarithmic bucket of a byte or descriptor count, with an explicit {@link #UNKNOWN} bucket.
 *
 * <p>Design note: a known count {@code n} falls in bucket {@code 64 - Long.numberOfLeadingZeros(n)}, so bucket 0 holds
 * exactly zero, bucket 1 holds 1, and bucket {@code b >= 1} holds {@code [2^(b-1), 2^b)}. An unknown count is not zero
 * and never lands in bucket 0: it has its own bucket, which is also never comparable in shadow decisions.
 */
public record SizeBucket(int log2) {

    private static final int UNKNOWN_LOG2 = -1;

    /** The bucket of a count that is not known. */
    public static final SizeBucket UNKNOWN = new SizeBucket(UNKNOWN_LOG2);

    /** Every known bucket, so that {@link #of} allocates nothing and equal buckets are mostly the same instance. */
    private static final SizeBucket[] KNOWN = new SizeBucket[Long.SIZE + 1];

    static {
        for (int b = 0; b <= Long.SIZE; b++) {
            KNOWN[b] = new SizeBucket(b);
        }
    }

    public SizeBucket {
        if (log2 < UNKNOWN_LOG2 || log2 > Long.SIZE) {
            throw new IllegalArgumentException("log2 bucket out of range: " + log2);
        }
    }

    /** The bucket of a known, non-negative count. */
    public static SizeBucket of(long count) {
        if (count < 0) {
            throw new IllegalArgumentException("count must be >= 0 (use SizeBucket.UNKNOWN for unknown): " + count);
        }
        return KNOWN[Long.SIZE - Long.numberOfLeadingZeros(count)];
    }

    // Plain equals and hashCode: estimator and shadow lookups compare buckets for every observation.
    @Override
    public boolean equals(Object o) {
        return o == this || o instanceof SizeBucket other && other.log2 == log2;
    }

    @Override
    public int hashCode() {
        return log2;
    }

    public boolean isKnown() {
        return log2 != UNKNOWN_LOG2;
    }

    @Override
    public String toString() {
        return isKnown() ? "SizeBucket[log2=" + log2 + "]" : "SizeBucket[UNKNOWN]";
    }
}
