package io.orbitkv.model.cost;

import java.util.OptionalLong;

/**
 * Bytes attributed to one observation: logical state bytes attempted and physical I/O bytes known at the owner.
 * Either may be unknown (a raw image without unpadded metadata, a partial failure); unknown is counted separately and
 * never reported as zero.
 */
public record ObservedBytes(OptionalLong logicalBytes, OptionalLong ioBytes) {

    public static final ObservedBytes UNKNOWN = new ObservedBytes(OptionalLong.empty(), OptionalLong.empty());

    public ObservedBytes {
        requireNonNegative(logicalBytes, "logicalBytes");
        requireNonNegative(ioBytes, "ioBytes");
    }

    public static ObservedBytes of(long logicalBytes, long ioBytes) {
        return new ObservedBytes(OptionalLong.of(logicalBytes), OptionalLong.of(ioBytes));
    }

    public static ObservedBytes logicalOnly(long logicalBytes) {
        return new ObservedBytes(OptionalLong.of(logicalBytes), OptionalLong.empty());
    }

    public static ObservedBytes ioOnly(long ioBytes) {
        return new ObservedBytes(OptionalLong.empty(), OptionalLong.of(ioBytes));
    }

    private static void requireNonNegative(OptionalLong value, String name) {
        if (value == null) {
            throw new NullPointerException(name);
        }
        if (value.isPresent() && value.getAsLong() < 0) {
            throw new IllegalArgumentException(name + " must be >= 0: " + value.getAsLong());
        }
    }
}
