package io.orbitkv.client;

import io.orbitkv.protocol.engine.ErrorReason;

/** A call the Manager refused: the typed reason, the gRPC status and the Manager's explanation. */
public final class OrbitKvException extends RuntimeException {
    private final ErrorReason reason;
    private final String grpcStatus;

    public OrbitKvException(ErrorReason reason, String grpcStatus, String message) {
        super(message);
        this.reason = reason;
        this.grpcStatus = grpcStatus;
    }

    /** ERROR_REASON_UNSPECIFIED when the refusal did not come from the Manager's checks (transport, size limit...). */
    public ErrorReason reason() {
        return reason;
    }

    public String grpcStatus() {
        return grpcStatus;
    }
}
