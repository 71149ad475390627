package io.orbitkv.ssd;

import io.orbitkv.common.FailureKind;

/**
 * Typed failures of SSD lookups and reads. The code travels as the event-bus failure code (see {@link SsdProxy}); a
 * read never returns wrong bytes: every doubt is one of these.
 */
public enum SsdFailure implements FailureKind {
    /** The key has no committed extent. */
    NOT_FOUND(4001),
    /** The key is committed, but under another generation than the one the caller holds evidence for. */
    STALE_GENERATION(4002),
    /** The payload read back did not match its CRC32C: the extent was dropped from the index (counted). */
    CHECKSUM_MISMATCH(4003),
    /** The destination segment is smaller than the page or read-only. */
    DESTINATION_TOO_SMALL(4004),
    /** The lease is unknown or already released. */
    UNKNOWN_LEASE(4005),
    /** Every bounce buffer is in use (only unaligned destinations need one); retry later. */
    READ_BUSY(4006),
    /** The restore lane's bounded queue was full. */
    QUEUE_FULL(4007),
    /** The read failed in the kernel (errno in the message). */
    IO_ERROR(4008),
    /** The store is closing or closed. */
    CLOSED(4009);

    private final int code;

    SsdFailure(int code) {
        this.code = code;
    }

    /** Stable numeric code, disjoint from engine.proto ErrorReason numbers. */
    public int code() {
        return code;
    }

    /** The failure for {@code code}, or null when the code is not an SSD failure. */
    public static SsdFailure forCode(int code) {
        for (SsdFailure failure : values()) {
            if (failure.code == code) {
                return failure;
            }
        }
        return null;
    }
}
