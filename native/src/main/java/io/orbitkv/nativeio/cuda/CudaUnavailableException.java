package io.orbitkv.nativeio.cuda;

/**
 * The CUDA route cannot run in this process: the runtime library is missing, there is no driver, or no device. The
 * cause is the one the probe kept ({@link CudaRuntime#unavailabilityCause()}), so every refusal names the same reason.
 */
public final class CudaUnavailableException extends UnsupportedOperationException {
    private static final long serialVersionUID = 1L;

    public CudaUnavailableException(String what, Throwable cause) {
        super(what + ": CUDA unavailable: " + cause.getMessage(), cause);
    }
}
