package io.orbitkv.ssd;

import static io.orbitkv.ssd.SsdLayout.BLOCK_BYTES;
import static io.orbitkv.ssd.SsdLayout.REPRESENTATION_RAW;
import static io.orbitkv.ssd.SsdLayout.alignUp;

import io.orbitkv.codecs.extent.Crc32c;
import io.orbitkv.codecs.extent.SsdExtentHeader;
import io.orbitkv.common.Ticker;
import io.orbitkv.nativeio.uring.FileIoFuture;
import io.orbitkv.nativeio.uring.FileIoRejectedException;
import io.orbitkv.nativeio.uring.IoLane;
import io.orbitkv.nativeio.uring.IoUringFileIo;
import io.orbitkv.ssd.SsdLayout.Extent;
import io.orbitkv.ssd.SsdLayout.ExtentState;
import io.orbitkv.model.StateKey;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CancellationException;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import io.orbitkv.model.SsdLease;
import io.orbitkv.model.SsdReadResult;
import io.orbitkv.model.SsdResidencyChange;

/**
 * Exact-generation read leases and verified reads into the caller's memory.
 *
 * <h2>Design note</h2>
 * <p><b>Pins.</b> {@link #acquireLease} pins one exact generation of one page. A read pins it
 * too until its completion arrives, so releasing a lease during a read is safe. A region holding a pinned page is
 * never reclaimed. Role-thread confined; completions hop
 * back through the {@link RoleLoop} before they touch anything.
 *
 * <p><b>Paths.</b> Reads go on the RESTORE lane, straight into the caller's segment (a DRAM pool slot,
 * 4096-aligned): the payload is read with its length rounded up to 4096 when the segment is that large
 * ({@link SsdReadResult.ReadPath#DIRECT}); otherwise the aligned head goes straight in and the last partial block
 * through a 4 KiB block of {@link SsdBuffers} ({@code DIRECT_WITH_TAIL}); an unaligned segment goes through a
 * payload-sized bounce buffer ({@code BOUNCE}, {@link SsdFailure#READ_BUSY} when none is free). Bytes beyond
 * {@code lengthBytes} in the destination are scratch in the DIRECT path. The destination and any bounce buffer stay
 * lent to the I/O until every completion of the read arrived, even after a cancel (see {@link SsdReadFuture}).
 *
 * <p><b>Verification.</b> Every read verifies the payload CRC32C against the destination bytes, on a verifier thread
 * ({@link SsdSettings#verifierThreads}; a 2 MiB checksum is ~0.2 ms that must not run on an event loop) once every I/O
 * of the read completed and any bounce bytes were copied; the verdict hops back here, where the extent's state and
 * generation are checked again, so an extent dropped meanwhile is never served. A mismatch (bit rot,
 * a flipped byte, a lost write on power failure without syncWrites, a short read of a truncated shard) drops the
 * extent from the index ({@code SSD_REMOVED}, cause CORRUPT), counts it and fails the read with
 * {@link SsdFailure#CHECKSUM_MISMATCH}. Once its last pin goes, its header is rewritten as uncommitted so that a
 * restart does not index it again.
 */
final class SsdReads {

    private record LeaseState(SsdLease lease, Extent extent) {}

    private static final class ReadOp {
        final SsdLease lease;
        final Extent extent;
        final MemorySegment destination;
        final SsdReadFuture future = new SsdReadFuture();
        final long startNanos;
        SsdReadResult.ReadPath path;
        MemorySegment bounce;
        boolean bounceIsBlock;
        long headBytes;
        long expectedBytes;
        long transferredBytes;
        int outstanding;
        Throwable failure;

        ReadOp(SsdLease lease, Extent extent, MemorySegment destination, long startNanos) {
            this.lease = lease;
            this.extent = extent;
            this.destination = destination;
            this.startNanos = startNanos;
        }
    }

