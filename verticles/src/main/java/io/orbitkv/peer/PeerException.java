package io.orbitkv.peer;

import io.orbitkv.common.TypedFailure;
import io.orbitkv.protocol.peer.PeerRejection;

/**
 * A typed failure of a peer fetch: a rejection before payload, or a failure after submission. On the event bus it
 * travels as code {@code 5000 + 100 * (kind + 1) + rejection} ({@link PeerProxy} maps it back).
 */
public final class PeerException extends RuntimeException implements TypedFailure {
    private static final int CODE_BASE = 5000;

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

    @Override
    public int failureCode() {
        return CODE_BASE + 100 * (kind.ordinal() + 1) + rejection.getNumber();
    }

    @Override
    public String detail() {
        return getMessage();
    }

    /** The exception a {@link #failureCode} and its detail stand for; null when the code is not a peer failure's. */
    static PeerException fromFailure(int code, String detail) {
        int kind = (code - CODE_BASE) / 100 - 1;
        PeerRejection rejection = PeerRejection.forNumber((code - CODE_BASE) % 100);
        if (code < CODE_BASE || kind < 0 || kind >= Kind.values().length || rejection == null) {
            return null;
        }
        return new PeerException(Kind.values()[kind], rejection, detail);
    }

    /** True when nothing moved: the caller may replan with another route. */
    public boolean beforePayload() {
        return kind == Kind.REJECTED || kind == Kind.UNREACHABLE;
    }
}
