package io.orbitkv.ssd;

import static io.orbitkv.ssd.SsdLayout.BLOCK_BYTES;
import static io.orbitkv.ssd.SsdLayout.alignUp;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The native buffers of one SSD store, all 4096-aligned, in three fixed pools.
 *
 * <p>Design note: one shared {@link Arena} owned by this object holds
 * <ul>
 *   <li><b>staging</b> buffers of extent + 4 KiB (intent header, payload, commit header), one per write in progress,
 *       returned when the write ends in any way;</li>
 *   <li><b>bounce</b> buffers, payload-sized, only for reads into unaligned destinations;</li>
 *   <li>4 KiB <b>blocks</b>: header scans, read tails, header invalidations.</li>
 * </ul>
 * Role-thread confined. A buffer lent to an I/O returns to its pool only when that I/O's completion arrived, even when
 * the request was cancelled or the store is closing; so {@link #free()} is called only after the io_uring instance
 * closed (all completions arrived) and after the completions' hops ran on the role thread. Pools never grow: an empty
 * pool makes the caller wait (writes) or refuse (reads). {@link #liveNativeBytes()} counts every open store's bytes so
 * tests can assert that nothing leaks.
 */
final class SsdBuffers {

    private static final AtomicLong LIVE_NATIVE_BYTES = new AtomicLong();

    private final Arena arena = Arena.ofShared();
    private final long nativeBytes;
    private final ArrayDeque<MemorySegment> staging = new ArrayDeque<>();
    private final ArrayDeque<MemorySegment> bounce = new ArrayDeque<>();
    private final ArrayDeque<MemorySegment> blocks = new ArrayDeque<>();
    private boolean freed;

    SsdBuffers(SsdSettings settings) {
        long stagingBytes = settings.extentBytes() + BLOCK_BYTES; // + the commit header block
        long bounceBytes = alignUp(settings.maxPayloadBytes());
        long stagingTotal = stagingBytes * settings.writeStagingBuffers();
        long bounceTotal = bounceBytes * settings.bounceBuffers();
        long blocksTotal = (long) BLOCK_BYTES * settings.smallBlocks();
        nativeBytes = stagingTotal + bounceTotal + blocksTotal;
        try {
            carve(settings, stagingBytes, bounceBytes);
        } catch (RuntimeException | Error e) {
            arena.close();
            throw e;
        }
        LIVE_NATIVE_BYTES.addAndGet(nativeBytes);
    }

    private void carve(SsdSettings settings, long stagingBytes, long bounceBytes) {
        long stagingTotal = stagingBytes * settings.writeStagingBuffers();
        long bounceTotal = bounceBytes * settings.bounceBuffers();
        long blocksTotal = (long) BLOCK_BYTES * settings.smallBlocks();
        MemorySegment stagingArea = arena.allocate(stagingTotal, BLOCK_BYTES);
        for (int i = 0; i < settings.writeStagingBuffers(); i++) {
            staging.add(stagingArea.asSlice(i * stagingBytes, stagingBytes));
        }
        if (bounceTotal > 0) {
            MemorySegment bounceArea = arena.allocate(bounceTotal, BLOCK_BYTES);
            for (int i = 0; i < settings.bounceBuffers(); i++) {
                bounce.add(bounceArea.asSlice(i * bounceBytes, bounceBytes));
            }
        }
        MemorySegment blockArea = arena.allocate(blocksTotal, BLOCK_BYTES);
        for (int i = 0; i < settings.smallBlocks(); i++) {
            blocks.add(blockArea.asSlice((long) i * BLOCK_BYTES, BLOCK_BYTES));
        }
    }

    /** A staging buffer (extent + 4 KiB), or null when every one is lent. */
    MemorySegment takeStaging() {
        return staging.poll();
    }

    boolean hasStaging() {
        return !staging.isEmpty();
    }

    void returnStaging(MemorySegment buffer) {
        staging.add(buffer);
    }

    /** A payload-sized bounce buffer, or null when every one is lent. */
    MemorySegment takeBounce() {
        return bounce.poll();
    }

    void returnBounce(MemorySegment buffer) {
        bounce.add(buffer);
    }

    /** A 4 KiB block, or null when every one is lent. */
    MemorySegment takeBlock() {
        return blocks.poll();
    }

    boolean hasBlock() {
        return !blocks.isEmpty();
    }

    void returnBlock(MemorySegment block) {
        blocks.add(block);
    }

    /** Bytes held, 0 once freed. */
    long nativeBytes() {
        return freed ? 0 : nativeBytes;
    }

    /** Frees the arena (idempotent). Only after every completion that could touch a buffer arrived. */
    void free() {
        if (!freed) {
            freed = true;
            arena.close();
            LIVE_NATIVE_BYTES.addAndGet(-nativeBytes);
        }
    }

    /** Native bytes held by every open store of this process (0 when all are closed). */
    static long liveNativeBytes() {
        return LIVE_NATIVE_BYTES.get();
    }
}