    private final RoleLoop loop;
    private final IoUringFileIo io;
    private final SsdLayout layout;
    private final SsdIndex index;
    private final SsdBuffers buffers;
    private final SsdMetrics metrics;
    private final Ticker ticker;
    private final Runnable onSlotFreed;
    private final Executor verifier;
    private final SsdOperationObserver observer;
    private int verifying;
    private Runnable afterVerifications;
    private final Map<Long, LeaseState> leases = new HashMap<>();
    private long nextLeaseId = 1;
    private int readsInFlight;
    private boolean closed;

    /** {@code onSlotFreed} runs when an invalidated page became free (queued writes may proceed). */
    SsdReads(SsdStore.Parts parts, Runnable onSlotFreed) {
        this.loop = parts.loop();
        this.io = parts.io();
        this.layout = parts.layout();
        this.index = parts.index();
        this.buffers = parts.buffers();
        this.metrics = parts.metrics();
        this.ticker = parts.settings().ticker();
        this.onSlotFreed = onSlotFreed;
        this.verifier = parts.verifier();
        this.observer = parts.settings().observer();
    }

    /** See {@link SsdStore#acquireLease}. */
    SsdLease acquireLease(StateKey key, long expectedGeneration) {
        if (closed) {
            throw miss(SsdFailure.CLOSED, "SSD store closed");
        }
        Extent extent = index.get(key);
        if (extent == null) {
            throw miss(SsdFailure.NOT_FOUND, "no committed extent for " + key);
        }
        if (extent.generation != expectedGeneration) {
            throw miss(SsdFailure.STALE_GENERATION, key + " is at generation " + extent.generation + ", not "
                    + expectedGeneration);
        }
        extent.pins++;
        SsdLease lease = new SsdLease(nextLeaseId++, key, extent.generation, extent.payloadLength);
        leases.put(lease.leaseId(), new LeaseState(lease, extent));
        return lease;
    }

    /** See {@link SsdStore#release}. */
    void release(SsdLease lease) {
        LeaseState state = leases.remove(lease.leaseId());
        if (state == null) {
            throw new SsdException(SsdFailure.UNKNOWN_LEASE, "lease " + lease.leaseId() + " is not held");
        }
        unpin(state.extent());
    }

    /** See {@link SsdStore#readInto}. */
    SsdReadFuture readInto(SsdLease lease, MemorySegment destination) {
        LeaseState state = leases.get(lease.leaseId());
        SsdReadFuture refused = new SsdReadFuture();
        if (closed) {
            refused.fail(miss(SsdFailure.CLOSED, "SSD store closed"));
            return refused;
        }
        if (state == null) {
            refused.fail(miss(SsdFailure.UNKNOWN_LEASE, "lease " + lease.leaseId() + " is not held"));
            return refused;
        }
        Extent extent = state.extent();
        long length = extent.payloadLength;
        if (extent.state != ExtentState.COMMITTED) {
            refused.fail(miss(SsdFailure.CHECKSUM_MISMATCH, lease.key() + " was dropped after a checksum mismatch"));
            return refused;
        }
        if (destination.isReadOnly() || destination.byteSize() < length) {
            refused.fail(miss(SsdFailure.DESTINATION_TOO_SMALL, "destination of " + destination.byteSize()
                    + " bytes for a page of " + length));
            return refused;
        }
        ReadOp op = new ReadOp(state.lease(), extent, destination, ticker.nanos());
        long payloadOffset = extent.payloadOffset();
        long aligned = alignUp(length);
        boolean destinationAligned = destination.address() % BLOCK_BYTES == 0;
        List<Runnable> submissions = new ArrayList<>(2);
        if (!layout.directIo()) {
            op.path = SsdReadResult.ReadPath.BUFFERED;
            op.expectedBytes = length;
            submissions.add(() -> submitRead(op, payloadOffset, destination.asSlice(0, length)));
        } else if (destinationAligned && destination.byteSize() >= aligned) {
            op.path = SsdReadResult.ReadPath.DIRECT;
            op.expectedBytes = aligned;
            submissions.add(() -> submitRead(op, payloadOffset, destination.asSlice(0, aligned)));
        } else if (destinationAligned && buffers.hasBlock()) {
            op.path = SsdReadResult.ReadPath.DIRECT_WITH_TAIL;
            op.headBytes = length & -BLOCK_BYTES;
            op.bounce = buffers.takeBlock();
            op.bounceIsBlock = true;
            op.expectedBytes = op.headBytes + BLOCK_BYTES;
            if (op.headBytes > 0) {
                submissions.add(() -> submitRead(op, payloadOffset, destination.asSlice(0, op.headBytes)));
            }
            submissions.add(() -> submitRead(op, payloadOffset + op.headBytes, op.bounce));
        } else if ((op.bounce = buffers.takeBounce()) != null) {
            op.path = SsdReadResult.ReadPath.BOUNCE;
            op.expectedBytes = aligned;
            submissions.add(() -> submitRead(op, payloadOffset, op.bounce.asSlice(0, aligned)));
        } else {
            refused.fail(miss(SsdFailure.READ_BUSY, "every bounce buffer is in use (destination not 4096-aligned)"));
            return refused;
        }
        extent.pins++;
        readsInFlight++;
        op.outstanding = submissions.size();
        submissions.forEach(Runnable::run);
        return op.future;
    }

