package io.orbitkv.ssd;

import static io.orbitkv.ssd.SsdLayout.BLOCK_BYTES;
import static io.orbitkv.ssd.SsdLayout.REPRESENTATION_RAW;
import static io.orbitkv.ssd.SsdLayout.alignUp;

import io.orbitkv.codecs.extent.Crc32c;
import io.orbitkv.codecs.extent.SsdExtentHeader;
import io.orbitkv.common.Ticker;
import io.orbitkv.nativeio.libc.NativeIoException;
import io.orbitkv.nativeio.uring.IoLane;
import io.orbitkv.nativeio.uring.IoUringFileIo;
import io.orbitkv.nativeio.uring.UringFile;
import io.orbitkv.ssd.SsdLayout.Extent;
import io.orbitkv.ssd.SsdLayout.ExtentState;
import io.orbitkv.model.StateKey;
import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import io.orbitkv.model.SsdResidencyChange;
import io.orbitkv.model.WeakImageSource;
import io.orbitkv.model.SsdWritePolicy;

/**
 * Writes: admission, the bounded queue, and the commit protocol that makes an extent durable before it is served.
 *
 * <pre>
 *   offer ─admit─▶ queue ─staging buffer free─▶ copy+CRC ─reserve slot─▶ intent ▶ payload ▶ commit ─▶ index, SSD_ADDED
 *                                                         (old extent: SSD_REMOVED OVERWRITTEN, before any byte changes)
 * </pre>
 *
 * <h2>Design note</h2>
 * <p><b>Threads.</b> Admission, the queue and every state change run on the role thread. The disk steps of one write
 * are chained on the io_uring loop itself (they only touch the write's own staging buffer, prepared beforehand), so
 * an extent costs one hop in and one hop out: thread hand-offs, not bytes, dominate under CPU contention. Nothing
 * blocks: the queue is bounded and a full one drops at once ({@link SsdDropReason#QUEUE_FULL}).
 *
 * <p><b>Generations.</b> Every write of a slot gets a fresh 64-bit generation from one counter, which starts after
 * the highest one the recovery scan found. A write persists its generation in its intent header or at the latest in
 * its commit header, so a generation that was ever committed, hence advertised, is never handed out again after a
 * crash. A commit sequence (header field, reservation order) orders commits.
 *
 * <p><b>Write order.</b> A write leaves the queue when a staging buffer of {@link SsdBuffers} is free. Then, on the
 * role thread: (0) the weak source is acquired (null: dropped {@code SOURCE_EVICTED}), copied into the staging buffer
 * (or written straight from the source, see {@link #writeFromSource}), released; the payload CRC32C is computed;
 * the ring reserves the next slot, skipping slots pinned by leases ({@code overwrite_refused}) or busy; if the slot
 * held a committed extent, that extent leaves the index ({@code OVERWRITTEN}) before any byte of the slot changes.
 * On disk, strictly one after the other (each step is issued only after the previous one completed; with
 * {@link SsdSettings#syncWrites} an fdatasync separates them too):
 * <ol>
 *   <li><b>intent</b>: a 4 KiB header for the new key and generation with commit flag 0. It replaces the old header,
 *       so from now on the slot decodes as "torn" and the old key can never come back with new bytes;</li>
 *   <li><b>payload</b>: the payload and its padding, at header offset + 4096;</li>
 *   <li><b>commit</b>: the same header with commit flag 1, the commit sequence and the payload CRC32C. Its completion
 *       is the publication boundary: only then is the extent indexed, advertised ({@code SSD_ADDED}) and served.</li>
 * </ol>
 * Why nothing torn is ever served: a crash before (3) completes leaves the intent header (commit flag 0: decodes
 * torn, not indexed) or a partially written commit header (header CRC32C over the whole block fails: corrupt, not
 * indexed). A commit header is only issued after the whole payload write completed, so a decodable committed header
 * implies the payload was written. Reads verify the payload CRC32C independently (see {@link SsdReads}).
 *
 * <p><b>Close.</b> Queued writes are dropped ({@code CLOSED}); a write in flight ends {@code CLOSED} when its chain
 * completes, and returns its staging buffer then.
 */
final class SsdCommitProtocol {

    private static final Logger LOG = LoggerFactory.getLogger(SsdStore.class);

    private record PendingWrite(StateKey key, WeakImageSource source, long lengthBytes,
                                CompletableFuture<SsdWriteOutcome> outcome, long offeredNanos) {}

