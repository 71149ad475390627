package io.orbitkv.ssd;

import io.orbitkv.codecs.extent.SsdExtentHeader;
import io.orbitkv.nativeio.libc.Libc;
import io.orbitkv.nativeio.libc.NativeIoException;
import io.orbitkv.nativeio.uring.IoUringFileIo;
import io.orbitkv.nativeio.uring.UringFile;
import io.orbitkv.model.StateKey;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Where the SSD tier's bytes live: shard files cut into fixed extent slots, used as one ring.
 *
 * <pre>
 *   shard-000.okv: | slot 0 (ring 0) | slot 1 (ring 2) | slot 2 (ring 4) | ...
 *   shard-001.okv: | slot 0 (ring 1) | slot 1 (ring 3) | slot 2 (ring 5) | ...
 *   one slot:      [SsdExtentHeader block: 4096][payload][zero padding to 4096]
 * </pre>
 *
 * <p>Design note: each shard file {@code shard-NNN.okv} (mode 0600, O_DIRECT|O_RDWR, preallocated with fallocate
 * unless {@link SsdSettings#preallocate} is off) holds {@code extentsPerShard} slots of {@code extentBytes}. Ring
 * position {@code p} maps to shard {@code p % shards}, slot {@code p / shards}, so consecutive writes alternate shards.
 * When O_DIRECT open fails with EINVAL (a file system without direct I/O) the shard is opened buffered, a warning is
 * logged and {@link #directIo()} reads false. The descriptors belong to the {@link IoUringFileIo} that opened them and
 * close with it. Everything here except the direct-I/O flag's volatile mirror is confined to the store's role thread
 * (the shards are opened from io_uring completions, before the store is published).
 */
final class SsdLayout {

    private static final Logger LOG = LoggerFactory.getLogger(SsdStore.class);
    static final int BLOCK_BYTES = SsdExtentHeader.HEADER_BLOCK_BYTES;
    /** engine.proto Representation.RAW: raw engine page bytes. */
    static final int REPRESENTATION_RAW = 1;

    enum ExtentState { FREE, WRITING, COMMITTED, RETIRING }

    /** One slot of the ring. Role-thread confined. */
    static final class Extent {
        final int position;
        final Shard shard;
        final long fileOffset;
        ExtentState state = ExtentState.FREE;
        StateKey key;
        long generation = -1;
        long payloadLength;
        int payloadCrc;
        int pins;
        /**
         * False only while the slot's on-disk header is known not to decode as committed (never written, zeroed,
         * uncommitted intent, corrupt): then a write may skip its intent step (nothing to invalidate). Set true as a
         * commit header is issued (it may land even if we never see the completion) and by the scan for valid
         * headers.
         */
        boolean headerMayBeCommitted = true;

        Extent(int position, Shard shard, long fileOffset) {
            this.position = position;
            this.shard = shard;
            this.fileOffset = fileOffset;
        }

        void clear() {
            state = ExtentState.FREE;
            key = null;
            generation = -1;
            payloadLength = 0;
        }

        long payloadOffset() {
            return fileOffset + BLOCK_BYTES;
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
    private final Extent[] extents;
    private int cursor;
    private volatile boolean directIo = true;

    SsdLayout(SsdSettings settings) {
        this.settings = settings;
        int shardCount = settings.shardCount();
        this.shards = new Shard[shardCount];
        for (int i = 0; i < shardCount; i++) {
            shards[i] = new Shard(settings.directory().resolve(String.format("shard-%03d.okv", i)));
        }
        this.extents = new Extent[settings.extentsPerShard() * shardCount];
        for (int p = 0; p < extents.length; p++) {
            extents[p] = new Extent(p, shards[p % shardCount], (long) (p / shardCount) * settings.extentBytes());
        }
    }

    int size() {
        return extents.length;
    }

    Extent at(int position) {
        return extents[position];
    }

    /** Whether the shards are open with O_DIRECT (false after the buffered fallback). Any thread. */
    boolean directIo() {
        return directIo;
    }

    int pinnedExtents() {
        int pinned = 0;
        for (Extent extent : extents) {
            if (extent.pins > 0) {
                pinned++;
            }
        }
        return pinned;
    }

    /** The slot under the ring cursor; advances the cursor. */
    Extent nextInRing() {
        Extent extent = extents[cursor];
        cursor = (cursor + 1) % extents.length;
        return extent;
    }

    /** Places the ring cursor after {@code position} (the slot holding the newest generation), or at 0 when -1. */
    void resumeAfter(int position) {
        cursor = position < 0 ? 0 : (position + 1) % extents.length;
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
