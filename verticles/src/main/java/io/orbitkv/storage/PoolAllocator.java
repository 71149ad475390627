package io.orbitkv.storage;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Allocates page slots inside the shared-memory pool.
 *
 * <p>Design note (layout): the pool is cut into {@code chunkBytes} chunks (2 MiB by default). A request is rounded
 * up to 4 KiB and then to a size class; classes step by 1/8 of each power of two, so a slot wastes at most 12.5% of
 * its size. Slots of one class live in a <em>span</em>: a run of contiguous chunks sized so that the slots fill it
 * to within 1/8 (1 to 16 chunks). Requests larger than 16 chunks take a dedicated run of whole chunks. A span whose
 * last slot is freed returns its chunks at once, so memory moves between classes as the workload changes.
 *
 * <p>Fragmentation is bounded by construction (internal ≤ 1/8 per slot, ≤ 1/8 per span tail) and measured: {@link
 * #requestedBytes()} vs {@link #slotBytes()} vs {@link #spanBytes()}, plus the free slots stranded in partially used
 * spans ({@link #strandedFreeBytes()}) and the largest free chunk run.
 *
 * <p>Concurrency: not thread-safe; owned by the storage role's event loop. Every slot carries a generation that is
 * unique for the life of the allocator, so a descriptor naming a freed-and-reused slot is detectably stale.
 */
final class PoolAllocator {
    public static final long PAGE_ALIGN = 4096;
    private static final int CLASS_STEPS = 8;
    private static final int MAX_SPAN_CHUNKS = 16;

    /** One granted slot. */
    public record Slot(long offset, long lengthBytes, long slotBytes, long generation) {}

    private final long poolBytes;
    private final long chunkBytes;
    private final int chunkCount;
    private final BitSet usedChunks;
    private final Map<Long, SizeClass> classes = new HashMap<>();
    /** span start chunk → span, for frees. */
    private final Map<Integer, Span> spansByChunk = new HashMap<>();
    private long nextGeneration = 1;
    private long requestedBytes;
    private long slotBytes;
    private long spanBytes;
    private long liveSlots;

    public PoolAllocator(long poolBytes, long chunkBytes) {
        if (chunkBytes <= 0 || chunkBytes % PAGE_ALIGN != 0) {
            throw new IllegalArgumentException("chunk size must be a positive multiple of 4096, got " + chunkBytes);
        }
        if (poolBytes < chunkBytes || poolBytes % chunkBytes != 0) {
            throw new IllegalArgumentException("pool size " + poolBytes + " must be a positive multiple of the chunk size " + chunkBytes);
        }
        if (poolBytes / chunkBytes > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("pool has too many chunks");
        }
        this.poolBytes = poolBytes;
        this.chunkBytes = chunkBytes;
        this.chunkCount = (int) (poolBytes / chunkBytes);
        this.usedChunks = new BitSet(chunkCount);
    }

    /** The slot size a request of {@code lengthBytes} occupies. */
    public static long sizeClassOf(long lengthBytes) {
        long aligned = alignUp(Math.max(1, lengthBytes), PAGE_ALIGN);
        if (aligned <= PAGE_ALIGN * CLASS_STEPS) {
            return aligned;
        }
        long power = Long.highestOneBit(aligned);
        long step = power / CLASS_STEPS;
        return alignUp(aligned, step);
    }

    /** Allocates a slot, or returns null when no space is left (the caller evicts and retries). */
    public Slot allocate(long lengthBytes) {
        if (lengthBytes <= 0) {
            throw new IllegalArgumentException("length must be positive, got " + lengthBytes);
        }
        long classBytes = sizeClassOf(lengthBytes);
        if (classBytes > chunkBytes * MAX_SPAN_CHUNKS) {
            return allocateLarge(lengthBytes);
        }
        SizeClass sizeClass = classes.computeIfAbsent(classBytes, SizeClass::new);
        Span span = sizeClass.withFreeSlot.peekFirst();
        if (span == null) {
            int chunks = sizeClass.spanChunks;
            int start = findFreeRun(chunks);
            if (start < 0) {
                return null;
            }
            span = new Span(sizeClass, start, chunks, (int) (chunks * chunkBytes / classBytes));
            usedChunks.set(start, start + chunks);
            spansByChunk.put(start, span);
            spanBytes += chunks * chunkBytes;
            sizeClass.withFreeSlot.addFirst(span);
        }
        int index = span.occupied.nextClearBit(0);
        span.occupied.set(index);
        span.used++;
        if (span.used == span.capacity) {
            sizeClass.withFreeSlot.remove(span);
        }
        long offset = span.startChunk * chunkBytes + index * classBytes;
        Slot slot = grant(offset, lengthBytes, classBytes);
        span.generations[index] = slot.generation();
        return slot;
    }

    private Slot allocateLarge(long lengthBytes) {
        int chunks = (int) (alignUp(lengthBytes, chunkBytes) / chunkBytes);
        int start = findFreeRun(chunks);
        if (start < 0) {
            return null;
        }
        usedChunks.set(start, start + chunks);
        Span span = new Span(null, start, chunks, 1);
        span.occupied.set(0);
        span.used = 1;
        spansByChunk.put(start, span);
        spanBytes += chunks * chunkBytes;
        Slot slot = grant(start * chunkBytes, lengthBytes, chunks * chunkBytes);
        span.generations[0] = slot.generation();
        return slot;
    }

    private Slot grant(long offset, long lengthBytes, long slotSize) {
        requestedBytes += lengthBytes;
        slotBytes += slotSize;
        liveSlots++;
        return new Slot(offset, lengthBytes, slotSize, nextGeneration++);
    }

    /** Frees a slot granted by this allocator. Freeing twice or a foreign slot is a programming error. */
    public void free(Slot slot) {
        int chunk = (int) (slot.offset() / chunkBytes);
        Span span = spanContaining(chunk);
        if (span == null) {
            throw new IllegalStateException("slot at " + slot.offset() + " is not allocated");
        }
        int index = span.sizeClass == null ? 0
                : (int) ((slot.offset() - span.startChunk * chunkBytes) / span.sizeClass.classBytes);
        if (!span.occupied.get(index) || span.generations[index] != slot.generation()) {
            throw new IllegalStateException("slot at " + slot.offset() + " generation " + slot.generation()
                    + " is not live (freed twice, or reused since)");
        }
        span.occupied.clear(index);
        span.used--;
        requestedBytes -= slot.lengthBytes();
        slotBytes -= slot.slotBytes();
        liveSlots--;
        if (span.used == 0) {
            if (span.sizeClass != null) {
                span.sizeClass.withFreeSlot.remove(span);
            }
            usedChunks.clear(span.startChunk, span.startChunk + span.chunks);
            spansByChunk.remove(span.startChunk);
            spanBytes -= span.chunks * chunkBytes;
        } else if (span.used == span.capacity - 1 && span.sizeClass != null) {
            span.sizeClass.withFreeSlot.addLast(span);
        }
    }

    private Span spanContaining(int chunk) {
        for (int c = chunk; c >= 0 && c > chunk - MAX_SPAN_CHUNKS - 1; c--) {
            Span span = spansByChunk.get(c);
            if (span != null) {
                return c + span.chunks > chunk ? span : null;
            }
        }
        // Large spans may start further back.
        for (Span span : spansByChunk.values()) {
            if (span.startChunk <= chunk && chunk < span.startChunk + span.chunks) {
                return span;
            }
        }
        return null;
    }

    private int findFreeRun(int chunks) {
        int start = usedChunks.nextClearBit(0);
        while (start + chunks <= chunkCount) {
            int nextUsed = usedChunks.nextSetBit(start);
            if (nextUsed < 0 || nextUsed >= start + chunks) {
                return start;
            }
            start = usedChunks.nextClearBit(nextUsed);
        }
        return -1;
    }

    private static long alignUp(long value, long alignment) {
        return (value + alignment - 1) / alignment * alignment;
    }

    public long poolBytes() {
        return poolBytes;
    }

    /** Bytes callers asked for in live slots. */
    public long requestedBytes() {
        return requestedBytes;
    }

    /** Bytes of live slots (requested rounded to their class). */
    public long slotBytes() {
        return slotBytes;
    }

    /** Bytes of chunks held by spans. */
    public long spanBytes() {
        return spanBytes;
    }

    public long freeBytes() {
        return poolBytes - spanBytes;
    }

    public long liveSlots() {
        return liveSlots;
    }

    /** Free slots inside partially used spans: usable only by their own class. */
    public long strandedFreeBytes() {
        long stranded = 0;
        for (SizeClass sizeClass : classes.values()) {
            for (Span span : sizeClass.withFreeSlot) {
                stranded += (long) (span.capacity - span.used) * sizeClass.classBytes;
            }
        }
        return stranded;
    }

    /** Internal fragmentation of what is allocated: 1 - requested/span bytes (0 when empty). */
    public double fragmentation() {
        return spanBytes == 0 ? 0.0 : 1.0 - (double) requestedBytes / spanBytes;
    }

    public long largestFreeRunBytes() {
        long best = 0;
        int start = usedChunks.nextClearBit(0);
        while (start < chunkCount) {
            int end = usedChunks.nextSetBit(start);
            if (end < 0) {
                end = chunkCount;
            }
            best = Math.max(best, end - start);
            start = usedChunks.nextClearBit(end);
        }
        return best * chunkBytes;
    }

    /** Size classes currently holding spans (for tests and diagnostics). */
    List<Long> activeClasses() {
        List<Long> active = new ArrayList<>();
        for (SizeClass c : classes.values()) {
            if (!c.withFreeSlot.isEmpty()) {
                active.add(c.classBytes);
            }
        }
        return active;
    }

    private final class SizeClass {
        final long classBytes;
        final int spanChunks;
        final ArrayDeque<Span> withFreeSlot = new ArrayDeque<>();

        SizeClass(long classBytes) {
            this.classBytes = classBytes;
            int chosen = MAX_SPAN_CHUNKS;
            for (int chunks = 1; chunks <= MAX_SPAN_CHUNKS; chunks++) {
                long span = chunks * chunkBytes;
                long waste = span % classBytes;
                if (span >= classBytes && waste * CLASS_STEPS <= span) {
                    chosen = chunks;
                    break;
                }
            }
            this.spanChunks = chosen;
        }
    }

    private static final class Span {
        final SizeClass sizeClass;
        final int startChunk;
        final int chunks;
        final int capacity;
        final BitSet occupied;
        /** Generation of each live slot: a stale Slot (freed, then reused) is detected on free. */
        final long[] generations;
        int used;

        Span(SizeClass sizeClass, int startChunk, int chunks, int capacity) {
            this.sizeClass = sizeClass;
            this.startChunk = startChunk;
            this.chunks = chunks;
            this.capacity = capacity;
            this.occupied = new BitSet(capacity);
            this.generations = new long[capacity];
        }
    }
}
