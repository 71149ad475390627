package io.orbitkv.nativeio.mooncake;

/** A Transfer Engine call that reported an error: the call, its raw return value and the typed error. */
public final class MooncakeException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final String operation;
    private final int returnCode;
    private final TransferEngineError error;

    public MooncakeException(String operation, int returnCode, String detail) {
        super(operation + " returned " + returnCode + " (" + TransferEngineError.of(returnCode)
                + (detail == null || detail.isEmpty() ? "" : ": " + detail) + ")");
        this.operation = operation;
        this.returnCode = returnCode;
        this.error = TransferEngineError.of(returnCode);
    }

    public String operation() {
        return operation;
    }

    public int returnCode() {
        return returnCode;
    }

    public TransferEngineError error() {
        return error;
    }
}
