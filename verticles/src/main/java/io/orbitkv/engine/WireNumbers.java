package io.orbitkv.engine;

import io.orbitkv.common.OrbitException;
import io.orbitkv.protocol.engine.ErrorReason;

/**
 * Unsigned protobuf numbers, checked before they reach arithmetic. Java reads {@code uint32} into an {@code int} and
 * {@code uint64} into a {@code long} with the same bits, so values at or above 2^31 / 2^63 look negative; these
 * checks compare them unsigned against an explicit bound and name the field and its unsigned value when refusing.
 */
final class WireNumbers {
    private WireNumbers() {}

    /** A {@code uint64} in {@code [0, max]} (unsigned), or the typed refusal. */
    static long u64AtMost(String field, long value, long max, ErrorReason reason) {
        if (Long.compareUnsigned(value, max) > 0) {
            throw new OrbitException(reason, field + " " + Long.toUnsignedString(value) + " is out of range (at most "
                    + Long.toUnsignedString(max) + ")");
        }
        return value;
    }

    /** A {@code uint64} in {@code [min, max]} (unsigned), or the typed refusal. */
    static long u64Within(String field, long value, long min, long max, ErrorReason reason) {
        if (Long.compareUnsigned(value, min) < 0 || Long.compareUnsigned(value, max) > 0) {
            throw new OrbitException(reason, field + " must be " + Long.toUnsignedString(min) + ".."
                    + Long.toUnsignedString(max) + ", got " + Long.toUnsignedString(value));
        }
        return value;
    }

    /** A {@code uint32} in {@code [0, max]} (unsigned), widened to a long, or the typed refusal. */
    static long u32AtMost(String field, int value, long max, ErrorReason reason) {
        return u64AtMost(field, Integer.toUnsignedLong(value), max, reason);
    }

    /** A {@code uint32} in {@code [min, max]} (unsigned), widened to a long, or the typed refusal. */
    static long u32Within(String field, int value, long min, long max, ErrorReason reason) {
        return u64Within(field, Integer.toUnsignedLong(value), min, max, reason);
    }
}
