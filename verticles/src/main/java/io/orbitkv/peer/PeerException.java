package io.orbitkv.peer;

import io.orbitkv.protocol.peer.PeerRejection;

/** A typed failure of a peer fetch: a rejection before payload, or a failure after submission. */
public final class PeerException extends RuntimeException {
    public enum Kind {
        /** The source refused the reserve (nothing moved; the caller may replan). */
        REJECTED,
        /** The source or its endpoint is not reachable (before payload). */
        UNREACHABLE,
        /** The transfer failed after submission (fenced before the slots were freed). */
        TRANSFER_FAILED,
        /** The waiting budget ran out. */
        TIMEOUT,
        /** The bytes did not match the source's CRC32C: never served. */
        CHECKSUM_MISMATCH
    }

    private final Kind kind;
    private final PeerRejection rejection;

    public PeerException(Kind kind, String message) {
        this(kind, PeerRejection.PEER_REJECTION_UNSPECIFIED, message);
    }

    public PeerException(Kind kind, PeerRejection rejection, String message) {
        super(message, null, false, false);
        this.kind = kind;
        this.rejection = rejection;
    }

    public Kind kind() {
        return kind;
    }

    public PeerRejection rejection() {
        return rejection;
    }

    /** True when nothing moved: the caller may replan with another route. */
    public boolean beforePayload() {
        return kind == Kind.REJECTED || kind == Kind.UNREACHABLE;
    }
}
