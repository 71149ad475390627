package io.orbitkv.ssd;

import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.nativeio.uring.IoUringFileIo;
import io.orbitkv.nativeio.uring.IoUringFileIoOptions;
import io.orbitkv.ssd.SsdLayout.Extent;
import io.orbitkv.ssd.SsdLayout.ExtentState;
import io.orbitkv.ssd.SsdLayout.Region;
import io.orbitkv.model.StateKey;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import io.orbitkv.model.SsdEntry;
import io.orbitkv.model.SsdLease;
import io.orbitkv.model.SsdPageOutcome;
import io.orbitkv.model.SsdReadResult;
import io.orbitkv.model.SsdResidencyChange;
import io.orbitkv.model.WeakImageSource;

/**
 * The SSD tier of one Manager: shard files divided into regions that pages of any size are appended to (evicted a
 * region at a time, oldest first), an in-memory index of committed pages rebuilt from their headers on open,
 * io_uring reads and writes, write admission and exact-generation read leases.
 *
 * <pre>
 *   SsdStore (this: open, lookups, stats, close)
 *     ├─ SsdLayout          shard files, regions, pages packed in them, which region is reclaimed next
 *     ├─ SsdIndex           committed pages by key + the residency stream
 *     ├─ SsdBuffers         staging, bounce and 4 KiB blocks in one arena
 *     ├─ SsdRecoveryScan    open-time walk of each region's headers → index, generation floor, region ages
 *     ├─ SsdCommitProtocol  admission, queue, intent → payload → commit
 *     └─ SsdReads           exact-generation leases, verified reads, dropping corrupt extents
 * </pre>
 *
 * <h2>Design note</h2>
 * <p><b>Threads.</b> All state is confined to one {@link RoleLoop} thread (the SSD verticle's event loop); every
 * public method except {@link #close()} and {@link #open} must be called there ({@code IllegalStateException}
 * otherwise). I/O runs on the {@link IoUringFileIo} loop; its completions hop back through {@link RoleLoop#execute}
 * before touching anything (the write chain alone runs its disk steps on the io_uring loop, see
 * {@link SsdCommitProtocol}). Nothing here blocks: queues are bounded, full ones drop (writes) or fail (reads) at once.
 *
 * <p><b>Ownership.</b> This object owns the io_uring instance (and through it the shard descriptors), the
 * {@link SsdBuffers} and the verifier threads (read checksums, see {@link SsdReads}); the parts above share them
 * through {@link Parts} and own nothing themselves. The on-disk format
 * and its crash argument live with the part that writes it: layout in {@link SsdLayout}, the commit protocol and
 * generations in {@link SsdCommitProtocol}, recovery in {@link SsdRecoveryScan}, verification in {@link SsdReads}.
 *
 * <p><b>Close.</b> Idempotent: queued writes are dropped ({@code CLOSED}), every indexed extent is reported removed
 * (cause CLOSED: the bytes stay on disk and come back on the next open), leases end, the io_uring instance closes
 * (in-flight I/O completes first), then the buffers are freed; the close completes once the verifications in flight
 * reported back and the verifier threads were told to stop. Descriptors belong to the io_uring instance.
 */
public final class SsdStore {

    private static final Logger LOG = LoggerFactory.getLogger(SsdStore.class);

    /** What the parts of one store share; the store owns each of them. */
    record Parts(SsdSettings settings, RoleLoop loop, IoUringFileIo io, SsdLayout layout, SsdIndex index,
                 SsdBuffers buffers, SsdMetrics metrics, Executor verifier) {}

    private final SsdSettings settings;
    private final RoleLoop loop;
    private final SsdMetrics metrics;
    private final SsdLayout layout;
    private final SsdIndex index;
    private final CompletableFuture<Void> closeFuture = new CompletableFuture<>();

    // Set once by start(), on the role thread, before the store is handed out.
    private volatile IoUringFileIo io;
    private SsdBuffers buffers;
    private ExecutorService verifier;
    private SsdRecoveryScan.Outcome recovered;
    private volatile double recoverySeconds;
    private SsdCommitProtocol writes;
    private SsdReads reads;
    private boolean closed;

