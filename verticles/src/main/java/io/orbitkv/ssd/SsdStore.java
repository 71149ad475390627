package io.orbitkv.ssd;

import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.codecs.extent.Crc32c;
import io.orbitkv.codecs.extent.ExtentDecodeResult;
import io.orbitkv.codecs.extent.SsdExtentHeader;
import io.orbitkv.common.Ticker;
import io.orbitkv.nativeio.libc.Libc;
import io.orbitkv.nativeio.libc.NativeIoException;
import io.orbitkv.nativeio.uring.FileIoFuture;
import io.orbitkv.nativeio.uring.FileIoRejectedException;
import io.orbitkv.nativeio.uring.IoLane;
import io.orbitkv.nativeio.uring.IoUringFileIo;
import io.orbitkv.nativeio.uring.IoUringFileIoOptions;
import io.orbitkv.nativeio.uring.UringFile;
import io.orbitkv.storage.StateKey;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The SSD tier of one Manager: shard files divided into fixed extent slots used as a ring, an in-memory index of
 * committed extents rebuilt from the extent headers on open, io_uring reads and writes, write admission and
 * exact-generation read leases.
 *
 * <h2>Design note</h2>
 * <p><b>Threads.</b> All state is confined to one {@link RoleLoop} thread (the SSD verticle's event loop); every
 * public method except {@link #close()} and {@link #open} must be called there ({@code IllegalStateException}
 * otherwise). I/O runs on the {@link IoUringFileIo} loop; its completions hop back through {@link RoleLoop#execute}
 * before touching anything. The steps of one write are chained on the io_uring loop itself (they only touch the
 * write's own staging buffer, prepared beforehand), so an extent costs one hop in and one hop out: thread hand-offs,
 * not bytes, dominate under CPU contention. Nothing here blocks: queues are bounded, full ones drop (writes) or fail (reads) at once.
 *
 * <p><b>Layout.</b> Each shard file {@code shard-NNN.okv} (mode 0600, O_DIRECT|O_RDWR, preallocated with fallocate
 * unless {@link SsdSettings#preallocate} is off) holds {@code extentsPerShard} slots of {@code extentBytes}. A slot is
 * {@code [SsdExtentHeader block: 4096][payload][zero padding to 4096]}. Ring position {@code p} maps to shard
 * {@code p % shards}, slot {@code p / shards}, so consecutive writes alternate shards. When O_DIRECT open fails with
 * EINVAL (a file system without direct I/O) the shard is opened buffered, a warning is logged and the
 * {@code orbitkv.ssd.direct.io} gauge reads 0.
 *
 * <p><b>Generations.</b> Every write of a slot gets a fresh 64-bit generation from one counter; on open the counter
 * restarts at (highest generation found in any decodable header, committed or not) + 1, and the ring cursor at the
 * slot after the one holding that generation, so the oldest extent is overwritten first across restarts. A write
 * persists its generation in its intent header (below) or at the latest in its commit header, so a generation that
 * was ever committed, hence advertised, is never handed out again after a crash (only the generation of a write that
 * never committed can be reused, and nobody holds evidence of it). A commit sequence (header field) orders commits.
 *
 * <p><b>Write order (the commit protocol).</b> A write leaves the bounded queue when an extent-sized staging buffer
 * (owned here, 4096-aligned) is free. Then, on the role thread: (0) the weak source is acquired (null: dropped
 * {@code SOURCE_EVICTED}), copied into the staging buffer, released; the payload CRC32C is computed; (1) the ring
 * reserves the next slot, skipping slots pinned by leases ({@code overwrite_refused}) or busy; if the slot held a
 * committed extent, that extent leaves the index and {@link SsdResidencyChange.Cause#OVERWRITTEN} is emitted — before
 * any byte of the slot changes. On disk, strictly one after the other (each step is issued, from the io_uring loop, only after the
 * previous one completed; with {@link SsdSettings#syncWrites} an fdatasync separates them too):
 * <ol>
 *   <li><b>intent</b>: a 4 KiB header for the new key and generation with commit flag 0. It replaces the old header,
 *       so from now on the slot decodes as "torn" and the old key can never come back with new bytes;</li>
 *   <li><b>payload</b>: the payload and its padding, at header offset + 4096;</li>
 *   <li><b>commit</b>: the same header with commit flag 1, the commit sequence (reservation order) and the payload
 *       CRC32C. Its completion
 *       is the publication boundary: only then is the extent indexed, advertised ({@code SSD_ADDED}) and served.</li>
 * </ol>
 * Why nothing torn is ever served: a crash before (3) completes leaves the intent header (commit flag 0: decodes
 * torn, not indexed) or a partially written commit header (header CRC32C over the whole block fails: corrupt, not
 * indexed). A commit header is only issued after the whole payload write completed, so a decodable committed header
 * implies the payload was written. Independently, every read verifies the payload CRC32C against the destination
 * bytes; a mismatch (bit rot, a flipped byte, a lost write on power failure without syncWrites) drops the extent from
 * the index ({@code SSD_REMOVED}, cause CORRUPT), counts it and fails the read with {@link SsdFailure#CHECKSUM_MISMATCH}.
 *
 * <p><b>Buffers.</b> One shared {@link Arena} owned by this store holds: staging buffers (extent + 4 KiB: intent
 * header, payload, commit header; one per write in progress, returned when the write ends in any way), bounce buffers (payload-sized, only for reads into
 * unaligned destinations), and 4 KiB blocks (header scans, read tails, header invalidations). A buffer lent to an I/O
 * returns to its pool only when that I/O's completion arrived, even when the request was cancelled or the store is
 * closing; the arena is closed only after the io_uring instance closed (all completions arrived) and after the
 * completions' hops ran on the role thread.
 *
 * <p><b>Reads.</b> {@link #acquireLease} pins one exact generation; the ring never reuses a pinned slot. A read pins it
 * too until its completion arrives, so releasing a lease during a read is safe. Reads go on the RESTORE lane, straight
 * into the caller's segment (a DRAM pool slot, 4096-aligned): the payload is read with its length rounded up to 4096
 * when the segment is that large ({@link SsdReadResult.ReadPath#DIRECT}); otherwise the aligned head goes straight in
 * and the last partial block through a 4 KiB bounce block ({@code DIRECT_WITH_TAIL}); an unaligned segment goes
 * through a payload-sized bounce buffer ({@code BOUNCE}, {@link SsdFailure#READ_BUSY} when none is free). Bytes beyond
 * {@code lengthBytes} in the destination are scratch in the DIRECT path.
 *
 * <p><b>Close.</b> Idempotent: queued writes are dropped ({@code CLOSED}), every indexed extent is reported removed
 * (cause CLOSED: the bytes stay on disk and come back on the next open), leases end, the io_uring instance closes
 * (in-flight I/O completes first), then the arena is freed. Descriptors belong to the io_uring instance.
 */
public final class SsdStore {

    private static final Logger LOG = LoggerFactory.getLogger(SsdStore.class);
    static final int BLOCK_BYTES = SsdExtentHeader.HEADER_BLOCK_BYTES;
    /** engine.proto Representation.RAW: raw engine page bytes. */
    static final int REPRESENTATION_RAW = 1;
    private static final AtomicLong LIVE_NATIVE_BYTES = new AtomicLong();

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
    }

    static final class Shard {
        final Path path;
        UringFile file;

        Shard(Path path) {
            this.path = path;
        }
    }

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
        final java.util.concurrent.atomic.AtomicBoolean sourceReleased = new java.util.concurrent.atomic.AtomicBoolean();

        void releaseSource() {
            if (payloadSource != null && sourceReleased.compareAndSet(false, true)) {
                write.source().release();
            }
        }

        WriteOp(PendingWrite write, Extent extent, MemorySegment staging, long generation, int crc, long startNanos) {
            this.write = write;
            this.extent = extent;
            this.staging = staging;
            this.generation = generation;
            this.crc = crc;
            this.startNanos = startNanos;
        }
    }

    private static final class LeaseState {
        final SsdLease lease;
        final Extent extent;

        LeaseState(SsdLease lease, Extent extent) {
            this.lease = lease;
            this.extent = extent;
        }
    }

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

    private final SsdSettings settings;
    private final RoleLoop loop;
    private final SsdListener listener;
    private final SsdMetrics metrics;
    private final Ticker ticker;
    private final long maxPayloadBytes;
    private final Shard[] shards;
    private final Extent[] extents;
    private final Map<StateKey, Extent> index = new HashMap<>();
    private final Set<StateKey> pendingKeys = new HashSet<>();
    private final ArrayDeque<PendingWrite> pendingWrites = new ArrayDeque<>();
    private final Map<Long, LeaseState> leases = new HashMap<>();
    private final ArrayDeque<MemorySegment> freeStaging = new ArrayDeque<>();
    private final ArrayDeque<MemorySegment> freeBounce = new ArrayDeque<>();
    private final ArrayDeque<MemorySegment> freeBlocks = new ArrayDeque<>();
    private final ReuseAwareFilter reuse;
    private final CompletableFuture<Void> closeFuture = new CompletableFuture<>();

    private volatile IoUringFileIo io;
    private Arena arena;
    private long nativeBytes;
    private boolean directIo = true;
    private int cursor;
    private long nextGeneration = 1;
    private long nextCommitSequence = 1;
    private long nextLeaseId = 1;
    private int writesInFlight;
    private int readsInFlight;
    private boolean closed;
    private volatile int pendingWritesGauge;
    private volatile int committedExtentsGauge;
    private volatile double recoverySeconds;
    private volatile boolean directIoGauge = true;
    private long recoveryTorn;
    private long recoveryCorrupt;
    private long recoveryDuplicates;
    // Open-time scan state.
    private int scanNext;
    private int scanOutstanding;
    private Throwable scanFailure;
    private long maxGenerationSeen;
    private int maxGenerationPosition = -1;
    private long maxCommitSequenceSeen;

    private SsdStore(SsdSettings settings, RoleLoop loop, SsdListener listener, MeterRegistry registry) {
        this.settings = settings;
        this.loop = loop;
        this.listener = listener;
        this.ticker = settings.ticker();
        this.maxPayloadBytes = settings.maxPayloadBytes();
        this.metrics = new SsdMetrics(registry);
        this.reuse = new ReuseAwareFilter(settings.reuseAwareCapacity());
        int shardCount = settings.shardCount();
        this.shards = new Shard[shardCount];
        for (int i = 0; i < shardCount; i++) {
            shards[i] = new Shard(settings.directory().resolve(String.format("shard-%03d.okv", i)));
        }
        int perShard = settings.extentsPerShard();
        this.extents = new Extent[perShard * shardCount];
        for (int p = 0; p < extents.length; p++) {
            extents[p] = new Extent(p, shards[p % shardCount], (long) (p / shardCount) * settings.extentBytes());
        }
        metrics.registerGauges(this, () -> io);
    }

    // ------------------------------------------------------------------------------------------------ open

    /**
     * Opens (creating when absent) the shard files in {@code settings.directory()} and rebuilds the index from their
     * extent headers. Completes on the role thread. Fails with an {@link IllegalStateException} naming the path when
     * the directory is missing, not a directory or not writable, or a shard cannot be created or sized. Committed
     * extents found are reported to {@code listener} as {@code SSD_ADDED} (cause RECOVERED) before it completes.
     */
    public static CompletableFuture<SsdStore> open(SsdSettings settings, RoleLoop loop, SsdListener listener,
                                                   MeterRegistry registry) {
        Objects.requireNonNull(settings, "settings");
        Objects.requireNonNull(loop, "loop");
        Objects.requireNonNull(listener, "listener");
        Objects.requireNonNull(registry, "registry");
        CompletableFuture<SsdStore> result = new CompletableFuture<>();
        loop.execute(() -> {
            SsdStore store;
            try {
                settings.validate();
                checkDirectory(settings.directory());
                if (!IoUringFileIo.isAvailable()) {
                    throw new IllegalStateException("io_uring file I/O is unavailable: "
                            + IoUringFileIo.unavailabilityCause());
                }
                store = new SsdStore(settings, loop, listener, registry);
            } catch (RuntimeException e) {
                result.completeExceptionally(e);
                return;
            }
            CompletableFuture<Void> started;
            try {
                started = store.start();
            } catch (RuntimeException e) {
                started = CompletableFuture.failedFuture(e);
            }
            started.whenComplete((ignored, failure) -> loop.execute(() -> {
                if (failure == null) {
                    result.complete(store);
                } else {
                    Throwable cause = unwrap(failure);
                    store.close().whenComplete((v, closeFailure) -> result.completeExceptionally(
                            cause instanceof IllegalStateException ? cause
                                    : new IllegalStateException("cannot open the SSD store in "
                                    + settings.directory() + ": " + cause.getMessage(), cause)));
                }
            }));
        });
        return result;
    }

    private static void checkDirectory(Path directory) {
        if (!Files.exists(directory)) {
            throw new IllegalStateException("SSD directory does not exist: " + directory);
        }
        if (!Files.isDirectory(directory)) {
            throw new IllegalStateException("SSD directory is not a directory: " + directory);
        }
        if (!Files.isWritable(directory)) {
            throw new IllegalStateException("SSD directory is not writable: " + directory);
        }
    }

    private CompletableFuture<Void> start() {
        int blocks = settings.smallBlocks();
        io = IoUringFileIo.create(new IoUringFileIoOptions()
                .maxInFlight(settings.queueDepth())
                .restoreQueueCapacity(settings.restoreQueueCapacity() + settings.recoveryScanDepth())
                // Our own writes are bounded by staging buffers and blocks, so the write lane never rejects.
                .writeQueueCapacity(settings.writeStagingBuffers() + blocks + 8)
                .threadName("orbitkv-ssd-uring"));
        long extentBytes = settings.extentBytes();
        long bounceBytes = alignUp(maxPayloadBytes);
        long stagingBytes = extentBytes + BLOCK_BYTES; // + the commit header block
        long stagingTotal = stagingBytes * settings.writeStagingBuffers();
        long bounceTotal = bounceBytes * settings.bounceBuffers();
        long blocksTotal = (long) BLOCK_BYTES * blocks;
        arena = Arena.ofShared();
        nativeBytes = stagingTotal + bounceTotal + blocksTotal;
        LIVE_NATIVE_BYTES.addAndGet(nativeBytes);
        MemorySegment staging = arena.allocate(stagingTotal, BLOCK_BYTES);
        for (int i = 0; i < settings.writeStagingBuffers(); i++) {
            freeStaging.add(staging.asSlice(i * stagingBytes, stagingBytes));
        }
        if (bounceTotal > 0) {
            MemorySegment bounce = arena.allocate(bounceTotal, BLOCK_BYTES);
            for (int i = 0; i < settings.bounceBuffers(); i++) {
                freeBounce.add(bounce.asSlice(i * bounceBytes, bounceBytes));
            }
        }
        MemorySegment small = arena.allocate(blocksTotal, BLOCK_BYTES);
        for (int i = 0; i < blocks; i++) {
            freeBlocks.add(small.asSlice((long) i * BLOCK_BYTES, BLOCK_BYTES));
        }
        CompletableFuture<Void> chain = CompletableFuture.completedFuture(null);
        for (Shard shard : shards) {
            chain = chain.thenCompose(ignored -> openShard(shard));
        }
        CompletableFuture<Void> scanned = new CompletableFuture<>();
        chain.whenComplete((ignored, failure) -> loop.execute(() -> {
            if (failure != null) {
                scanned.completeExceptionally(failure);
            } else {
                startScan(scanned);
            }
        }));
        return scanned;
    }

    private CompletableFuture<Void> openShard(Shard shard) {
        int flags = Libc.O_RDWR | Libc.O_CREAT;
        CompletableFuture<UringFile> opened = settings.simulateDirectIoUnsupported
                ? CompletableFuture.failedFuture(new NativeIoException("open", shard.path, NativeIoException.EINVAL,
                        "simulated: no O_DIRECT"))
                : io.open(shard.path, flags | Libc.O_DIRECT, Libc.MODE_0600);
        return opened.exceptionallyCompose(failure -> {
            if (unwrap(failure) instanceof NativeIoException e && e.errno() == NativeIoException.EINVAL) {
                LOG.warn("SSD shard {}: O_DIRECT is not supported here (EINVAL); falling back to buffered I/O, "
                        + "reads and writes go through the page cache", shard.path);
                directIo = false;
                directIoGauge = false;
                return io.open(shard.path, flags, Libc.MODE_0600);
            }
            return CompletableFuture.failedFuture(failure);
        }).handle((file, failure) -> {
            if (failure != null) {
                throw new CompletionException(new IllegalStateException("cannot open SSD shard " + shard.path + ": "
                        + unwrap(failure).getMessage(), unwrap(failure)));
            }
            shard.file = file;
            return file;
        }).thenCompose(file -> io.size(file)).thenCompose(size -> {
            long wanted = settings.shardBytes();
            if (settings.preallocate()) {
                return io.fallocate(shard.file, 0, 0, wanted);
            }
            return size < wanted ? io.truncate(shard.file, wanted) : CompletableFuture.completedFuture(null);
        }).handle((ignored, failure) -> {
            if (failure != null) {
                Throwable cause = unwrap(failure);
                if (cause instanceof IllegalStateException) {
                    throw new CompletionException(cause);
                }
                throw new CompletionException(new IllegalStateException("cannot size SSD shard " + shard.path
                        + " to " + settings.shardBytes() + " bytes: " + cause.getMessage(), cause));
            }
            return null;
        });
    }

    // ------------------------------------------------------------------------------------------------ recovery scan

    private void startScan(CompletableFuture<Void> done) {
        long startNanos = ticker.nanos();
        CompletableFuture<Void> scanned = new CompletableFuture<>();
        pumpScan(scanned);
        scanned.whenComplete((ignored, failure) -> {
            if (failure != null) {
                done.completeExceptionally(failure);
                return;
            }
            nextGeneration = maxGenerationSeen + 1;
            nextCommitSequence = maxCommitSequenceSeen + 1;
            cursor = maxGenerationPosition < 0 ? 0 : (maxGenerationPosition + 1) % extents.length;
            recoverySeconds = (ticker.nanos() - startNanos) / 1e9;
            metrics.recoveredExtents.increment(index.size());
            metrics.recoveryTornExtents.increment(recoveryTorn);
            metrics.recoveryCorruptExtents.increment(recoveryCorrupt);
            metrics.recoveryDuplicateExtents.increment(recoveryDuplicates);
            committedExtentsGauge = index.size();
            LOG.info("SSD store {}: {} extents of {} bytes, {} committed recovered, {} torn, {} corrupt, "
                            + "{} older duplicates, in {} s ({})", settings.directory(), extents.length,
                    settings.extentBytes(), index.size(), recoveryTorn, recoveryCorrupt, recoveryDuplicates,
                    String.format("%.3f", recoverySeconds), directIo ? "O_DIRECT" : "buffered");
            for (Extent extent : extents) {
                if (extent.state == ExtentState.COMMITTED) {
                    emit(SsdResidencyChange.Kind.SSD_ADDED, extent, SsdResidencyChange.Cause.RECOVERED);
                }
            }
            done.complete(null);
        });
    }

    private void pumpScan(CompletableFuture<Void> done) {
        int depth = settings.recoveryScanDepth();
        while (scanFailure == null && scanNext < extents.length && scanOutstanding < depth && !freeBlocks.isEmpty()) {
            Extent extent = extents[scanNext++];
            MemorySegment block = freeBlocks.poll();
            scanOutstanding++;
            io.read(extent.shard.file, extent.fileOffset, block, IoLane.RESTORE).whenComplete((bytes, failure) ->
                    loop.execute(() -> onHeaderScanned(extent, block, bytes, failure, done)));
        }
        if (scanOutstanding == 0 && (scanFailure != null || scanNext == extents.length)) {
            if (scanFailure != null) {
                done.completeExceptionally(scanFailure);
            } else {
                done.complete(null);
            }
        }
    }

    private void onHeaderScanned(Extent extent, MemorySegment block, Integer bytes, Throwable failure,
                                 CompletableFuture<Void> done) {
        scanOutstanding--;
        if (failure != null) {
            if (scanFailure == null) {
                scanFailure = failure;
            }
        } else if (bytes == BLOCK_BYTES) {
            classify(extent, SsdExtentHeader.decodeHeader(block));
        }
        freeBlocks.add(block);
        pumpScan(done);
    }

    private void classify(Extent extent, ExtentDecodeResult result) {
        extent.headerMayBeCommitted = result.isValid();
        switch (result) {
            case ExtentDecodeResult.NotAnExtent ignored -> {
            }
            case ExtentDecodeResult.Corrupt ignored -> recoveryCorrupt++;
            case ExtentDecodeResult.Torn torn -> {
                recoveryTorn++;
                if (torn.header() != null) {
                    noteGeneration(extent, torn.header());
                }
            }
            case ExtentDecodeResult.Valid(SsdExtentHeader header) -> {
                noteGeneration(extent, header);
                StateKey key;
                try {
                    key = StateKey.of(header.namespace(), header.groupId(), header.blockHash());
                } catch (IllegalArgumentException e) {
                    recoveryCorrupt++;
                    return;
                }
                if (header.payloadLength() <= 0 || header.payloadLength() > maxPayloadBytes) {
                    recoveryCorrupt++;
                    return;
                }
                Extent previous = index.get(key);
                if (previous != null) {
                    recoveryDuplicates++;
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
                index.put(key, extent);
            }
        }
    }

    private void noteGeneration(Extent extent, SsdExtentHeader header) {
        if (header.generation() > maxGenerationSeen) {
            maxGenerationSeen = header.generation();
            maxGenerationPosition = extent.position;
        }
        maxCommitSequenceSeen = Math.max(maxCommitSequenceSeen, header.commitSequence());
    }

    // ------------------------------------------------------------------------------------------------ writes

    /**
     * Offers a sealed DRAM image for an SSD write. Never blocks: the write is queued (bounded), or dropped and
     * counted. The returned future (completing on the role thread) says whether it committed; fire-and-forget
     * callers ignore it. The source is held only weakly: see {@link WeakImageSource} (a lambda returning the
     * segment or null works; {@link WeakImageSource#of} adapts a {@code Supplier}).
     */
    public CompletableFuture<SsdWriteOutcome> offerWrite(StateKey key, WeakImageSource source, long lengthBytes) {
        checkLoop();
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(source, "source");
        CompletableFuture<SsdWriteOutcome> outcome = new CompletableFuture<>();
        SsdDropReason refusal = admit(key, lengthBytes);
        if (refusal != null) {
            drop(key, refusal, outcome);
            return outcome;
        }
        pendingWrites.add(new PendingWrite(key, source, lengthBytes, outcome, ticker.nanos()));
        pendingKeys.add(key);
        pendingWritesGauge = pendingWrites.size();
        pumpWrites();
        return outcome;
    }

    private SsdDropReason admit(StateKey key, long lengthBytes) {
        if (closed) {
            return SsdDropReason.CLOSED;
        }
        if (lengthBytes <= 0 || lengthBytes > maxPayloadBytes) {
            return SsdDropReason.INVALID_SIZE;
        }
        if (index.containsKey(key) || pendingKeys.contains(key)) {
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
     * Records that {@code key} was reused (e.g. a DRAM hit), so that under {@link SsdWritePolicy#REUSE_AWARE} its next
     * offer is written. No effect under ALL or when the key is already on SSD.
     */
    public void noteReuse(StateKey key) {
        checkLoop();
        if (settings.writePolicy() == SsdWritePolicy.REUSE_AWARE && !index.containsKey(key)) {
            reuse.sight(key);
        }
    }

    private void drop(StateKey key, SsdDropReason reason, CompletableFuture<SsdWriteOutcome> outcome) {
        metrics.dropped(reason);
        outcome.complete(SsdWriteOutcome.dropped(key, reason));
    }

    private void pumpWrites() {
        while (!closed && !pendingWrites.isEmpty() && !freeStaging.isEmpty()) {
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
                        MemorySegment staging = freeStaging.poll();
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
                        op = new WriteOp(write, extent, staging, nextGeneration++, crc, ticker.nanos());
                        if (fromSource) {
                            op.payloadSource = source.asSlice(0, alignUp(length));
                        }
                        extent.state = ExtentState.WRITING;
                        extent.key = write.key();
                        extent.generation = op.generation;
                        extent.payloadLength = length;
                        extent.payloadCrc = crc;
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

    /**
     * The next slot in ring order that may be overwritten: free, or committed and unpinned (its evidence is removed
     * now, before the slot's bytes change). Pinned slots are skipped and counted; null after a full lap.
     */
    private Extent reserveExtent() {
        for (int i = 0; i < extents.length; i++) {
            Extent extent = extents[cursor];
            cursor = (cursor + 1) % extents.length;
            if (extent.state == ExtentState.FREE) {
                return extent;
            }
            if (extent.state == ExtentState.COMMITTED) {
                if (extent.pins > 0) {
                    metrics.overwriteRefused.increment();
                    continue;
                }
                index.remove(extent.key);
                committedExtentsGauge = index.size();
                emit(SsdResidencyChange.Kind.SSD_REMOVED, extent, SsdResidencyChange.Cause.OVERWRITTEN);
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
        IoUringFileIo uring = io;
        CompletableFuture<Integer> chain = intent ? uring.write(file, extent.fileOffset, intentBlock, IoLane.WRITE)
                : CompletableFuture.completedFuture(0);
        chain.thenCompose(ignored -> barrier(uring, file, intent))
                .thenCompose(ignored -> uring.write(file, extent.fileOffset + BLOCK_BYTES, payload, IoLane.WRITE))
                .whenComplete((ignored, failure) -> op.releaseSource()) // the payload is on disk (or failed): unpin
                .thenCompose(ignored -> barrier(uring, file, true))
                .thenCompose(ignored -> uring.write(file, extent.fileOffset, commitBlock, IoLane.WRITE))
                .thenCompose(ignored -> barrier(uring, file, true))
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
        return settings.writeFromSource() && directIo && source.isNative()
                && source.address() % BLOCK_BYTES == 0 && source.byteSize() >= alignUp(length);
    }

    private CompletableFuture<Integer> barrier(IoUringFileIo uring, UringFile file, boolean wanted) {
        return wanted && settings.syncWrites() ? uring.datasync(file, IoLane.WRITE)
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
            Throwable cause = unwrap(failure);
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
        index.put(extent.key, extent);
        committedExtentsGauge = index.size();
        pendingKeys.remove(extent.key);
        writesInFlight--;
        freeStaging.add(op.staging);
        metrics.writesCommitted.increment();
        metrics.writeBytes.increment(extent.payloadLength);
        long serviceNanos = ticker.nanos() - op.startNanos;
        metrics.recordLatency(metrics.writeLatency, serviceNanos);
        // The other executor was possible too when the store does O_DIRECT (pool slots are aligned and rounded).
        settings.observer().onWriteCommitted(extent.payloadLength, serviceNanos, op.payloadSource != null,
                ticker.nanos() - op.write.offeredNanos(), directIo);
        emit(SsdResidencyChange.Kind.SSD_ADDED, extent, SsdResidencyChange.Cause.COMMITTED);
        op.write.outcome().complete(SsdWriteOutcome.committed(extent.key, extent.generation, extent.payloadLength));
        pumpWrites();
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
        freeStaging.add(op.staging);
        drop(op.write.key(), reason, op.write.outcome());
        pumpWrites();
    }

    // ------------------------------------------------------------------------------------------------ lookups

    /** Metadata only: whether {@code key} is committed, with its exact generation and length. */
    public SsdEntry lookup(StateKey key) {
        checkLoop();
        Extent extent = closed ? null : index.get(key);
        return extent == null ? SsdEntry.absent(key)
                : new SsdEntry(key, true, extent.generation, extent.payloadLength);
    }

    /** {@link #lookup(StateKey)} for each key, in order. */
    public List<SsdEntry> lookup(List<StateKey> keys) {
        List<SsdEntry> entries = new ArrayList<>(keys.size());
        for (StateKey key : keys) {
            entries.add(lookup(key));
        }
        return entries;
    }

    /** Every committed extent, in ring order (for the storage role to seed its residency stream). */
    public List<SsdEntry> committedEntries() {
        checkLoop();
        List<SsdEntry> entries = new ArrayList<>(index.size());
        if (!closed) {
            for (Extent extent : extents) {
                if (extent.state == ExtentState.COMMITTED) {
                    entries.add(new SsdEntry(extent.key, true, extent.generation, extent.payloadLength));
                }
            }
        }
        return entries;
    }

    // ------------------------------------------------------------------------------------------------ leases and reads

    /**
     * Pins the committed extent of {@code key} at exactly {@code expectedGeneration}: until {@link #release} the ring
     * will not overwrite it.
     *
     * @throws SsdException NOT_FOUND, STALE_GENERATION or CLOSED (each counted as a read miss)
     */
    public SsdLease acquireLease(StateKey key, long expectedGeneration) {
        checkLoop();
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

    /** Ends a lease; a read still in flight keeps its own pin until its completion. */
    public void release(SsdLease lease) {
        checkLoop();
        LeaseState state = leases.remove(lease.leaseId());
        if (state == null) {
            throw new SsdException(SsdFailure.UNKNOWN_LEASE, "lease " + lease.leaseId() + " is not held");
        }
        unpin(state.extent);
    }

    /**
     * Reads the leased payload into {@code destination} (at least {@code lease.lengthBytes()} bytes, ideally a
     * 4096-aligned pool slot holding the length rounded up to 4096) on the RESTORE lane and verifies its CRC32C. The
     * destination belongs to the store until the returned future completes, in any way (see {@link SsdReadFuture}).
     */
    public SsdReadFuture readInto(SsdLease lease, MemorySegment destination) {
        checkLoop();
        Objects.requireNonNull(destination, "destination");
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
        Extent extent = state.extent;
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
        ReadOp op = new ReadOp(state.lease, extent, destination, ticker.nanos());
        long payloadOffset = extent.fileOffset + BLOCK_BYTES;
        long aligned = alignUp(length);
        boolean destinationAligned = destination.address() % BLOCK_BYTES == 0;
        List<Runnable> submissions = new ArrayList<>(2);
        if (!directIo) {
            op.path = SsdReadResult.ReadPath.BUFFERED;
            op.expectedBytes = length;
            submissions.add(() -> submitRead(op, payloadOffset, destination.asSlice(0, length)));
        } else if (destinationAligned && destination.byteSize() >= aligned) {
            op.path = SsdReadResult.ReadPath.DIRECT;
            op.expectedBytes = aligned;
            submissions.add(() -> submitRead(op, payloadOffset, destination.asSlice(0, aligned)));
        } else if (destinationAligned && !freeBlocks.isEmpty()) {
            op.path = SsdReadResult.ReadPath.DIRECT_WITH_TAIL;
            op.headBytes = length & -BLOCK_BYTES;
            op.bounce = freeBlocks.poll();
            op.bounceIsBlock = true;
            op.expectedBytes = op.headBytes + BLOCK_BYTES;
            if (op.headBytes > 0) {
                submissions.add(() -> submitRead(op, payloadOffset, destination.asSlice(0, op.headBytes)));
            }
            submissions.add(() -> submitRead(op, payloadOffset + op.headBytes, op.bounce));
        } else if (!freeBounce.isEmpty()) {
            op.path = SsdReadResult.ReadPath.BOUNCE;
            op.bounce = freeBounce.poll();
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
        FileIoFuture io = this.io.read(op.extent.shard.file, fileOffset, target, IoLane.RESTORE);
        op.future.track(io);
        io.whenComplete((bytes, failure) -> loop.execute(() -> onReadPart(op, bytes, failure)));
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
        try {
            finishRead(op);
        } finally {
            if (op.bounce != null) {
                (op.bounceIsBlock ? freeBlocks : freeBounce).add(op.bounce);
            }
            readsInFlight--;
            unpin(op.extent);
        }
    }

    private void finishRead(ReadOp op) {
        long length = op.lease.lengthBytes();
        if (op.future.cancelRequested() || op.failure instanceof CancellationException) {
            op.future.markCancelled();
            return;
        }
        if (closed) {
            op.future.fail(miss(SsdFailure.CLOSED, "SSD store closed during the read"));
            return;
        }
        if (op.failure != null) {
            Throwable cause = unwrap(op.failure);
            SsdFailure failure = cause instanceof FileIoRejectedException rejected
                    ? (rejected.reason() == FileIoRejectedException.Reason.QUEUE_FULL ? SsdFailure.QUEUE_FULL
                    : SsdFailure.CLOSED)
                    : SsdFailure.IO_ERROR;
            op.future.fail(miss(failure, "read of " + op.lease.key() + " failed: " + cause.getMessage()));
            return;
        }
        boolean complete = op.transferredBytes >= op.expectedBytes;
        if (complete) {
            switch (op.path) {
                case DIRECT_WITH_TAIL -> MemorySegment.copy(op.bounce, 0, op.destination, op.headBytes,
                        length - op.headBytes);
                case BOUNCE -> MemorySegment.copy(op.bounce, 0, op.destination, 0, length);
                default -> {
                }
            }
        }
        // A short read (a truncated shard) fails the CRC like any other damage.
        if (!complete || op.extent.state != ExtentState.COMMITTED || op.extent.generation != op.lease.generation()
                || Crc32c.of(op.destination.asSlice(0, length)) != op.extent.payloadCrc) {
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
        index.remove(extent.key);
        committedExtentsGauge = index.size();
        emit(SsdResidencyChange.Kind.SSD_REMOVED, extent, SsdResidencyChange.Cause.CORRUPT);
        extent.state = ExtentState.RETIRING;
    }

    private void unpin(Extent extent) {
        if (--extent.pins == 0 && extent.state == ExtentState.RETIRING) {
            invalidateHeader(extent);
        }
    }

    /**
     * Rewrites a dropped extent's header as uncommitted (same generation, so the generation stays recoverable) so
     * that a restart does not index it again. Best effort: if no block is free, or the write fails, a restart finds
     * the extent again and the first read drops it again (fail closed either way).
     */
    private void invalidateHeader(Extent extent) {
        MemorySegment block = closed ? null : freeBlocks.poll();
        if (block == null) {
            extent.clear();
            return;
        }
        new SsdExtentHeader(extent.key.namespace(), extent.key.groupId(), extent.key.blockHash(), REPRESENTATION_RAW,
                extent.payloadLength, extent.generation, false, 0, extent.payloadCrc).encode(block);
        io.write(extent.shard.file, extent.fileOffset, block, IoLane.WRITE).whenComplete((bytes, failure) ->
                loop.execute(() -> {
                    freeBlocks.add(block);
                    if (failure == null) {
                        extent.headerMayBeCommitted = false;
                    }
                    extent.clear();
                    pumpWrites();
                }));
    }

    private SsdException miss(SsdFailure failure, String message) {
        metrics.readMiss(failure);
        return new SsdException(failure, message);
    }

    // ------------------------------------------------------------------------------------------------ stats, close

    public SsdStats stats() {
        checkLoop();
        int pinned = 0;
        for (Extent extent : extents) {
            if (extent.pins > 0) {
                pinned++;
            }
        }
        return new SsdStats(directIo, extents.length, settings.extentBytes(), index.size(), pinned, leases.size(),
                pendingWrites.size(), writesInFlight, readsInFlight, (long) metrics.writesCommitted.count(),
                (long) metrics.writeBytes.count(), (long) metrics.readHits.count(), (long) metrics.readBytes.count(),
                metrics.droppedSnapshot(), metrics.readMissesTotal(), (long) metrics.corruptExtents.count(),
                (long) metrics.overwriteRefused.count(), (long) metrics.recoveredExtents.count(), recoveryTorn,
                recoveryCorrupt, recoveryDuplicates, recoverySeconds, arena == null || closeFuture.isDone() ? 0
                        : nativeBytes);
    }

    public boolean directIo() {
        return directIoGauge;
    }

    public SsdSettings settings() {
        return settings;
    }

    /** Native bytes held by every open store of this process (0 when all are closed). */
    public static long liveNativeBytes() {
        return LIVE_NATIVE_BYTES.get();
    }

    int pendingWritesGauge() {
        return pendingWritesGauge;
    }

    int committedExtentsGauge() {
        return committedExtentsGauge;
    }

    double recoverySecondsGauge() {
        return recoverySeconds;
    }

    /** Test hook: the ring position of the committed extent of {@code key}, or -1. */
    int positionOf(StateKey key) {
        Extent extent = index.get(key);
        return extent == null ? -1 : extent.position;
    }

    /**
     * Closes the store (idempotent, any thread); completes once every I/O completion arrived and the native buffers
     * are freed. See the class note.
     */
    public CompletableFuture<Void> close() {
        loop.execute(this::onClose);
        return closeFuture;
    }

    private void onClose() {
        if (closed) {
            return;
        }
        closed = true;
        for (PendingWrite write; (write = pendingWrites.poll()) != null; ) {
            pendingKeys.remove(write.key());
            drop(write.key(), SsdDropReason.CLOSED, write.outcome());
        }
        pendingWritesGauge = 0;
        for (Extent extent : extents) {
            if (extent.state == ExtentState.COMMITTED) {
                emit(SsdResidencyChange.Kind.SSD_REMOVED, extent, SsdResidencyChange.Cause.CLOSED);
            }
        }
        index.clear();
        committedExtentsGauge = 0;
        leases.clear();
        IoUringFileIo uring = io;
        CompletableFuture<Void> ioClosed = uring == null ? CompletableFuture.completedFuture(null) : uring.closeAsync();
        // The completion hops of the last I/Os were queued on the role loop before closeAsync completed: freeing the
        // arena in a task queued after them means no handler can touch freed memory.
        ioClosed.whenComplete((ignored, failure) -> loop.execute(() -> {
            if (arena != null) {
                arena.close();
                LIVE_NATIVE_BYTES.addAndGet(-nativeBytes);
            }
            if (failure != null) {
                closeFuture.completeExceptionally(unwrap(failure));
            } else {
                closeFuture.complete(null);
            }
        }));
    }

    // ------------------------------------------------------------------------------------------------ helpers

    private void emit(SsdResidencyChange.Kind kind, Extent extent, SsdResidencyChange.Cause cause) {
        try {
            listener.onResidencyChange(new SsdResidencyChange(kind, extent.key, extent.generation,
                    extent.payloadLength, cause));
        } catch (RuntimeException e) {
            LOG.warn("SSD residency listener failed", e);
        }
    }

    private void checkLoop() {
        if (!loop.inLoop()) {
            throw new IllegalStateException("SsdStore is confined to its role thread, called from "
                    + Thread.currentThread().getName());
        }
    }

    static long alignUp(long bytes) {
        return (bytes + BLOCK_BYTES - 1) & -BLOCK_BYTES;
    }

    private static Throwable unwrap(Throwable failure) {
        Throwable cause = failure;
        while (cause instanceof CompletionException && cause.getCause() != null) {
            cause = cause.getCause();
        }
        return cause;
    }
}