    private void submitRead(ReadOp op, long fileOffset, MemorySegment target) {
        FileIoFuture read = io.read(op.extent.shard().file, fileOffset, target, IoLane.RESTORE);
        op.future.track(read);
        read.whenComplete((bytes, failure) -> loop.execute(() -> onReadPart(op, bytes, failure)));
    }

    private void onReadPart(ReadOp op, Integer bytes, Throwable failure) {
        if (failure != null) {
            if (op.failure == null) {
                op.failure = failure;
            }
        } else {
            op.transferredBytes += bytes;
        }
        if (--op.outstanding > 0) {
            return;
        }
        // Every I/O of this read has completed: the destination and bounce buffers are ours again.
        long length = op.lease.lengthBytes();
        boolean complete = op.failure == null && op.transferredBytes >= op.expectedBytes;
        boolean verify = complete && !closed && !op.future.cancelRequested();
        if (verify) {
            switch (op.path) {
                case DIRECT_WITH_TAIL -> MemorySegment.copy(op.bounce, 0, op.destination, op.headBytes,
                        length - op.headBytes);
                case BOUNCE -> MemorySegment.copy(op.bounce, 0, op.destination, 0, length);
                default -> {
                }
            }
        }
        if (op.bounce != null) {
            if (op.bounceIsBlock) {
                buffers.returnBlock(op.bounce);
            } else {
                buffers.returnBounce(op.bounce);
            }
            op.bounce = null;
        }
        if (!verify) {
            finish(op, null);
            return;
        }
        MemorySegment payload = op.destination.asSlice(0, length);
        if (verifier != null) {
            verifying++;
            try {
                verifier.execute(() -> {
                    Integer crc = checksumOrNull(op, payload);
                    loop.execute(() -> {
                        verifying--;
                        finish(op, crc);
                        if (verifying == 0 && afterVerifications != null) {
                            Runnable then = afterVerifications;
                            afterVerifications = null;
                            then.run();
                        }
                    });
                });
                return;
            } catch (RejectedExecutionException e) {
                verifying--; // verify here instead
            }
        }
        finish(op, checksumOrNull(op, payload));
    }

    /**
     * The payload's CRC32C, or null with {@code op.failure} set when it could not be read (the caller freed the
     * destination early). Runs on a verifier thread (or the role thread): reads only the destination, which stays
     * the store's until the read's future completes.
     */
    private Integer checksumOrNull(ReadOp op, MemorySegment payload) {
        try {
            long start = ticker.nanos();
            int crc = Crc32c.of(payload);
            observer.onReadVerified(payload.byteSize(), ticker.nanos() - start);
            return crc;
        } catch (RuntimeException e) {
            op.failure = e;
            return null;
        }
    }

    /** Completes the read (role thread) with the payload's CRC32C, null when it was not verified. */
    private void finish(ReadOp op, Integer crc) {
        try {
            finishRead(op, crc);
        } finally {
            readsInFlight--;
            unpin(op.extent);
        }
    }

