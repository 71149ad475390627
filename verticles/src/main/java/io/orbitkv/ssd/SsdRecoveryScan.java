package io.orbitkv.ssd;

import static io.orbitkv.ssd.SsdLayout.BLOCK_BYTES;

import io.orbitkv.codecs.extent.ExtentDecodeResult;
import io.orbitkv.codecs.extent.SsdExtentHeader;
import io.orbitkv.nativeio.uring.IoLane;
import io.orbitkv.nativeio.uring.IoUringFileIo;
import io.orbitkv.ssd.SsdLayout.Extent;
import io.orbitkv.ssd.SsdLayout.ExtentState;
import io.orbitkv.model.StateKey;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;

/**
 * The open-time scan that rebuilds the index from the extent headers on disk.
 *
 * <p>Design note: reads every slot's 4 KiB header block on the RESTORE lane, at most
 * {@link SsdSettings#recoveryScanDepth} at once and each into a block of {@link SsdBuffers} (returned when its
 * completion arrived), and classifies it on the role thread: a valid committed header indexes its extent (the newer
 * generation wins when a key appears twice: the older one counts as a duplicate), a torn one (commit flag 0) and a
 * corrupt one (header CRC32C or consistency fails) are counted and left out. Every decodable header, committed or
 * not, raises the generation floor, so a generation that was ever advertised is never handed out again; the ring
 * resumes after the slot holding the highest generation, so the oldest extent is overwritten first across restarts.
 * One scan per store, run once before the store is published; the first I/O failure fails it (after the outstanding
 * reads completed, so no block is still lent).
 */
final class SsdRecoveryScan {

    /** What the scan found; {@code newestPosition} is -1 when no slot held a decodable header. */
    record Outcome(long nextGeneration, long nextCommitSequence, int newestPosition, long torn, long corrupt,
                   long duplicates, long elapsedNanos) {

        double seconds() {
            return elapsedNanos / 1e9;
        }
    }

    private final SsdSettings settings;
    private final RoleLoop loop;
    private final IoUringFileIo io;
    private final SsdLayout layout;
    private final SsdIndex index;
    private final SsdBuffers buffers;
    private final CompletableFuture<Outcome> done = new CompletableFuture<>();
    private long startNanos;
    private int next;
    private int outstanding;
    private Throwable failure;
    private long maxGeneration;
    private int maxGenerationPosition = -1;
    private long maxCommitSequence;
    private long torn;
    private long corrupt;
    private long duplicates;

    SsdRecoveryScan(SsdStore.Parts parts) {
        this.settings = parts.settings();
        this.loop = parts.loop();
        this.io = parts.io();
        this.layout = parts.layout();
        this.index = parts.index();
        this.buffers = parts.buffers();
    }

    /** Starts the scan (role thread); the result completes on the role thread. */
    CompletableFuture<Outcome> run() {
        startNanos = settings.ticker().nanos();
        pump();
        return done;
    }

    private void pump() {
        int depth = settings.recoveryScanDepth();
        while (failure == null && next < layout.size() && outstanding < depth && buffers.hasBlock()) {
            Extent extent = layout.at(next++);
            MemorySegment block = buffers.takeBlock();
            outstanding++;
            io.read(extent.shard.file, extent.fileOffset, block, IoLane.RESTORE).whenComplete((bytes, failure) ->
                    loop.execute(() -> onHeaderRead(extent, block, bytes, failure)));
        }
        if (outstanding == 0 && (failure != null || next == layout.size())) {
            if (failure != null) {
                done.completeExceptionally(failure);
            } else {
                done.complete(new Outcome(maxGeneration + 1, maxCommitSequence + 1, maxGenerationPosition, torn,
                        corrupt, duplicates, settings.ticker().nanos() - startNanos));
            }
        }
    }

    private void onHeaderRead(Extent extent, MemorySegment block, Integer bytes, Throwable readFailure) {
        outstanding--;
        if (readFailure != null) {
            if (failure == null) {
                failure = readFailure;
            }
        } else if (bytes == BLOCK_BYTES) {
            classify(extent, SsdExtentHeader.decodeHeader(block));
        }
        buffers.returnBlock(block);
        pump();
    }

    private void classify(Extent extent, ExtentDecodeResult result) {
        extent.headerMayBeCommitted = result.isValid();
        switch (result) {
            case ExtentDecodeResult.NotAnExtent ignored -> {
            }
            case ExtentDecodeResult.Corrupt ignored -> corrupt++;
            case ExtentDecodeResult.Torn tornHeader -> {
                torn++;
                if (tornHeader.header() != null) {
                    noteGeneration(extent, tornHeader.header());
                }
            }
            case ExtentDecodeResult.Valid(SsdExtentHeader header) -> {
                noteGeneration(extent, header);
                StateKey key;
                try {
                    key = StateKey.of(header.namespace(), header.groupId(), header.blockHash());
                } catch (IllegalArgumentException e) {
                    corrupt++;
                    return;
                }
                if (header.payloadLength() <= 0 || header.payloadLength() > settings.maxPayloadBytes()) {
                    corrupt++;
                    return;
                }
                Extent previous = index.get(key);
                if (previous != null) {
                    duplicates++;
                    if (previous.generation >= header.generation()) {
                        return;
                    }
                    previous.clear();
                }
                extent.state = ExtentState.COMMITTED;
                extent.key = key;
                extent.generation = header.generation();
                extent.payloadLength = header.payloadLength();
                extent.payloadCrc = header.payloadCrc32c();
                index.add(extent);
            }
        }
    }

    private void noteGeneration(Extent extent, SsdExtentHeader header) {
        if (header.generation() > maxGeneration) {
            maxGeneration = header.generation();
            maxGenerationPosition = extent.position;
        }
        maxCommitSequence = Math.max(maxCommitSequence, header.commitSequence());
    }
}
