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
import io.orbitkv.ssd.SsdLayout.Region;
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
 *   offer ─admit─▶ queue ─staging buffer free─▶ copy+CRC ─reserve page─▶ intent+payload ▶ commit ─▶ index, SSD_ADDED
 *                                        (a reclaimed region: its pages SSD_REMOVED OVERWRITTEN, before any byte changes)
 * </pre>
 *
 * <h2>Design note</h2>
 * <p><b>Threads.</b> Admission, the queue and every state change run on the role thread. The disk steps of one write
 * are chained on the io_uring loop itself (they only touch the write's own staging buffer, prepared beforehand), so
 * a page costs one hop in and one hop out: thread hand-offs, not bytes, dominate under CPU contention. Nothing
 * blocks: the queue is bounded and a full one drops at once ({@link SsdDropReason#QUEUE_FULL}).
 *
 * <p><b>Generations.</b> Every page write gets a fresh 64-bit generation from one counter, which starts after the
 * highest one the recovery scan found, at the moment its place is reserved: within a region's fill, generations grow
 * in file order (the recovery walk relies on it). A write persists its generation in its intent header, so a
 * generation that was ever committed, hence advertised, is never handed out again after a crash. A commit sequence
 * (header field, reservation order) orders commits.
 *
 * <p><b>Write order.</b> A write leaves the queue when a staging buffer of {@link SsdBuffers} is free. Then, on the
 * role thread: (0) the weak source is acquired (null: dropped {@code SOURCE_EVICTED}), copied into the staging buffer
 * after its intent header block (or written straight from the source, see {@link #writeFromSource}), released; the
 * payload CRC32C is computed; {@link SsdLayout} appends the page to an open region, or reclaims a region first (see
 * there: its committed pages leave the index before any byte of it changes). On disk:
 * <ol>
 *   <li><b>intent + payload</b>: one write of the 4 KiB header for the new key and generation with commit flag 0,
 *       followed by the payload and its padding (two writes, intent first, when writing from the source or for the
 *       first page of a region's fill). The other pages of a fill wait for that first page's intent header, so a
 *       crash never leaves bytes of the new fill under the previous fill's chain start;</li>
 *   <li><b>commit</b>: the same header with commit flag 1, the commit sequence and the payload CRC32C, issued once (1)
 *       completed <i>and</i> the header of every earlier page of the region's fill is on disk. Its completion is the
 *       publication boundary: only then is the page indexed, advertised ({@code SSD_ADDED}) and served.</li>
 * </ol>
 * With {@link SsdSettings#syncWrites} an fdatasync follows each step. Why nothing torn is ever served and nothing
 * committed is lost: a crash before (2) completes leaves the intent header (commit flag 0: torn, not indexed; its
 * length still leads the recovery walk to the next page) or a partially written payload under it. Intent and commit
 * headers differ only in their first 512 bytes (the rest is zero padding), which a device writes whole, so an
 * interrupted commit leaves one or the other, never a corrupt block. A commit is issued only after its payload write
 * completed, and only after every earlier header of its region's fill, so the walk from the region's start reaches
 * every committed page. Reads verify the payload CRC32C independently (see {@link SsdReads}). A failed write breaks
 * its region (later pages of that fill fail too, and nothing more is appended) until the region is reclaimed.
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

    /** Starts queued writes while staging buffers are free; also called when a region or a buffer was freed. */
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
                    Extent extent = reserveExtent(length);
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

    /** Step (0): the payload into the staging buffer (or pinned in its source), its CRC32C, its place claimed. */
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
        extent.region.writing++;
        if (extent.region.firstGeneration < 0) {
            extent.region.firstGeneration = op.generation;
        }
        extent.key = write.key();
        extent.generation = op.generation;
        extent.payloadLength = length;
        extent.payloadCrc = crc;
        return op;
    }

    /**
     * A place for a page of {@code length} bytes: appended to an open region with room, else in a region reclaimed
     * for it (see {@link SsdLayout}); null when every region is open, being written or holding a pinned page.
     */
    private Extent reserveExtent(long length) {
        long span = BLOCK_BYTES + alignUp(length);
        for (Region region : layout.openRegions()) {
            if (region.fits(span)) {
                return region.append(span);
            }
        }
        Region victim;
        while ((victim = layout.oldestReclaimable(metrics.overwriteRefused::increment)) == null) {
            Region oldestOpen = layout.openRegions().peekFirst();
            if (oldestOpen == null) {
                return null;
            }
            layout.close(oldestOpen); // small tiers: every region is open, so one of them closes to be reclaimed
        }
        for (Extent page : victim.pages) {
            if (page.state == ExtentState.COMMITTED) {
                index.withdraw(page, SsdResidencyChange.Cause.OVERWRITTEN);
            }
            page.clear();
        }
        victim.reset();
        layout.markOpen(victim);
        return victim.append(span);
    }

    /**
     * Steps (1) and (2) of the commit protocol, chained on the io_uring loop: each step is submitted from the
     * completion it waits for (no hop back here in between), and only the end of the chain hops back to publish.
     * Both headers are encoded here first, on the role thread: the intent into the staging buffer's first block
     * (right before the payload), the commit header into its extra block past the largest payload.
     */
    private void startWriteChain(WriteOp op) {
        Extent extent = op.extent;
        Region region = extent.region;
        UringFile file = extent.shard().file;
        MemorySegment intentBlock = op.staging.asSlice(0, BLOCK_BYTES);
        MemorySegment commitBlock = op.staging.asSlice(settings.extentBytes(), BLOCK_BYTES);
        header(op, false, 0).encode(intentBlock);
        header(op, true, nextCommitSequence++).encode(commitBlock);
        boolean opener = region.pages.size() == 1;
        CompletableFuture<Integer> first;
        if (opener || op.payloadSource != null) {
            // The intent alone, then the payload: the other pages of a fill wait only for the opener's 4 KiB header.
            CompletableFuture<Integer> intent = (opener ? CompletableFuture.completedFuture(0) : region.opened)
                    .thenCompose(ignored -> io.write(file, extent.fileOffset, intentBlock, IoLane.WRITE))
                    .thenCompose(ignored -> barrier(file));
            if (opener) {
                region.opened = intent.thenApply(ignored -> null);
            }
            MemorySegment payload = op.payloadSource != null ? op.payloadSource
                    : op.staging.asSlice(BLOCK_BYTES, extent.spanBytes - BLOCK_BYTES);
            first = intent.thenCompose(ignored -> io.write(file, extent.payloadOffset(), payload, IoLane.WRITE));
        } else {
            // The intent block and the payload are contiguous in the staging buffer: one write.
            first = region.opened.thenCompose(ignored -> io.write(file, extent.fileOffset,
                    op.staging.asSlice(0, extent.spanBytes), IoLane.WRITE));
        }
        first = first.whenComplete((ignored, failure) -> op.releaseSource()) // the payload is on disk (or failed)
                .thenCompose(ignored -> barrier(file));
        CompletableFuture<Void> headersLanded = region.headersLanded.thenCombine(first, (a, b) -> null);
        region.headersLanded = headersLanded;
        headersLanded.thenCompose(ignored -> io.write(file, extent.fileOffset, commitBlock, IoLane.WRITE))
                .thenCompose(ignored -> barrier(file))
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

    private CompletableFuture<Integer> barrier(UringFile file) {
        return settings.syncWrites() ? io.datasync(file, IoLane.WRITE)
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
            LOG.debug("SSD write of the page at {} in {} failed: {}", op.extent.fileOffset, op.extent.shard().path,
                    cause.toString());
            // its region's header chain may be broken here: nothing more is appended until it is reclaimed
            op.extent.region.broken = true;
            layout.close(op.extent.region);
            settings.observer().onWriteFailed(op.extent.payloadLength, noSpace);
            endWrite(op, noSpace ? SsdDropReason.NO_SPACE : SsdDropReason.IO_ERROR);
        } else {
            onCommitted(op);
        }
    }

    private void onCommitted(WriteOp op) {
        Extent extent = op.extent;
        extent.state = ExtentState.COMMITTED;
        extent.region.writing--;
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
     * A write that will not commit. The page's header on disk is what was there before (a recovery walk stops
     * there), its intent (uncommitted: skipped) or a torn commit header: none is ever served as the new key.
     */
    private void endWrite(WriteOp op, SsdDropReason reason) {
        op.extent.clear();
        op.extent.region.writing--;
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