    private void finishRead(ReadOp op, Integer crc) {
        if (op.future.cancelRequested() || op.failure instanceof CancellationException) {
            op.future.markCancelled();
            return;
        }
        if (closed) {
            op.future.fail(miss(SsdFailure.CLOSED, "SSD store closed during the read"));
            return;
        }
        if (op.failure != null) {
            Throwable cause = SsdStore.unwrap(op.failure);
            SsdFailure failure = cause instanceof FileIoRejectedException rejected
                    ? (rejected.reason() == FileIoRejectedException.Reason.QUEUE_FULL ? SsdFailure.QUEUE_FULL
                    : SsdFailure.CLOSED)
                    : SsdFailure.IO_ERROR;
            op.future.fail(miss(failure, "read of " + op.lease.key() + " failed: " + cause.getMessage()));
            return;
        }
        long length = op.lease.lengthBytes();
        // A short read (a truncated shard, crc null) fails the CRC like any other damage; so does an extent that was
        // dropped or rewritten while its bytes were being verified.
        if (crc == null || op.extent.state != ExtentState.COMMITTED || op.extent.generation != op.lease.generation()
                || crc != op.extent.payloadCrc) {
            dropCorrupt(op.extent);
            op.future.fail(miss(SsdFailure.CHECKSUM_MISMATCH, "payload of " + op.lease.key() + " generation "
                    + op.lease.generation() + " failed its CRC32C: extent dropped"));
            return;
        }
        metrics.readHits.increment();
        metrics.readBytes.increment(length);
        metrics.recordLatency(metrics.readLatency, ticker.nanos() - op.startNanos);
        op.future.succeed(new SsdReadResult(op.lease, length, op.path, op.extent.payloadCrc));
    }

    /** The extent failed verification: out of the index now, its header invalidated on disk once unpinned. */
    private void dropCorrupt(Extent extent) {
        if (extent.state != ExtentState.COMMITTED) {
            return;
        }
        metrics.corruptExtents.increment();
        index.withdraw(extent, SsdResidencyChange.Cause.CORRUPT);
        extent.state = ExtentState.RETIRING;
    }

    private void unpin(Extent extent) {
        if (--extent.pins == 0 && extent.state == ExtentState.RETIRING) {
            invalidateHeader(extent);
        }
    }

    /**
     * Rewrites a dropped page's header as uncommitted (same length and generation, so the recovery walk still passes
     * it and the generation stays recoverable) so that a restart does not index it again. Best effort: if no block is free, or the write fails, a restart finds
     * the extent again and the first read drops it again (fail closed either way).
     */
    private void invalidateHeader(Extent extent) {
        MemorySegment block = closed ? null : buffers.takeBlock();
        if (block == null) {
            extent.clear();
            return;
        }
        extent.region.writing++; // the region is not reclaimed under this write
        new SsdExtentHeader(extent.key.namespace(), extent.key.groupId(), extent.key.blockHash(), REPRESENTATION_RAW,
                extent.payloadLength, extent.generation, false, 0, extent.payloadCrc).encode(block);
        io.write(extent.shard().file, extent.fileOffset, block, IoLane.WRITE).whenComplete((bytes, failure) ->
                loop.execute(() -> {
                    buffers.returnBlock(block);
                    extent.region.writing--;
                    extent.clear();
                    onSlotFreed.run();
                }));
    }

    SsdException miss(SsdFailure failure, String message) {
        metrics.readMiss(failure);
        return new SsdException(failure, message);
    }

    /** Ends every lease; reads in flight fail {@code CLOSED} when their completions arrive. */
    void close() {
        closed = true;
        leases.clear();
    }

    /** Runs {@code then} on the role thread once no verification is in flight (at once when none is). */
    void afterVerifications(Runnable then) {
        if (verifying == 0) {
            then.run();
        } else {
            afterVerifications = then;
        }
    }

    int activeLeases() {
        return leases.size();
    }

    int readsInFlight() {
        return readsInFlight;
    }
}
