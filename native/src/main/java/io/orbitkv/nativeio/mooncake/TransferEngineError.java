package io.orbitkv.nativeio.mooncake;

/**
 * The Transfer Engine's error codes. Calls returning {@code int} report them negated ({@code ERR_*} in
 * {@code error.h}); calls returning a {@code Status} report its positive {@code Status::Code}. Both map here by
 * absolute value.
 */
public enum TransferEngineError {
    INVALID_ARGUMENT(1),
    TOO_MANY_REQUESTS(2),
    ADDRESS_NOT_REGISTERED(3),
    BATCH_BUSY(4),
    DEVICE_NOT_FOUND(6),
    ADDRESS_OVERLAPPED(7),
    NOT_SUPPORTED_TRANSPORT(8),
    DNS(101),
    SOCKET(102),
    MALFORMED_JSON(103),
    REJECT_HANDSHAKE(104),
    METADATA(200),
    ENDPOINT(201),
    CONTEXT(202),
    NUMA(300),
    CLOCK(301),
    MEMORY(302),
    NOT_IMPLEMENTED(303),
    /** A code this binding does not know (a newer engine), or a call that reports failure without a code. */
    UNKNOWN(0);

    private final int code;

    TransferEngineError(int code) {
        this.code = code;
    }

    /** The positive code ({@code Status::Code}; {@code -ERR_*}). */
    public int code() {
        return code;
    }

    static TransferEngineError of(int rc) {
        int code = Math.abs(rc);
        if (code == 999) {
            return NOT_IMPLEMENTED; // Status::Code::kNotImplemented; ERR_NOT_IMPLEMENTED is -303
        }
        for (TransferEngineError error : values()) {
            if (error.code == code && error != UNKNOWN) {
                return error;
            }
        }
        return UNKNOWN;
    }
}
