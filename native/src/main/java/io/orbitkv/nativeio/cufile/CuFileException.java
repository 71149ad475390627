package io.orbitkv.nativeio.cufile;

/** A cuFile call that failed: its {@code CUfileOpError} (or errno for reads) and the CUDA driver result. */
public final class CuFileException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final int error;
    private final int cudaResult;

    public CuFileException(String operation, int error, int cudaResult) {
        super(operation + " failed: cuFile error " + error + ", CUDA result " + cudaResult);
        this.error = error;
        this.cudaResult = cudaResult;
    }

    public int error() {
        return error;
    }

    public int cudaResult() {
        return cudaResult;
    }
}
