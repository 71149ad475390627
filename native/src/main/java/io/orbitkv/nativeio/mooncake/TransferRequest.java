package io.orbitkv.nativeio.mooncake;

import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * One transfer: {@code local} (inside a registration of the submitting engine) from or into {@code length =
 * local.byteSize()} bytes at {@code remoteAddress} of {@code target}'s registered memory. A READ fills {@code local};
 * a WRITE sends it. Remote addresses are the target process's virtual addresses, exchanged out of band (the C API
 * cannot list a remote segment's buffers).
 */
public record TransferRequest(Opcode opcode, MemorySegment local, RemoteSegment target, long remoteAddress) {
    public enum Opcode {
        READ(TransferEngineBindings.OPCODE_READ),
        WRITE(TransferEngineBindings.OPCODE_WRITE);

        final int code;

        Opcode(int code) {
            this.code = code;
        }
    }

    public TransferRequest {
        Objects.requireNonNull(opcode, "opcode");
        Objects.requireNonNull(local, "local");
        Objects.requireNonNull(target, "target");
    }

    public static TransferRequest read(MemorySegment into, RemoteSegment from, long remoteAddress) {
        return new TransferRequest(Opcode.READ, into, from, remoteAddress);
    }

    public static TransferRequest write(MemorySegment from, RemoteSegment into, long remoteAddress) {
        return new TransferRequest(Opcode.WRITE, from, into, remoteAddress);
    }
}
