package io.orbitkv.nativeio.uring;

/** The io_uring operations {@link IoUringFileIo} issues, with their kernel opcodes (netty has no public constants). */
public enum FileIoOperation {
    /** {@code IORING_OP_READ}: pread into a caller buffer. */
    READ((byte) 22),
    /** {@code IORING_OP_WRITE}: pwrite from a caller buffer. */
    WRITE((byte) 23),
    /** {@code IORING_OP_FSYNC} with {@code IORING_FSYNC_DATASYNC}: fdatasync without blocking a thread. */
    DATASYNC((byte) 3);

    private final byte opcode;

    FileIoOperation(byte opcode) {
        this.opcode = opcode;
    }

    /** The {@code IORING_OP_*} value placed in the submission queue entry. */
    public byte opcode() {
        return opcode;
    }
}
