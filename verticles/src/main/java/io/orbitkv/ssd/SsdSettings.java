package io.orbitkv.ssd;

import io.orbitkv.codecs.extent.SsdExtentHeader;
import io.orbitkv.common.Ticker;
import io.vertx.core.json.JsonObject;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Objects;
import io.orbitkv.model.SsdWritePolicy;

/**
 * Settings of the SSD role; fluent, validated by {@link #validate()} when a store opens. Sizes in bytes.
 *
 * <p>Design note (extent and region size): {@link #extentBytes} is the largest page the tier stores plus its 4 KiB
 * header ({@link #EXTENT_BYTES_DEFAULT} = 4 KiB + 2 MiB). It bounds a page, it is not what a page occupies: a page
 * takes 4 KiB + its length rounded up to 4 KiB, packed into regions (see {@link SsdLayout}). A region is
 * {@link #regionExtents} extents (1..16, so that a shard has about 8 regions or more), the last region of a shard
 * takes the rest of the shard, so the capacity is used up to 4 KiB. {@link #pagesPerShard} says how many pages of a
 * given size fit.
 *
 * <p>JSON keys for {@link #fromJson} are the fluent method names (e.g. {@code "writePolicy": "REUSE_AWARE"}).
 */
public final class SsdSettings {

    public static final int SHARD_COUNT_DEFAULT = 1;
    public static final long CAPACITY_BYTES_DEFAULT = 1L << 30;
    public static final long EXTENT_BYTES_DEFAULT = (2L << 20) + SsdExtentHeader.HEADER_BLOCK_BYTES;
    public static final boolean PREALLOCATE_DEFAULT = true;
    public static final int QUEUE_DEPTH_DEFAULT = 16;
    public static final int WRITE_QUEUE_CAPACITY_DEFAULT = 256;
    public static final int WRITE_STAGING_BUFFERS_DEFAULT = 8;
    public static final int RESTORE_QUEUE_CAPACITY_DEFAULT = 1024;
    public static final int BOUNCE_BUFFERS_DEFAULT = 2;
    public static final int SMALL_BLOCKS_DEFAULT = 64;
    public static final int REUSE_AWARE_CAPACITY_DEFAULT = 65_536;
    public static final int RECOVERY_SCAN_DEPTH_DEFAULT = 32;
    public static final boolean SYNC_WRITES_DEFAULT = false;
    public static final int VERIFIER_THREADS_DEFAULT = 1;
    /** Offers and reuse notes waiting for the SSD role at most (config {@code ssd.offer-handoff-capacity}). */
    public static final int OFFER_HANDOFF_CAPACITY_DEFAULT = 4096;
    /** Residency changes waiting for the storage role at most (config {@code ssd.residency-handoff-capacity}). */
    public static final int RESIDENCY_HANDOFF_CAPACITY_DEFAULT = 16384;

    private Path directory;
    private int shardCount = SHARD_COUNT_DEFAULT;
    private long capacityBytes = CAPACITY_BYTES_DEFAULT;
    private long extentBytes = EXTENT_BYTES_DEFAULT;
    private boolean preallocate = PREALLOCATE_DEFAULT;
    private int queueDepth = QUEUE_DEPTH_DEFAULT;
    private int writeQueueCapacity = WRITE_QUEUE_CAPACITY_DEFAULT;
    private int writeStagingBuffers = WRITE_STAGING_BUFFERS_DEFAULT;
    private int restoreQueueCapacity = RESTORE_QUEUE_CAPACITY_DEFAULT;
    private int bounceBuffers = BOUNCE_BUFFERS_DEFAULT;
    private int smallBlocks = SMALL_BLOCKS_DEFAULT;
    private SsdWritePolicy writePolicy = SsdWritePolicy.ALL;
    private int reuseAwareCapacity = REUSE_AWARE_CAPACITY_DEFAULT;
    private int recoveryScanDepth = RECOVERY_SCAN_DEPTH_DEFAULT;
    private boolean syncWrites = SYNC_WRITES_DEFAULT;
    private int verifierThreads = VERIFIER_THREADS_DEFAULT;
    private int offerHandoffCapacity = OFFER_HANDOFF_CAPACITY_DEFAULT;
    private int residencyHandoffCapacity = RESIDENCY_HANDOFF_CAPACITY_DEFAULT;
    private Ticker ticker = Ticker.SYSTEM;
    private SsdOperationObserver observer = SsdOperationObserver.NONE;
    private boolean writeFromSource;
    /** Test seam: behave as if O_DIRECT opens failed with EINVAL (this kernel's tmpfs accepts O_DIRECT). */
    boolean simulateDirectIoUnsupported;

