package io.orbitkv.model.plan;

/**
 * A byte count that may be unknown. Unknown is its own value, never zero: a peer that did not advertise a size has an
 * unknown size, and no estimate or budget may treat it as free.
 */
public record ByteCount(long bytes) {
    private static final long UNKNOWN_BYTES = -1;

    public static final ByteCount UNKNOWN = new ByteCount(UNKNOWN_BYTES);

    public ByteCount {
        if (bytes < UNKNOWN_BYTES) {
            throw new IllegalArgumentException("byte count " + bytes + " is negative");
        }
    }

    /** A known count; {@code bytes} must be {@code >= 0}. */
    public static ByteCount of(long bytes) {
        if (bytes < 0) {
            throw new IllegalArgumentException("a known byte count must be >= 0, got " + bytes
                    + " (use ByteCount.UNKNOWN for an unknown one)");
        }
        return new ByteCount(bytes);
    }

    public boolean isKnown() {
        return bytes != UNKNOWN_BYTES;
    }

    /** The count; only for a known one. */
    public long knownBytes() {
        if (!isKnown()) {
            throw new IllegalStateException("the byte count is unknown");
        }
        return bytes;
    }

    @Override
    public String toString() {
        return isKnown() ? bytes + " bytes" : "unknown bytes";
    }
}