    private static final class WriteOp {
        final PendingWrite write;
        final Extent extent;
        final MemorySegment staging;
        final long generation;
        final int crc;
        final long startNanos;
        /**
         * Non-null when the payload is written straight from the source (its DRAM slot) instead of the staging
         * buffer: the source stays acquired (the image pinned) until the payload write completed or failed, and is
         * released exactly once ({@link #releaseSource}).
         */
        MemorySegment payloadSource;
        final AtomicBoolean sourceReleased = new AtomicBoolean();

        WriteOp(PendingWrite write, Extent extent, MemorySegment staging, long generation, int crc, long startNanos) {
            this.write = write;
            this.extent = extent;
            this.staging = staging;
            this.generation = generation;
            this.crc = crc;
            this.startNanos = startNanos;
        }

        void releaseSource() {
            if (payloadSource != null && sourceReleased.compareAndSet(false, true)) {
                write.source().release();
            }
        }
    }

    private final SsdSettings settings;
    private final RoleLoop loop;
    private final IoUringFileIo io;
    private final SsdLayout layout;
    private final SsdIndex index;
    private final SsdBuffers buffers;
    private final SsdMetrics metrics;
    private final Ticker ticker;
    private final ReuseAwareFilter reuse;
    private final Set<StateKey> pendingKeys = new HashSet<>();
    private final ArrayDeque<PendingWrite> pendingWrites = new ArrayDeque<>();
    private long nextGeneration = 1;
    private long nextCommitSequence = 1;
    private int writesInFlight;
    private boolean closed;
    private volatile int pendingWritesGauge;

    SsdCommitProtocol(SsdStore.Parts parts, SsdRecoveryScan.Outcome recovered) {
        this.settings = parts.settings();
        this.loop = parts.loop();
        this.io = parts.io();
        this.layout = parts.layout();
        this.index = parts.index();
        this.buffers = parts.buffers();
        this.metrics = parts.metrics();
        this.ticker = settings.ticker();
        this.reuse = new ReuseAwareFilter(settings.reuseAwareCapacity());
        this.nextGeneration = recovered.nextGeneration();
        this.nextCommitSequence = recovered.nextCommitSequence();
    }

    /** See {@link SsdStore#offerWrite}. */
    CompletableFuture<SsdWriteOutcome> offer(StateKey key, WeakImageSource source, long lengthBytes) {
        CompletableFuture<SsdWriteOutcome> outcome = new CompletableFuture<>();
        SsdDropReason refusal = admit(key, lengthBytes);
        if (refusal != null) {
            drop(key, refusal, outcome);
            return outcome;
        }
        pendingWrites.add(new PendingWrite(key, source, lengthBytes, outcome, ticker.nanos()));
        pendingKeys.add(key);
        pendingWritesGauge = pendingWrites.size();
        pump();
        return outcome;
    }

    private SsdDropReason admit(StateKey key, long lengthBytes) {
        if (closed) {
            return SsdDropReason.CLOSED;
        }
        if (lengthBytes <= 0 || lengthBytes > settings.maxPayloadBytes()) {
            return SsdDropReason.INVALID_SIZE;
        }
        if (index.contains(key) || pendingKeys.contains(key)) {
            return SsdDropReason.ALREADY_PRESENT;
        }
        if (pendingWrites.size() >= settings.writeQueueCapacity()) {
            return SsdDropReason.QUEUE_FULL;
        }
        if (settings.writePolicy() == SsdWritePolicy.REUSE_AWARE && !reuse.sightAndCheckReused(key)) {
            return SsdDropReason.NOT_YET_REUSED;
        }
        return null;
    }

    /**
     * See {@link SsdStore#noteReuse}: under REUSE_AWARE a sighting like an offer (the second one writes), except that a
     * key already on SSD or on its way there is left alone without counting a drop. Under ALL the seal-time offer
     * already decided, so nothing happens.
     */
    void noteReuse(StateKey key, WeakImageSource source, long lengthBytes) {
        if (settings.writePolicy() == SsdWritePolicy.REUSE_AWARE && !closed && !index.contains(key)
                && !pendingKeys.contains(key)) {
            offer(key, source, lengthBytes);
        }
    }

    private void drop(StateKey key, SsdDropReason reason, CompletableFuture<SsdWriteOutcome> outcome) {
        metrics.dropped(reason);
        outcome.complete(SsdWriteOutcome.dropped(key, reason));
    }