    /** Directory holding the shard files; must exist and be writable (it is never created). */
    public SsdSettings directory(Path directory) {
        this.directory = directory;
        return this;
    }

    /** Number of shard files; consecutive regions alternate between shards. */
    public SsdSettings shardCount(int shardCount) {
        this.shardCount = shardCount;
        return this;
    }

    /** Total bytes over all shards, shared equally and rounded down to 4096 per shard. */
    public SsdSettings capacityBytes(long capacityBytes) {
        this.capacityBytes = capacityBytes;
        return this;
    }

    /** Bytes per extent slot (header block + largest payload), a multiple of 4096. */
    public SsdSettings extentBytes(long extentBytes) {
        this.extentBytes = extentBytes;
        return this;
    }

    /**
     * Reserve every shard's blocks with fallocate on open (a full disk then fails the open, naming the file). False
     * makes sparse shards (ftruncate): the open always succeeds and a full disk shows up as writes dropped with
     * {@link SsdDropReason#NO_SPACE}.
     */
    public SsdSettings preallocate(boolean preallocate) {
        this.preallocate = preallocate;
        return this;
    }

    /** Requests in the kernel at once, reads and writes together. */
    public SsdSettings queueDepth(int queueDepth) {
        this.queueDepth = queueDepth;
        return this;
    }

    /** Offered writes waiting for a staging buffer; beyond it offers are dropped ({@link SsdDropReason#QUEUE_FULL}). */
    public SsdSettings writeQueueCapacity(int writeQueueCapacity) {
        this.writeQueueCapacity = writeQueueCapacity;
        return this;
    }

    /** Extent-sized aligned staging buffers, i.e. writes in progress at once. */
    public SsdSettings writeStagingBuffers(int writeStagingBuffers) {
        this.writeStagingBuffers = writeStagingBuffers;
        return this;
    }

    /** Reads accepted but not yet submitted before {@link SsdFailure#QUEUE_FULL}. */
    public SsdSettings restoreQueueCapacity(int restoreQueueCapacity) {
        this.restoreQueueCapacity = restoreQueueCapacity;
        return this;
    }

    /** Payload-sized bounce buffers for reads into destinations that are not 4096-aligned. */
    public SsdSettings bounceBuffers(int bounceBuffers) {
        this.bounceBuffers = bounceBuffers;
        return this;
    }

    /** 4 KiB blocks for tail reads, header scans and header invalidations. */
    public SsdSettings smallBlocks(int smallBlocks) {
        this.smallBlocks = smallBlocks;
        return this;
    }

    public SsdSettings writePolicy(SsdWritePolicy writePolicy) {
        this.writePolicy = Objects.requireNonNull(writePolicy, "writePolicy");
        return this;
    }

    /** Keys remembered as "sighted once" by {@link SsdWritePolicy#REUSE_AWARE}. */
    public SsdSettings reuseAwareCapacity(int reuseAwareCapacity) {
        this.reuseAwareCapacity = reuseAwareCapacity;
        return this;
    }

    /** Header reads in flight during the open-time scan. */
    public SsdSettings recoveryScanDepth(int recoveryScanDepth) {
        this.recoveryScanDepth = recoveryScanDepth;
        return this;
    }

    /**
     * Issue fdatasync between the steps of the commit protocol (intent, payload, commit). Off: the protocol is
     * crash-consistent against process death (completed O_DIRECT writes are in the device); on: also against power
     * loss on devices with a volatile write cache, at two extra syncs per extent.
     */
    public SsdSettings syncWrites(boolean syncWrites) {
        this.syncWrites = syncWrites;
        return this;
    }

    public SsdSettings ticker(Ticker ticker) {
        this.ticker = Objects.requireNonNull(ticker, "ticker");
        return this;
    }

    SsdSettings simulateDirectIoUnsupported(boolean simulate) {
        this.simulateDirectIoUnsupported = simulate;
        return this;
    }

