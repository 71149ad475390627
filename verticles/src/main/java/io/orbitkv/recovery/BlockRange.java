package io.orbitkv.recovery;

import io.orbitkv.recovery.RecoveryException.Reason;

/**
 * A non-empty, half-open run of block positions {@code [startInclusive, endExclusive)}; position p holds tokens
 * {@code [p*P, (p+1)*P)}.
 */
public record BlockRange(int startInclusive, int endExclusive) {

    public BlockRange {
        if (startInclusive < 0 || endExclusive <= startInclusive) {
            throw new RecoveryException(Reason.MALFORMED_RANGE,
                    "block range [" + startInclusive + ", " + endExclusive + ") is empty or starts below zero");
        }
    }

    public int length() {
        return endExclusive - startInclusive;
    }

    public boolean contains(int position) {
        return position >= startInclusive && position < endExclusive;
    }

    @Override
    public String toString() {
        return "[" + startInclusive + ", " + endExclusive + ")";
    }
}