    /** Starts queued writes while staging buffers are free; also called when a slot or a buffer was freed. */
    void pump() {
        while (!closed && !pendingWrites.isEmpty() && buffers.hasStaging()) {
            PendingWrite write = pendingWrites.poll();
            MemorySegment source;
            try {
                source = write.source().acquire();
            } catch (RuntimeException e) {
                source = null;
            }
            if (source == null) {
                pendingKeys.remove(write.key());
                drop(write.key(), SsdDropReason.SOURCE_EVICTED, write.outcome());
                continue;
            }
            WriteOp op = null;
            SsdDropReason refusal = null;
            try {
                long length = write.lengthBytes();
                if (source.byteSize() < length) {
                    refusal = SsdDropReason.INVALID_SIZE;
                } else {
                    Extent extent = reserveExtent();
                    if (extent == null) {
                        refusal = SsdDropReason.NO_EXTENT;
                    } else {
                        op = prepare(write, source, extent);
                    }
                }
            } finally {
                if (op == null || op.payloadSource == null) {
                    write.source().release();
                }
            }
            if (op == null) {
                pendingKeys.remove(write.key());
                drop(write.key(), refusal, write.outcome());
                continue;
            }
            writesInFlight++;
            startWriteChain(op);
        }
        pendingWritesGauge = pendingWrites.size();
    }

    /** Step (0): the payload into the staging buffer (or pinned in its source), its CRC32C, the slot claimed. */
    private WriteOp prepare(PendingWrite write, MemorySegment source, Extent extent) {
        long length = write.lengthBytes();
        MemorySegment staging = buffers.takeStaging();
        int crc;
        boolean fromSource = writeFromSource(source, length);
        if (fromSource) {
            crc = Crc32c.of(source.asSlice(0, length));
        } else {
            MemorySegment payload = staging.asSlice(BLOCK_BYTES, alignUp(length));
            long copyStart = ticker.nanos();
            MemorySegment.copy(source, 0, payload, 0, length);
            settings.observer().onStagingCopy(length, ticker.nanos() - copyStart);
            payload.asSlice(length).fill((byte) 0);
            crc = Crc32c.of(payload.asSlice(0, length));
        }
        WriteOp op = new WriteOp(write, extent, staging, nextGeneration++, crc, ticker.nanos());
        if (fromSource) {
            op.payloadSource = source.asSlice(0, alignUp(length));
        }
        extent.state = ExtentState.WRITING;
        extent.key = write.key();
        extent.generation = op.generation;
        extent.payloadLength = length;
        extent.payloadCrc = crc;
        return op;
    }

    /**
     * The next slot in ring order that may be overwritten: free, or committed and unpinned (its evidence is removed
     * now, before the slot's bytes change). Pinned slots are skipped and counted; null after a full lap.
     */
    private Extent reserveExtent() {
        for (int i = 0; i < layout.size(); i++) {
            Extent extent = layout.nextInRing();
            if (extent.state == ExtentState.FREE) {
                return extent;
            }
            if (extent.state == ExtentState.COMMITTED) {
                if (extent.pins > 0) {
                    metrics.overwriteRefused.increment();
                    continue;
                }
                index.withdraw(extent, SsdResidencyChange.Cause.OVERWRITTEN);
                extent.clear();
                return extent;
            }
        }
        return null;
    }

    /**
     * Steps (1)-(3) of the commit protocol, chained on the io_uring loop: each step is submitted from the previous
     * step's completion (no hop back here in between), and only the end of the chain hops back to publish. Both
     * headers are encoded here first, on the role thread: the intent into the staging buffer's first block, the
     * commit header into its extra block past the extent. Step (1) is skipped when the slot's on-disk header is known
     * not to be a committed one (a fresh or invalidated slot): there is no old evidence to invalidate, and an
     * interrupted write leaves a non-committed header either way. Such a write's generation is then persisted by its
     * commit only; an uncommitted generation was never advertised, so its reuse after a crash is harmless.
     */
    private void startWriteChain(WriteOp op) {
        Extent extent = op.extent;
        UringFile file = extent.shard.file;
        boolean intent = extent.headerMayBeCommitted;
        extent.headerMayBeCommitted = true; // conservative from now on: the commit header may land
        MemorySegment intentBlock = op.staging.asSlice(0, BLOCK_BYTES);
        MemorySegment payload = op.payloadSource != null ? op.payloadSource
                : op.staging.asSlice(BLOCK_BYTES, alignUp(op.write.lengthBytes()));
        MemorySegment commitBlock = op.staging.asSlice(settings.extentBytes(), BLOCK_BYTES);
        if (intent) {
            header(op, false, 0).encode(intentBlock);
        }
        header(op, true, nextCommitSequence++).encode(commitBlock);
        CompletableFuture<Integer> chain = intent ? io.write(file, extent.fileOffset, intentBlock, IoLane.WRITE)
                : CompletableFuture.completedFuture(0);
        chain.thenCompose(ignored -> barrier(file, intent))
                .thenCompose(ignored -> io.write(file, extent.payloadOffset(), payload, IoLane.WRITE))
                .whenComplete((ignored, failure) -> op.releaseSource()) // the payload is on disk (or failed): unpin
                .thenCompose(ignored -> barrier(file, true))
                .thenCompose(ignored -> io.write(file, extent.fileOffset, commitBlock, IoLane.WRITE))
                .thenCompose(ignored -> barrier(file, true))
                .whenComplete((ignored, failure) -> {
                    op.releaseSource(); // a chain that failed before its payload write still lets go of the source
                    loop.execute(() -> afterWriteChain(op, failure));
                });
    }

