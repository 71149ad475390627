package io.orbitkv.nativeio.mooncake;

/** One task's state and the bytes the engine reports moved for it. */
public record TransferStatus(TransferState state, long transferredBytes) {}
