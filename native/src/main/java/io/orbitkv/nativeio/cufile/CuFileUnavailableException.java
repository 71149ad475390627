package io.orbitkv.nativeio.cufile;

/** The cuFile route cannot run in this process; carries the cause the probe kept ({@link CuFile#unavailabilityCause()}). */
public final class CuFileUnavailableException extends UnsupportedOperationException {
    private static final long serialVersionUID = 1L;

    public CuFileUnavailableException(String what, Throwable cause) {
        super(what + ": cuFile unavailable: " + cause.getMessage(), cause);
    }
}
