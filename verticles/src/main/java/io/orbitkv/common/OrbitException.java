package io.orbitkv.common;

import io.orbitkv.protocol.engine.ErrorReason;

/**
 * A typed refusal: the reason is part of the wire contract (engine.proto ErrorReason) and becomes both the gRPC status
 * message prefix and a rejection counter label. Carries no stack trace: refusals are expected control flow.
 */
public final class OrbitException extends RuntimeException implements TypedFailure {
    private final ErrorReason reason;

    public OrbitException(ErrorReason reason, String message) {
        super(reason.name() + ": " + message, null, false, false);
        this.reason = reason;
    }

    public ErrorReason reason() {
        return reason;
    }

    @Override
    public int failureCode() {
        return reason.getNumber();
    }

    /** The message without the reason prefix. */
    @Override
    public String detail() {
        String message = getMessage();
        int colon = message.indexOf(": ");
        return colon < 0 ? message : message.substring(colon + 2);
    }
}
