package io.orbitkv.ssd;

import static io.orbitkv.ssd.SsdLayout.BLOCK_BYTES;

import io.orbitkv.codecs.extent.ExtentDecodeResult;
import io.orbitkv.codecs.extent.SsdExtentHeader;
import io.orbitkv.nativeio.uring.IoLane;
import io.orbitkv.nativeio.uring.IoUringFileIo;
import io.orbitkv.ssd.SsdLayout.Extent;
import io.orbitkv.ssd.SsdLayout.ExtentState;
import io.orbitkv.ssd.SsdLayout.Region;
import io.orbitkv.model.StateKey;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;

/**
 * The open-time scan that rebuilds the index by walking each region's chain of page headers.
 *
 * <h2>Design note</h2>
 * <p>Each region is walked from offset 0: read the 4 KiB header block there (on the RESTORE lane, into a block of
 * {@link SsdBuffers} held by the walk until it ends), classify it on the role thread, and go on at the end of the page
 * it describes. Up to {@link SsdSettings#recoveryScanDepth} regions are walked at once. A walk goes on past a
 * committed page (indexed; of two pages of one key the newer generation wins and the older counts as a duplicate) and
 * past a torn one (commit flag 0, counted, not indexed: its intent header gives its length). It stops at the first
 * block that is not a header of this fill: no header (the fill's end, or never written) or a header whose generation
 * is not above the previous one's (left over from an earlier fill of the region: within a fill, pages are reserved in
 * file order and generations grow). A corrupt header (counted) is skipped block by block up to the next header of
 * the fill, so bit rot in one header loses only that page. That stop never hides a committed page, because the
 * commit protocol commits a page only after the header of every earlier page of its region's fill is on disk
 * (see {@link SsdCommitProtocol}). Every decodable header of a fill, committed or not, raises the generation floor, so
 * a generation that was ever advertised is never handed out again. The region keeps its age (its first page's
 * generation) and its append cursor (the walk's end). One scan per store, run once before the store is published;
 * the first I/O failure fails it (after the outstanding reads completed, so no block is still lent).
 */
final class SsdRecoveryScan {

    /** What the scan found. */
    record Outcome(long nextGeneration, long nextCommitSequence, long torn, long corrupt, long duplicates,
                   long elapsedNanos) {

        double seconds() {
            return elapsedNanos / 1e9;
        }
    }

    /** One region's walk: where its next header is and the generation before it. */
    private static final class Walk {
        final Region region;
        final MemorySegment block;
        long lastGeneration = -1;
        /** Where the next header block is read. */
        long offset;
        /** After a corrupt header: looking block by block for the next header of this fill. */
        boolean resyncing;

        Walk(Region region, MemorySegment block) {
            this.region = region;
            this.block = block;
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
    private int nextRegion;
    private int walking;
    private Throwable failure;
    private long maxGeneration;
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
        while (failure == null && nextRegion < layout.regionCount() && walking < depth && buffers.hasBlock()) {
            walking++;
            readNext(new Walk(layout.region(nextRegion++), buffers.takeBlock()));
        }
        if (walking == 0 && (failure != null || nextRegion == layout.regionCount())) {
            if (failure != null) {
                done.completeExceptionally(failure);
            } else {
                done.complete(new Outcome(maxGeneration + 1, maxCommitSequence + 1, torn, corrupt, duplicates,
                        settings.ticker().nanos() - startNanos));
            }
        }
    }

    private void readNext(Walk walk) {
        Region region = walk.region;
        io.read(region.shard.file, region.fileOffset + walk.offset, walk.block, IoLane.RESTORE)
                .whenComplete((bytes, readFailure) -> loop.execute(() -> onHeaderRead(walk, bytes, readFailure)));
    }

    private void onHeaderRead(Walk walk, Integer bytes, Throwable readFailure) {
        boolean more = false;
        if (readFailure != null) {
            if (failure == null) {
                failure = readFailure;
            }
        } else if (failure == null && bytes == BLOCK_BYTES) {
            more = classify(walk, SsdExtentHeader.decodeHeader(walk.block))
                    && walk.offset + 2L * BLOCK_BYTES <= walk.region.bytes;
        }
        if (more) {
            readNext(walk);
            return;
        }
        buffers.returnBlock(walk.block);
        walking--;
        pump();
    }

    /** Takes the header at the walk's position into the region; answers whether the walk goes on. */
    private boolean classify(Walk walk, ExtentDecodeResult result) {
        SsdExtentHeader header = switch (result) {
            case ExtentDecodeResult.Valid valid -> valid.header();
            case ExtentDecodeResult.Torn tornHeader -> tornHeader.header();
            case ExtentDecodeResult.Corrupt ignored -> null;
            case ExtentDecodeResult.NotAnExtent ignored -> null;
        };
        Region region = walk.region;
        long length = header == null ? 0 : header.payloadLength();
        long span = BLOCK_BYTES + SsdLayout.alignUp(length);
        boolean plausible = header != null && length > 0 && length <= settings.maxPayloadBytes()
                && walk.offset + span <= region.bytes;
        if (header != null && header.generation() <= walk.lastGeneration) {
            plausible = false; // left over from an earlier fill
        } else if (!plausible && (header != null || result instanceof ExtentDecodeResult.Corrupt)) {
            // A damaged header of this fill (bit rot): its length is unknown, so the next header is looked for block
            // by block. A fill's regular end is never a damaged header (see the class note), so this stays rare.
            if (!walk.resyncing) {
                corrupt++;
                walk.resyncing = true;
            }
        }
        if (!plausible) {
            walk.offset += BLOCK_BYTES;
            return walk.resyncing;
        }
        walk.resyncing = false;
        if (walk.offset > region.appendOffset) {
            region.append(walk.offset - region.appendOffset); // the damaged page: dead space until reclaimed
        }
        walk.lastGeneration = header.generation();
        maxGeneration = Math.max(maxGeneration, header.generation());
        maxCommitSequence = Math.max(maxCommitSequence, header.commitSequence());
        if (region.firstGeneration < 0) {
            region.firstGeneration = header.generation();
        }
        Extent page = region.append(span);
        walk.offset = region.appendOffset;
        page.generation = header.generation();
        if (!(result instanceof ExtentDecodeResult.Valid)) {
            torn++;
            return true;
        }
        StateKey key;
        try {
            key = StateKey.of(header.namespace(), header.groupId(), header.blockHash());
        } catch (IllegalArgumentException e) {
            corrupt++;
            return true;
        }
        Extent previous = index.get(key);
        if (previous != null) {
            duplicates++;
            if (previous.generation >= header.generation()) {
                return true;
            }
            previous.clear();
        }
        page.state = ExtentState.COMMITTED;
        page.key = key;
        page.payloadLength = length;
        page.payloadCrc = header.payloadCrc32c();
        index.add(page);
        return true;
    }
}