    /** Reads the keys named like the fluent methods; absent keys keep their defaults. */
    public static SsdSettings fromJson(JsonObject json) {
        SsdSettings s = new SsdSettings();
        if (json.containsKey("directory")) {
            s.directory(Path.of(json.getString("directory")));
        }
        s.shardCount(json.getInteger("shardCount", s.shardCount));
        s.capacityBytes(json.getLong("capacityBytes", s.capacityBytes));
        s.extentBytes(json.getLong("extentBytes", s.extentBytes));
        s.preallocate(json.getBoolean("preallocate", s.preallocate));
        s.queueDepth(json.getInteger("queueDepth", s.queueDepth));
        s.writeQueueCapacity(json.getInteger("writeQueueCapacity", s.writeQueueCapacity));
        s.writeStagingBuffers(json.getInteger("writeStagingBuffers", s.writeStagingBuffers));
        s.restoreQueueCapacity(json.getInteger("restoreQueueCapacity", s.restoreQueueCapacity));
        s.bounceBuffers(json.getInteger("bounceBuffers", s.bounceBuffers));
        s.smallBlocks(json.getInteger("smallBlocks", s.smallBlocks));
        s.writePolicy(SsdWritePolicy.valueOf(json.getString("writePolicy", s.writePolicy.name())
                .toUpperCase(Locale.ROOT)));
        s.reuseAwareCapacity(json.getInteger("reuseAwareCapacity", s.reuseAwareCapacity));
        s.recoveryScanDepth(json.getInteger("recoveryScanDepth", s.recoveryScanDepth));
        s.syncWrites(json.getBoolean("syncWrites", s.syncWrites));
        s.verifierThreads(json.getInteger("verifierThreads", s.verifierThreads));
        s.offerHandoffCapacity(json.getInteger("offerHandoffCapacity", s.offerHandoffCapacity));
        s.residencyHandoffCapacity(json.getInteger("residencyHandoffCapacity", s.residencyHandoffCapacity));
        return s;
    }

    /**
     * Write offers and reuse notes from the storage role waiting for the SSD role at most; beyond it an offer is
     * refused at the hand-off (counted in {@code orbitkv_handoff_refused_total}) and that page is never written.
     */
    public SsdSettings offerHandoffCapacity(int offerHandoffCapacity) {
        this.offerHandoffCapacity = offerHandoffCapacity;
        return this;
    }

    public int offerHandoffCapacity() {
        return offerHandoffCapacity;
    }

    /**
     * Residency changes (committed, overwritten extents) waiting for the storage role at most; beyond it a change is
     * refused (counted) and the storage role resynchronises its residency view from the store.
     */
    public SsdSettings residencyHandoffCapacity(int residencyHandoffCapacity) {
        this.residencyHandoffCapacity = residencyHandoffCapacity;
        return this;
    }

    public int residencyHandoffCapacity() {
        return residencyHandoffCapacity;
    }

    /**
     * Threads that verify read payloads (CRC32C of up to an extent per read) off the role thread, so that a 2 MiB
     * checksum never runs on an event loop; 0 verifies on the role thread.
     */
    public SsdSettings verifierThreads(int verifierThreads) {
        this.verifierThreads = verifierThreads;
        return this;
    }

    public int verifierThreads() {
        return verifierThreads;
    }

    /**
     * Write payloads straight from their DRAM slot when it is aligned (no staging copy; the image stays pinned until
     * its payload is on disk). Off by default: a queued write then never holds DRAM.
     */
    public SsdSettings writeFromSource(boolean writeFromSource) {
        this.writeFromSource = writeFromSource;
        return this;
    }

    public boolean writeFromSource() {
        return writeFromSource;
    }

    /** Who hears about finished writes (cost observation); none by default. */
    public SsdSettings observer(SsdOperationObserver observer) {
        this.observer = Objects.requireNonNull(observer, "observer");
        return this;
    }

    public SsdOperationObserver observer() {
        return observer;
    }

    public Path directory() {
        return directory;
    }

    public int shardCount() {
        return shardCount;
    }

    public long capacityBytes() {
        return capacityBytes;
    }

    public long extentBytes() {
        return extentBytes;
    }

    /** Largest payload one extent holds. */
    public long maxPayloadBytes() {
        return extentBytes - SsdExtentHeader.HEADER_BLOCK_BYTES;
    }