    /**
     * Whether this write may skip the staging copy and write its payload straight from the source: configured, the
     * store in O_DIRECT mode, and the source 4 KiB-aligned with room for the rounded length (pool slots are). The
     * price: the DRAM image stays pinned until its payload write completes, so eviction then waits on the disk.
     */
    private boolean writeFromSource(MemorySegment source, long length) {
        return settings.writeFromSource() && layout.directIo() && source.isNative()
                && source.address() % BLOCK_BYTES == 0 && source.byteSize() >= alignUp(length);
    }

    private CompletableFuture<Integer> barrier(UringFile file, boolean wanted) {
        return wanted && settings.syncWrites() ? io.datasync(file, IoLane.WRITE)
                : CompletableFuture.completedFuture(0);
    }

    private static SsdExtentHeader header(WriteOp op, boolean committed, long commitSequence) {
        StateKey key = op.write.key();
        return new SsdExtentHeader(key.namespace(), key.groupId(), key.blockHash(), REPRESENTATION_RAW,
                op.write.lengthBytes(), op.generation, committed, commitSequence, op.crc);
    }

    private void afterWriteChain(WriteOp op, Throwable failure) {
        if (closed) {
            endWrite(op, SsdDropReason.CLOSED);
        } else if (failure != null) {
            Throwable cause = SsdStore.unwrap(failure);
            boolean noSpace = cause instanceof NativeIoException e && e.errno() == NativeIoException.ENOSPC;
            LOG.debug("SSD write of extent {} failed: {}", op.extent.position, cause.toString());
            settings.observer().onWriteFailed(op.extent.payloadLength, noSpace);
            endWrite(op, noSpace ? SsdDropReason.NO_SPACE : SsdDropReason.IO_ERROR);
        } else {
            onCommitted(op);
        }
    }

    private void onCommitted(WriteOp op) {
        Extent extent = op.extent;
        extent.state = ExtentState.COMMITTED;
        index.add(extent);
        pendingKeys.remove(extent.key);
        writesInFlight--;
        buffers.returnStaging(op.staging);
        metrics.writesCommitted.increment();
        metrics.writeBytes.increment(extent.payloadLength);
        long serviceNanos = ticker.nanos() - op.startNanos;
        metrics.recordLatency(metrics.writeLatency, serviceNanos);
        // The other executor was possible too when the store does O_DIRECT (pool slots are aligned and rounded).
        settings.observer().onWriteCommitted(extent.payloadLength, serviceNanos, op.payloadSource != null,
                ticker.nanos() - op.write.offeredNanos(), layout.directIo());
        index.emit(SsdResidencyChange.Kind.SSD_ADDED, extent, SsdResidencyChange.Cause.COMMITTED);
        op.write.outcome().complete(SsdWriteOutcome.committed(extent.key, extent.generation, extent.payloadLength));
        pump();
    }

    /**
     * A write that will not commit. The slot's header on disk is the old one (intent not written: the old bytes are
     * intact, it decodes as their owner again after a restart), the intent (uncommitted) or a torn commit header:
     * none is ever served as the new key.
     */
    private void endWrite(WriteOp op, SsdDropReason reason) {
        op.extent.clear();
        pendingKeys.remove(op.write.key());
        writesInFlight--;
        buffers.returnStaging(op.staging);
        drop(op.write.key(), reason, op.write.outcome());
        pump();
    }

    /** Drops every queued write ({@code CLOSED}); writes in flight end {@code CLOSED} when their chain completes. */
    void close() {
        closed = true;
        for (PendingWrite write; (write = pendingWrites.poll()) != null; ) {
            pendingKeys.remove(write.key());
            drop(write.key(), SsdDropReason.CLOSED, write.outcome());
        }
        pendingWritesGauge = 0;
    }

    int pendingWrites() {
        return pendingWrites.size();
    }

    int writesInFlight() {
        return writesInFlight;
    }

    /** Queued writes; any thread. */
    int pendingWritesGauge() {
        return pendingWritesGauge;
    }
}
