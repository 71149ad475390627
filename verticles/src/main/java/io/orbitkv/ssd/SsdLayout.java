package io.orbitkv.ssd;

import io.orbitkv.codecs.extent.SsdExtentHeader;
import io.orbitkv.nativeio.libc.Libc;
import io.orbitkv.nativeio.libc.NativeIoException;
import io.orbitkv.nativeio.uring.IoUringFileIo;
import io.orbitkv.nativeio.uring.UringFile;
import io.orbitkv.model.StateKey;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Where the SSD tier's bytes live: shard files cut into regions, each region an append-only log of pages.
 *
 * <pre>
 *   shard-000.okv: | region 0 | region 1 | ... | region n-1 (takes the rest of the shard) |
 *   one region:    [hdr][payload 64 KiB][hdr][payload 1 MiB][hdr][payload 256 KiB] ... [unused tail]
 *   one page:      [SsdExtentHeader block: 4096][payload][zero padding to 4096]
 * </pre>
 *
 * <h2>Design note</h2>
 * <p><b>Layout.</b> A page takes 4 KiB + its length rounded up to 4 KiB, whatever {@link SsdSettings#extentBytes}
 * (which only bounds the largest page). Pages are appended to an open region one after the other, so each page's
 * header says where the next one starts: recovery walks a region from offset 0 with one 4 KiB read per page (see
 * {@link SsdRecoveryScan}); nothing else is on disk, and nothing written is ever changed in place except a page's own
 * header (intent, then commit; invalidation after a failed checksum). Why a log per region rather than size classes:
 * pages of any size pack with no rounding beyond 4 KiB (classes waste up to their step and need a class record per
 * region), and the allocator is a cursor. The price is eviction by region rather than by page.
 *
 * <p><b>Allocation and eviction.</b> Up to {@link #OPEN_REGIONS} regions are open at once and a page goes to the
 * first that has room (so a small page fills the tail a large page left). When none has room the oldest open region
 * is closed (its tail stays unused) and a region is reclaimed: an empty one if any, else the one whose fill is the
 * oldest (lowest generation of its first page), FIFO over regions. Every committed page of a reclaimed region leaves
 * the index first ({@code OVERWRITTEN}), before any byte of the region changes; a region holding a pinned page or a
 * write in progress is skipped ({@code overwrite_refused}). Fragmentation is bounded: per region, at most the tail
 * of its two open periods (less than one largest page each) and 4 KiB per page; a region is at least one
 * extent, at most 16, and a shard has about 8 regions or more so that eviction takes at most an eighth of it.
 * After a restart the recovered regions keep their age (their first generation), empty regions are used first and
 * the newest non-full region goes on being filled, so recovered pages are evicted by the same rule as any other.
 *
 * <p><b>Files.</b> Each shard file {@code shard-NNN.okv} (mode 0600, O_DIRECT|O_RDWR, preallocated with fallocate
 * unless {@link SsdSettings#preallocate} is off) holds {@link SsdSettings#regionsPerShard} regions; region {@code r}
 * lies in shard {@code r % shards}, so consecutive regions alternate shards. When O_DIRECT open fails with EINVAL (a
 * file system without direct I/O) the shard is opened buffered, a warning is logged and {@link #directIo()} reads
 * false. The descriptors belong to the {@link IoUringFileIo} that opened them and close with it. Everything here
 * except the direct-I/O flag's volatile mirror is confined to the store's role thread.
 */
final class SsdLayout {

    private static final Logger LOG = LoggerFactory.getLogger(SsdStore.class);
    static final int BLOCK_BYTES = SsdExtentHeader.HEADER_BLOCK_BYTES;
    /** engine.proto Representation.RAW: raw engine page bytes. */
    static final int REPRESENTATION_RAW = 1;
    /** Regions filled at once: a second one lets small pages use the tail a large page could not. */
    static final int OPEN_REGIONS = 2;

    enum ExtentState { FREE, WRITING, COMMITTED, RETIRING }

    /** One page on disk (its header block and payload) in a region. Role-thread confined. */
    static final class Extent {
        final Region region;
        final long fileOffset;
        final long spanBytes;
        ExtentState state = ExtentState.FREE;
        StateKey key;
        long generation = -1;
        long payloadLength;
        int payloadCrc;
        int pins;

        Extent(Region region, long fileOffset, long spanBytes) {
            this.region = region;
            this.fileOffset = fileOffset;
            this.spanBytes = spanBytes;
        }

        void clear() {
            state = ExtentState.FREE;
            key = null;
            payloadLength = 0;
        }

        long payloadOffset() {
            return fileOffset + BLOCK_BYTES;
        }

        Shard shard() {
            return region.shard;
        }
    }

    /** One region: its pages in file order and the append cursor. Role-thread confined. */
    static final class Region {
        final int index;
        final Shard shard;
        final long fileOffset;
        final long bytes;
        final List<Extent> pages = new ArrayList<>();
        long appendOffset;
        /** Generation of the first page of the current fill (its age for eviction); -1 while empty. */
        long firstGeneration = -1;
        int writing;
        /**
         * Completes once the header block of every page reserved so far in this fill is on disk (each page's first
         * write, see {@link SsdCommitProtocol}); fails when one of those writes failed.
         */
        CompletableFuture<Void> headersLanded = CompletableFuture.completedFuture(null);
        /** Completes once the header of this fill's first page is on disk; the other pages' writes wait for it. */
        CompletableFuture<Void> opened = CompletableFuture.completedFuture(null);
        /** True from a failed write until the region is reclaimed: nothing more is appended (its chain may break). */
        boolean broken;

        Region(int index, Shard shard, long fileOffset, long bytes) {
            this.index = index;
            this.shard = shard;
            this.fileOffset = fileOffset;
            this.bytes = bytes;
        }

        boolean fits(long span) {
            return !broken && appendOffset + span <= bytes;
        }

        Extent append(long span) {
            Extent page = new Extent(this, fileOffset + appendOffset, span);
            appendOffset += span;
            pages.add(page);
            return page;
        }

        int pinnedPages() {
            int pinned = 0;
            for (Extent page : pages) {
                if (page.pins > 0) {
                    pinned++;
                }
            }
            return pinned;
        }

        /** Forgets every page (their evidence already withdrawn) and starts a new fill. */
        void reset() {
            pages.clear();
            appendOffset = 0;
            firstGeneration = -1;
            broken = false;
            headersLanded = CompletableFuture.completedFuture(null);
            opened = CompletableFuture.completedFuture(null);
        }
    }

    static final class Shard {
        final Path path;
        UringFile file;

        Shard(Path path) {
            this.path = path;
        }
    }

    private final SsdSettings settings;
    private final Shard[] shards;
    private final Region[] regions;
    private final ArrayDeque<Region> open = new ArrayDeque<>();
    private volatile boolean directIo = true;

    SsdLayout(SsdSettings settings) {
        this.settings = settings;
        int shardCount = settings.shardCount();
        this.shards = new Shard[shardCount];
        for (int i = 0; i < shardCount; i++) {
            shards[i] = new Shard(settings.directory().resolve(String.format("shard-%03d.okv", i)));
        }
        int perShard = settings.regionsPerShard();
        long regionBytes = settings.regionBytes();
        this.regions = new Region[perShard * shardCount];
        for (int r = 0; r < regions.length; r++) {
            int slot = r / shardCount;
            long bytes = slot == perShard - 1 ? settings.shardBytes() - slot * regionBytes : regionBytes;
            regions[r] = new Region(r, shards[r % shardCount], slot * regionBytes, bytes);
        }
    }

    int regionCount() {
        return regions.length;
    }

    Region region(int index) {
        return regions[index];
    }

    /** Whether the shards are open with O_DIRECT (false after the buffered fallback). Any thread. */
    boolean directIo() {
        return directIo;
    }

    int pinnedExtents() {
        int pinned = 0;
        for (Region region : regions) {
            pinned += region.pinnedPages();
        }
        return pinned;
    }

    /** The open regions, first-fit order. */
    ArrayDeque<Region> openRegions() {
        return open;
    }

    /** Opens {@code region} for appends; the oldest open one closes when {@link #OPEN_REGIONS} are open already. */
    void markOpen(Region region) {
        if (open.size() >= OPEN_REGIONS) {
            open.pollFirst();
        }
        open.addLast(region);
    }

    /** Takes {@code region} off the open list (it broke, or it is being reclaimed). */
    void close(Region region) {
        open.remove(region);
    }

    /**
     * The region to reclaim next: an empty one if any (lowest index), else the one whose fill is oldest; never an
     * open one, one being written or one holding a pinned page (each of those skipped is reported to
     * {@code refused}). Null when there is none.
     */
    Region oldestReclaimable(Runnable refused) {
        Region best = null;
        for (Region region : regions) {
            if (open.contains(region)) {
                continue;
            }
            if (region.writing > 0 || region.pinnedPages() > 0) {
                if (region.pinnedPages() > 0) {
                    refused.run();
                }
                continue;
            }
            if (best == null || age(region) < age(best)) {
                best = region;
            }
        }
        return best;
    }

    private static long age(Region region) {
        return region.pages.isEmpty() ? -1 : region.firstGeneration;
    }

    /**
     * Opens (creating when absent) and sizes every shard, one after the other. Fails with an
     * {@link IllegalStateException} naming the shard when it cannot be opened or sized.
     */
    CompletableFuture<Void> openShards(IoUringFileIo io) {
        CompletableFuture<Void> chain = CompletableFuture.completedFuture(null);
        for (Shard shard : shards) {
            chain = chain.thenCompose(ignored -> openShard(io, shard));
        }
        return chain;
    }

    private CompletableFuture<Void> openShard(IoUringFileIo io, Shard shard) {
        int flags = Libc.O_RDWR | Libc.O_CREAT;
        CompletableFuture<UringFile> opened = settings.simulateDirectIoUnsupported
                ? CompletableFuture.failedFuture(new NativeIoException("open", shard.path, NativeIoException.EINVAL,
                        "simulated: no O_DIRECT"))
                : io.open(shard.path, flags | Libc.O_DIRECT, Libc.MODE_0600);
        return opened.exceptionallyCompose(failure -> {
            if (SsdStore.unwrap(failure) instanceof NativeIoException e && e.errno() == NativeIoException.EINVAL) {
                LOG.warn("SSD shard {}: O_DIRECT is not supported here (EINVAL); falling back to buffered I/O, "
                        + "reads and writes go through the page cache", shard.path);
                directIo = false;
                return io.open(shard.path, flags, Libc.MODE_0600);
            }
            return CompletableFuture.failedFuture(failure);
        }).handle((file, failure) -> {
            if (failure != null) {
                Throwable cause = SsdStore.unwrap(failure);
                throw new CompletionException(new IllegalStateException("cannot open SSD shard " + shard.path + ": "
                        + cause.getMessage(), cause));
            }
            shard.file = file;
            return file;
        }).thenCompose(io::size).thenCompose(size -> {
            long wanted = settings.shardBytes();
            if (settings.preallocate()) {
                return io.fallocate(shard.file, 0, 0, wanted);
            }
            return size < wanted ? io.truncate(shard.file, wanted) : CompletableFuture.completedFuture(null);
        }).handle((ignored, failure) -> {
            if (failure != null) {
                Throwable cause = SsdStore.unwrap(failure);
                if (cause instanceof IllegalStateException) {
                    throw new CompletionException(cause);
                }
                throw new CompletionException(new IllegalStateException("cannot size SSD shard " + shard.path
                        + " to " + settings.shardBytes() + " bytes: " + cause.getMessage(), cause));
            }
            return null;
        });
    }

    static long alignUp(long bytes) {
        return (bytes + BLOCK_BYTES - 1) & -BLOCK_BYTES;
    }
}