    private SsdStore(SsdSettings settings, RoleLoop loop, SsdListener listener, MeterRegistry registry) {
        this.settings = settings;
        this.loop = loop;
        this.metrics = new SsdMetrics(registry);
        this.layout = new SsdLayout(settings);
        this.index = new SsdIndex(listener);
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
        io = IoUringFileIo.create(new IoUringFileIoOptions()
                .maxInFlight(settings.queueDepth())
                .restoreQueueCapacity(settings.restoreQueueCapacity() + settings.recoveryScanDepth())
                // Our own writes are bounded by staging buffers and blocks, so the write lane never rejects.
                .writeQueueCapacity(settings.writeStagingBuffers() + settings.smallBlocks() + 8)
                .threadName("orbitkv-ssd-uring"));
        buffers = new SsdBuffers(settings);
        if (settings.verifierThreads() > 0) {
            AtomicInteger threads = new AtomicInteger();
            verifier = Executors.newFixedThreadPool(settings.verifierThreads(), runnable -> {
                Thread thread = new Thread(runnable, "orbitkv-ssd-verify-" + threads.incrementAndGet());
                thread.setDaemon(true);
                return thread;
            });
        }
        Parts parts = new Parts(settings, loop, io, layout, index, buffers, metrics, verifier);
        CompletableFuture<Void> started = new CompletableFuture<>();
        layout.openShards(io).whenComplete((ignored, failure) -> loop.execute(() -> {
            if (failure != null) {
                started.completeExceptionally(failure);
                return;
            }
            new SsdRecoveryScan(parts).run().whenComplete((outcome, scanFailure) -> {
                if (scanFailure != null) {
                    started.completeExceptionally(scanFailure);
                } else {
                    onRecovered(parts, outcome);
                    started.complete(null);
                }
            });
        }));
        return started;
    }

    private void onRecovered(Parts parts, SsdRecoveryScan.Outcome outcome) {
        recovered = outcome;
        recoverySeconds = outcome.seconds();
        // The newest fill goes on being filled; empty regions are reclaimed before any recovered page is evicted.
        Region newest = null;
        for (int r = 0; r < layout.regionCount(); r++) {
            Region region = layout.region(r);
            if (region.firstGeneration >= 0 && (newest == null || region.firstGeneration > newest.firstGeneration)) {
                newest = region;
            }
        }
        if (newest != null) {
            layout.markOpen(newest);
        }
        writes = new SsdCommitProtocol(parts, outcome);
        reads = new SsdReads(parts, writes::pump);
        metrics.recoveredExtents.increment(index.size());
        metrics.recoveryTornExtents.increment(outcome.torn());
        metrics.recoveryCorruptExtents.increment(outcome.corrupt());
        metrics.recoveryDuplicateExtents.increment(outcome.duplicates());
        LOG.info("SSD store {}: {} bytes in {} regions, pages up to {} bytes ({} of 64 KiB, {} of 2 MiB), "
                        + "{} committed recovered, {} torn, {} corrupt, {} older duplicates, in {} s ({})",
                settings.directory(), settings.shardBytes() * settings.shardCount(), layout.regionCount(),
                settings.maxPayloadBytes(), settings.pagesOf(64 << 10), settings.pagesOf(2 << 20), index.size(),
                outcome.torn(), outcome.corrupt(), outcome.duplicates(), String.format("%.3f", outcome.seconds()),
                layout.directIo() ? "O_DIRECT" : "buffered");
        forEachCommitted(extent -> index.emit(SsdResidencyChange.Kind.SSD_ADDED, extent,
                SsdResidencyChange.Cause.RECOVERED));
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
        return writes.offer(key, source, lengthBytes);
    }

