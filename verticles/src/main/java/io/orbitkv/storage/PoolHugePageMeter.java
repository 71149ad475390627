package io.orbitkv.storage;

import io.orbitkv.common.Ticker;
import io.orbitkv.nativeio.shm.PoolPages;
import io.orbitkv.nativeio.shm.Smaps;
import java.io.IOException;
import java.nio.file.Path;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Measures how the kernel really maps the pool file in this process: of the bytes this process's mappings of it have
 * touched ({@code Rss}), how many are mapped with 2 MiB pages ({@code ShmemPmdMapped} + {@code FilePmdMapped}), from
 * {@code /proc/self/smaps} ({@link Smaps#mapped}). {@link PoolPages} only says what the mount promises; a kernel short
 * of free 2 MiB blocks (fragmented memory), or a {@code huge=advise} pool on a kernel without
 * {@code MADV_POPULATE_WRITE}, silently gives 4 KiB pages instead, and only this shows it.
 *
 * <p>Design note (cost, threads): reading smaps walks every mapping of the process (tens of milliseconds in a large
 * JVM), so it never runs on an event loop or a hot path. {@link #sample} reads it on the calling worker thread (the
 * storage role calls it once at start, after the pool is reserved, when {@code huge=advise} has populated it);
 * {@link #latest} never blocks: it answers the cached sample and, when the last re-read it asked for is at least
 * {@code minIntervalNanos} old, hands one re-read to a worker (at most one in flight). So scrapes of the gauges (and
 * the storage role's slow timer) cost at most one smaps read per interval whatever their rate; a gauge answers the
 * latest finished read (the first scrape after a quiet spell answers an old one and starts a fresh one). No native
 * memory, no file handle kept between reads; {@link #close} stops further re-reads (one in flight finishes
 * harmlessly: the file is only read).
 *
 * <p>Design note (what is counted): every mapping of exactly the pool file in this process (the storage role's and,
 * when they run, the peer and restore roles' mappings; engines in other processes are not seen), summed: a page two
 * mappings touched counts twice in both figures, so their ratio, not their size, is the share on 2 MiB pages.
 *
 * <p>Design note (the WARN, and why {@code require} does not refuse): when the mount promises huge pages and at least
 * {@link #WARN_MIN_TOUCHED_BYTES} are touched but fewer than half of them are mapped with 2 MiB pages, one WARN line
 * (once per meter) says so. It stays a WARN plus the gauges under {@code pool.huge-pages=require} too. {@code require}
 * checks configuration (the mount) before any pool file exists, where a typed error tells the operator what to change.
 * The fallback is a condition of memory, not of configuration: tmpfs picks each page's size when it allocates it (at
 * the reservation), but smaps shows it only for pages a mapping has touched, and {@code fallocate} maps none (on
 * {@code huge=within_size} most pages are first touched long after start). Refusing at start would mean faulting the
 * whole pool in just to look (start-up time and page tables in proportion to the pool, worst exactly when it fell
 * back), and would turn slower copies into an outage, and a restart loop while memory stays fragmented; refusing later
 * cannot undo it. A partial fallback is a slowdown, not a fault: no byte is wrong.
 */
final class PoolHugePageMeter implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(PoolHugePageMeter.class);

    /** Fewer touched bytes than this (8 huge pages) say too little to warn about. */
    static final long WARN_MIN_TOUCHED_BYTES = 8 * PoolPages.HUGE_PAGE_BYTES;
    /** The least time between two re-reads {@link #latest} asks for. */
    static final long MIN_INTERVAL_NANOS = TimeUnit.SECONDS.toNanos(5);

    private final Path poolFile;
    private final PoolPages.Answer promise;
    private final Ticker ticker;
    private final long minIntervalNanos;
    private final AtomicBoolean reading = new AtomicBoolean();
    private final AtomicBoolean warned = new AtomicBoolean();
    private final AtomicLong samples = new AtomicLong();
    /** When the last re-read {@link #latest} asked for started; written only while holding {@link #reading}. */
    private volatile long askedAt;
    private volatile boolean asked;
    private volatile boolean closed;
    private volatile Smaps.Mapped latest = Smaps.Mapped.NONE;

    /**
     * @param poolFile the pool file as the kernel names it (a real path)
     * @param promise  what its mount promises ({@link PoolPages#of}, asked once by the Manager)
     */
    PoolHugePageMeter(Path poolFile, PoolPages.Answer promise, Ticker ticker, long minIntervalNanos) {
        this.poolFile = poolFile;
        this.promise = promise;
        this.ticker = ticker;
        this.minIntervalNanos = minIntervalNanos;
    }

    /** Reads smaps now (blocking: a worker thread), keeps the answer for {@link #latest}, and warns once if due. */
    Smaps.Mapped sample() {
        Smaps.Mapped now;
        try {
            now = Smaps.mapped(poolFile);
        } catch (IOException e) {
            LOG.debug("could not read /proc/self/smaps for {}: {}", poolFile, e.toString());
            return latest;
        }
        samples.incrementAndGet();
        latest = now;
        if (fellBack(promise.kind(), now) && warned.compareAndSet(false, true)) {
            LOG.warn("the DRAM pool's mount promises huge pages ({}) but of the {} MiB of {} this process has touched "
                            + "only {} MiB are mapped with 2 MiB pages: the kernel gave 4 KiB pages (short of free 2 MiB "
                            + "blocks, or huge=advise on a kernel before 5.14), and copies run at 4 KiB-page speed; "
                            + "see orbitkv_pool_huge_mapped_bytes against orbitkv_pool_touched_bytes. Compacting memory "
                            + "(echo 1 > /proc/sys/vm/compact_memory) before the Manager starts makes 2 MiB blocks",
                    promise.describe(), now.residentBytes() >> 20, poolFile, now.hugeMappedBytes() >> 20);
        }
        return now;
    }

    /**
     * The last sample, without blocking; when the last re-read asked for is {@code minIntervalNanos} old (or none was
     * asked for yet), hands one to {@code worker} (its answer shows in a later call).
     */
    Smaps.Mapped latest(Executor worker) {
        if (!closed && due() && reading.compareAndSet(false, true)) {
            if (!due()) { // another thread's re-read finished between the check and the flag
                reading.set(false);
                return latest;
            }
            askedAt = ticker.nanos();
            asked = true;
            try {
                worker.execute(() -> {
                    try {
                        sample();
                    } finally {
                        reading.set(false);
                    }
                });
            } catch (RuntimeException rejected) { // the worker pool is closing with the Manager
                reading.set(false);
            }
        }
        return latest;
    }

    private boolean due() {
        return !asked || ticker.nanos() - askedAt >= minIntervalNanos;
    }

    /**
     * True when the mount promises huge pages, at least {@link #WARN_MIN_TOUCHED_BYTES} are touched and fewer than
     * half of them are mapped with 2 MiB pages.
     */
    static boolean fellBack(PoolPages.Kind promise, Smaps.Mapped mapped) {
        return promise != PoolPages.Kind.NONE && mapped.residentBytes() >= WARN_MIN_TOUCHED_BYTES
                && mapped.hugeMappedBytes() < mapped.residentBytes() / 2;
    }

    /** Smaps reads done so far (tests: the rate bound). */
    long samples() {
        return samples.get();
    }

    boolean warned() {
        return warned.get();
    }

    @Override
    public void close() {
        closed = true;
    }
}
