package io.orbitkv.nativeio.mooncake;

import java.lang.foreign.MemorySegment;

/**
 * A range registered with one engine. The caller keeps the memory mapped, and submits no transfer over it, until this
 * is closed; closing unregisters it ({@code unregisterLocalMemory}). Idempotent; a no-op once the engine closed (the
 * engine unregistered it then).
 */
public final class MemoryRegistration implements AutoCloseable {
    private final MooncakeTransferEngine engine;
    private final MemorySegment memory;

    MemoryRegistration(MooncakeTransferEngine engine, MemorySegment memory) {
        this.engine = engine;
        this.memory = memory;
    }

    public MemorySegment memory() {
        return memory;
    }

    /** The first byte's virtual address: what a peer names as the remote address of a transfer. */
    public long address() {
        return memory.address();
    }

    long end() {
        return memory.address() + memory.byteSize();
    }

    @Override
    public void close() {
        engine.unregister(this);
    }
}
