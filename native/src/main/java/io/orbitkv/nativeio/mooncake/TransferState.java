package io.orbitkv.nativeio.mooncake;

/** A task's state as {@code getTransferStatus} reports it ({@code STATUS_*} in {@code transfer_engine_c.h}). */
public enum TransferState {
    WAITING(0),
    PENDING(1),
    INVALID(2),
    CANCELED(3),
    COMPLETED(4),
    TIMEOUT(5),
    FAILED(6);

    private final int code;

    TransferState(int code) {
        this.code = code;
    }

    public int code() {
        return code;
    }

    /** Whether the task will not change again: its bytes are no longer touched by the engine. */
    public boolean isTerminal() {
        return this != WAITING && this != PENDING;
    }

    static TransferState of(int code) {
        for (TransferState state : values()) {
            if (state.code == code) {
                return state;
            }
        }
        return INVALID;
    }
}
