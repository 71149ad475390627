package io.orbitkv.nativeio.cuda;

/**
 * A CUDA runtime call that returned an error: the {@code cudaError_t} code, its name (e.g.
 * {@code cudaErrorInsufficientDriver}) and the call that returned it.
 */
public final class CudaException extends RuntimeException {
    /** {@code cudaErrorInsufficientDriver}: the runtime found no (or too old a) driver. */
    public static final int INSUFFICIENT_DRIVER = 35;
    /** {@code cudaErrorNoDevice}. */
    public static final int NO_DEVICE = 100;

    private static final long serialVersionUID = 1L;

    private final int code;
    private final String errorName;
    private final String operation;

    public CudaException(String operation, int code, String errorName, String description) {
        super(operation + " returned " + code + " (" + errorName + (description == null || description.isEmpty() ? ""
                : ": " + description) + ")");
        this.code = code;
        this.errorName = errorName;
        this.operation = operation;
    }

    public int code() {
        return code;
    }

    public String errorName() {
        return errorName;
    }

    public String operation() {
        return operation;
    }
}
