package io.orbitkv.nativeio.mooncake;

/**
 * The Transfer Engine cannot run in this process: the library was not built into this build, could not be loaded, or
 * lacks a symbol. The cause is the one the probe kept ({@link MooncakeTransferEngine#unavailabilityCause()}), so every
 * refusal names the same reason.
 */
public final class MooncakeUnavailableException extends UnsupportedOperationException {
    private static final long serialVersionUID = 1L;

    public MooncakeUnavailableException(String what, Throwable cause) {
        super(what + ": Mooncake Transfer Engine unavailable: " + cause.getMessage(), cause);
    }
}