    /** Bytes of one shard file: the capacity shared by the shards, rounded down to 4096. */
    public long shardBytes() {
        return capacityBytes / shardCount & -SsdExtentHeader.EXTENT_ALIGNMENT_BYTES;
    }

    /** Largest pages per region: about 8 regions per shard or more, at most 16 pages of {@link #extentBytes}. */
    public int regionExtents() {
        long extents = shardBytes() / extentBytes;
        return (int) Math.max(1, Math.min(16, extents / 8));
    }

    /** Bytes of every region but the last of a shard (which also takes what is left of the shard). */
    public long regionBytes() {
        return regionExtents() * extentBytes;
    }

    /** Regions per shard (the last one longer than {@link #regionBytes} by less than a region). */
    public int regionsPerShard() {
        return (int) (shardBytes() / regionBytes());
    }

    /** Pages of {@code pageBytes} one shard holds once full (each takes 4 KiB + the length rounded up to 4 KiB). */
    public long pagesPerShard(long pageBytes) {
        long span = SsdExtentHeader.HEADER_BLOCK_BYTES + ((pageBytes + 4095) & -4096L);
        long regions = regionsPerShard();
        long last = shardBytes() - (regions - 1) * regionBytes();
        return (regions - 1) * (regionBytes() / span) + last / span;
    }

    /** Pages of {@code pageBytes} the whole tier holds once full. */
    public long pagesOf(long pageBytes) {
        return shardCount * pagesPerShard(pageBytes);
    }

    public boolean preallocate() {
        return preallocate;
    }

    public int queueDepth() {
        return queueDepth;
    }

    public int writeQueueCapacity() {
        return writeQueueCapacity;
    }

    public int writeStagingBuffers() {
        return writeStagingBuffers;
    }

    public int restoreQueueCapacity() {
        return restoreQueueCapacity;
    }

    public int bounceBuffers() {
        return bounceBuffers;
    }

    public int smallBlocks() {
        return smallBlocks;
    }

    public SsdWritePolicy writePolicy() {
        return writePolicy;
    }

    public int reuseAwareCapacity() {
        return reuseAwareCapacity;
    }

    public int recoveryScanDepth() {
        return recoveryScanDepth;
    }

    public boolean syncWrites() {
        return syncWrites;
    }

    public Ticker ticker() {
        return ticker;
    }

    /** @throws IllegalArgumentException naming the first bad setting */
    public void validate() {
        if (directory == null) {
            throw new IllegalArgumentException("ssd directory is not set");
        }
        if (extentBytes < 2L * SsdExtentHeader.HEADER_BLOCK_BYTES || extentBytes % SsdExtentHeader.EXTENT_ALIGNMENT_BYTES != 0
                || extentBytes - SsdExtentHeader.HEADER_BLOCK_BYTES > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("extentBytes must be a multiple of 4096, >= 8192 and hold at most 2 GiB of payload: "
                    + extentBytes);
        }
        if (shardCount < 1 || shardCount > 256) {
            throw new IllegalArgumentException("shardCount must be 1..256: " + shardCount);
        }
        if (shardBytes() < extentBytes || (long) regionsPerShard() * shardCount > Integer.MAX_VALUE / 2) {
            throw new IllegalArgumentException("capacityBytes " + capacityBytes + " must hold at least one extent of "
                    + extentBytes + " bytes per shard (" + shardCount + " shards)");
        }
        if (queueDepth < 1 || queueDepth > 4096) {
            throw new IllegalArgumentException("queueDepth must be 1..4096: " + queueDepth);
        }
        if (writeQueueCapacity < 1 || writeStagingBuffers < 1 || restoreQueueCapacity < 1 || bounceBuffers < 0
                || smallBlocks < 2 || reuseAwareCapacity < 1 || recoveryScanDepth < 1
                || recoveryScanDepth >= smallBlocks || verifierThreads < 0 || verifierThreads > 64
                || offerHandoffCapacity < 1 || residencyHandoffCapacity < 1) {
            throw new IllegalArgumentException("queue, buffer, hand-off and scan sizes must be positive "
                    + "(smallBlocks >= 2 and > recoveryScanDepth; verifierThreads 0..64)");
        }
    }
}