    /**
     * Reports that the DRAM image of {@code key} was seen again (a query hit it in DRAM, or a publish named it again
     * while resident). Under {@link SsdWritePolicy#REUSE_AWARE} this is a sighting like an offer: the second sighting
     * writes the image, from the same weak {@code source}, as {@link #offerWrite} would. No effect under ALL, or when
     * the key is already committed or being written (nothing is counted then).
     */
    public void noteReuse(StateKey key, WeakImageSource source, long lengthBytes) {
        checkLoop();
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(source, "source");
        writes.noteReuse(key, source, lengthBytes);
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

    /** Every committed page, in region and file order (for the storage role to seed its residency stream). */
    public List<SsdEntry> committedEntries() {
        checkLoop();
        List<SsdEntry> entries = new ArrayList<>(index.size());
        if (!closed) {
            forEachCommitted(extent -> entries.add(new SsdEntry(extent.key, true, extent.generation,
                    extent.payloadLength)));
        }
        return entries;
    }

    private void forEachCommitted(Consumer<Extent> action) {
        for (int r = 0; r < layout.regionCount(); r++) {
            for (Extent extent : layout.region(r).pages) {
                if (extent.state == ExtentState.COMMITTED) {
                    action.accept(extent);
                }
            }
        }
    }

    // ------------------------------------------------------------------------------------------------ leases and reads

    /**
     * Pins the committed page of {@code key} at exactly {@code expectedGeneration}: until {@link #release} its region
     * is not reclaimed.
     *
     * @throws SsdException NOT_FOUND, STALE_GENERATION or CLOSED (each counted as a read miss)
     */
    public SsdLease acquireLease(StateKey key, long expectedGeneration) {
        checkLoop();
        return reads.acquireLease(key, expectedGeneration);
    }

    /** Ends a lease; a read still in flight keeps its own pin until its completion. */
    public void release(SsdLease lease) {
        checkLoop();
        reads.release(lease);
    }

    /**
     * Reads the leased payload into {@code destination} (at least {@code lease.lengthBytes()} bytes, ideally a
     * 4096-aligned pool slot holding the length rounded up to 4096) on the RESTORE lane and verifies its CRC32C. The
     * destination belongs to the store until the returned future completes, in any way (see {@link SsdReadFuture}).
     */
    public SsdReadFuture readInto(SsdLease lease, MemorySegment destination) {
        checkLoop();
        Objects.requireNonNull(destination, "destination");
        return reads.readInto(lease, destination);
    }

    /**
     * {@link #acquireLease} for each page, in order: a page that cannot be leased (NOT_FOUND, STALE_GENERATION,
     * CLOSED) is a failed outcome and the others are leased all the same; the caller releases what it does not use.
     */
    public List<SsdPageOutcome<SsdLease>> acquireLeases(List<SsdCommands.AcquireLease> pages) {
        checkLoop();
        List<SsdPageOutcome<SsdLease>> outcomes = new ArrayList<>(pages.size());
        for (SsdCommands.AcquireLease page : pages) {
            try {
                outcomes.add(SsdPageOutcome.of(reads.acquireLease(page.key(), page.generation())));
            } catch (SsdException miss) {
                outcomes.add(SsdPageOutcome.failed(miss));
            }
        }
        return outcomes;
    }

    /**
     * {@link #readInto} for each read, in order; completes (on the role thread) once every one of them is terminal,
     * with one outcome per read. Every destination belongs to the store until then, even when one read failed early:
     * the answer never runs ahead of an I/O still writing into a caller's memory. The stage cannot be completed or
     * cancelled by the caller.
     */
    public CompletionStage<List<SsdPageOutcome<SsdReadResult>>> readInto(List<SsdCommands.ReadInto> batch) {
        checkLoop();
        for (SsdCommands.ReadInto read : batch) {
            Objects.requireNonNull(read.destination(), "destination"); // before any read is started
        }
        List<SsdReadFuture> started = new ArrayList<>(batch.size());
        for (SsdCommands.ReadInto read : batch) {
            started.add(reads.readInto(read.lease(), read.destination()));
        }
        // Each read settles into its own outcome, so one failure never ends the wait for the others.
        List<CompletableFuture<SsdPageOutcome<SsdReadResult>>> outcomes = new ArrayList<>(started.size());
        for (SsdReadFuture read : started) {
            outcomes.add(read.handle((result, failure) -> failure == null ? SsdPageOutcome.of(result)
                    : SsdPageOutcome.failed(unwrap(failure))));
        }
        CompletableFuture<List<SsdPageOutcome<SsdReadResult>>> all = CompletableFuture
                .allOf(outcomes.toArray(CompletableFuture[]::new))
                .thenApply(ignored -> outcomes.stream().map(CompletableFuture::join).toList());
        return all.minimalCompletionStage();
    }

    /** Ends each lease that is held, in order; answers how many it ended (an unknown or ended lease is skipped). */
    public int release(List<SsdLease> leases) {
        checkLoop();
        int ended = 0;
        for (SsdLease lease : leases) {
            try {
                reads.release(lease);
                ended++;
            } catch (SsdException unknown) {
                // UNKNOWN_LEASE: already ended (by the store's close or an earlier release); nothing to undo
            }
        }
        return ended;
    }

    // ------------------------------------------------------------------------------------------------ stats, close

    public SsdStats stats() {
        checkLoop();
        return new SsdStats(layout.directIo(), layout.regionCount(), settings.extentBytes(), index.size(),
                layout.pinnedExtents(), reads.activeLeases(), writes.pendingWrites(), writes.writesInFlight(),
                reads.readsInFlight(), (long) metrics.writesCommitted.count(), (long) metrics.writeBytes.count(),
                (long) metrics.readHits.count(), (long) metrics.readBytes.count(), metrics.droppedSnapshot(),
                metrics.readMissesTotal(), (long) metrics.corruptExtents.count(),
                (long) metrics.overwriteRefused.count(), (long) metrics.recoveredExtents.count(), recovered.torn(),
                recovered.corrupt(), recovered.duplicates(), recovered.seconds(),
                closeFuture.isDone() ? 0 : buffers.nativeBytes());
    }

    public boolean directIo() {
        return layout.directIo();
    }

    public SsdSettings settings() {
        return settings;
    }

    /** Native bytes held by every open store of this process (0 when all are closed). */
    public static long liveNativeBytes() {
        return SsdBuffers.liveNativeBytes();
    }

    int pendingWritesGauge() {
        SsdCommitProtocol w = writes;
        return w == null ? 0 : w.pendingWritesGauge();
    }

    int committedExtentsGauge() {
        return index.committedGauge();
    }

    double recoverySecondsGauge() {
        return recoverySeconds;
    }

    /** Test hook: the region of the committed page of {@code key}, or -1. */
    int regionOf(StateKey key) {
        Extent extent = index.get(key);
        return extent == null ? -1 : extent.region.index;
    }

    /** Test hook: the shard file and offset of the committed page of {@code key}, or null. */
    PageAt pageAt(StateKey key) {
        Extent extent = index.get(key);
        return extent == null ? null : new PageAt(extent.shard().path, extent.fileOffset, extent.spanBytes);
    }

    record PageAt(Path shard, long fileOffset, long spanBytes) {}

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
        if (writes != null) {
            writes.close();
        }
        if (reads != null) {
            reads.close();
        }
        forEachCommitted(extent -> index.emit(SsdResidencyChange.Kind.SSD_REMOVED, extent,
                SsdResidencyChange.Cause.CLOSED));
        index.clear();
        IoUringFileIo uring = io;
        CompletableFuture<Void> ioClosed = uring == null ? CompletableFuture.completedFuture(null) : uring.closeAsync();
        // The completion hops of the last I/Os were queued on the role loop before closeAsync completed: freeing the
        // buffers in a task queued after them means no handler can touch freed memory.
        // Verifications still running read only callers' destinations, never these buffers; the close completes once
        // they reported back too, so no verifier hop arrives after it.
        ioClosed.whenComplete((ignored, failure) -> loop.execute(() -> {
            if (buffers != null) {
                buffers.free();
            }
            Runnable complete = () -> {
                if (verifier != null) {
                    verifier.shutdown();
                }
                if (failure != null) {
                    closeFuture.completeExceptionally(unwrap(failure));
                } else {
                    closeFuture.complete(null);
                }
            };
            if (reads != null) {
                reads.afterVerifications(complete);
            } else {
                complete.run();
            }
        }));
    }

    // ------------------------------------------------------------------------------------------------ helpers

    private void checkLoop() {
        if (!loop.inLoop()) {
            throw new IllegalStateException("SsdStore is confined to its role thread, called from "
                    + Thread.currentThread().getName());
        }
    }

    static Throwable unwrap(Throwable failure) {
        Throwable cause = failure;
        while (cause instanceof CompletionException && cause.getCause() != null) {
            cause = cause.getCause();
        }
        return cause;
    }
}
