package io.orbitkv.storage;

import io.orbitkv.cost.CostProxy;
import io.orbitkv.model.cost.ResourceId;
import io.orbitkv.nativeio.shm.PoolPages;
import io.orbitkv.ssd.SsdProxy;
import java.nio.file.Path;
import java.util.Objects;

/**
 * Settings of the storage role; fluent. Sizes in bytes, times in nanoseconds. Required: {@link #pool}; the rest have
 * defaults (no SSD tier, no cost observation, the pool's chunk of conf/orbitkv.yaml, half the pool per instance for
 * unsealed publishes, no quarantine).
 */
public final class StorageSettings {
    public static final long CHUNK_BYTES_DEFAULT = 2L << 20;
    public static final int RESIDENCY_CAPACITY_DEFAULT = 1 << 16;
    /** Retained bytes all tenants together may hold, as a fraction of the pool. */
    public static final double RETENTION_BUDGET_FRACTION_DEFAULT = 0.5;
    public static final long RETENTION_MAX_TTL_NANOS_DEFAULT = java.util.concurrent.TimeUnit.HOURS.toNanos(24);

    private Path poolPath;
    private long poolBytes;
    private long chunkBytes = CHUNK_BYTES_DEFAULT;
    private long publishBudgetBytes = -1;
    private int residencyCapacity = RESIDENCY_CAPACITY_DEFAULT;
    private long incarnation;
    private long quarantineNanos;
    private SsdProxy ssd;
    private ResourceId ssdStore;
    private CostProxy cost;
    private ResourceId dramPool;
    private boolean backgroundChecksums;
    private PoolPages.Answer poolPages;
    private double retentionBudgetFraction = RETENTION_BUDGET_FRACTION_DEFAULT;
    private long retentionMaxTtlNanos = RETENTION_MAX_TTL_NANOS_DEFAULT;
    private java.util.function.ToDoubleFunction<String> retentionShares;

    /** The shared-memory pool file this role creates, reserves and removes, and its size. */
    public StorageSettings pool(Path path, long bytes) {
        this.poolPath = path;
        this.poolBytes = bytes;
        return this;
    }

    /**
     * What the pool's directory gives it ({@link PoolPages}), when the caller asked already (the Manager does, once, at
     * start); unset, the role asks itself on its start worker.
     */
    public StorageSettings poolPages(PoolPages.Answer poolPages) {
        this.poolPages = poolPages;
        return this;
    }

    /** The allocator's chunk (pool.chunk); the pool size must be a multiple. */
    public StorageSettings chunkBytes(long chunkBytes) {
        this.chunkBytes = chunkBytes;
        return this;
    }

    /**
     * Retention hints (see {@link RetentionTable}): all tenants together retain at most {@code budgetFraction} of the
     * pool, each its {@code shares} fraction of that (null: equal shares among the tenants holding retentions), for at
     * most {@code maxTtlNanos} per retention.
     */
    public StorageSettings retention(double budgetFraction, long maxTtlNanos,
                                     java.util.function.ToDoubleFunction<String> shares) {
        this.retentionBudgetFraction = budgetFraction;
        this.retentionMaxTtlNanos = maxTtlNanos;
        this.retentionShares = shares;
        return this;
    }

    long retentionBudgetBytes() {
        return (long) (poolBytes * retentionBudgetFraction);
    }

    long retentionMaxTtlNanos() {
        return retentionMaxTtlNanos;
    }

    java.util.function.ToDoubleFunction<String> retentionShares() {
        return retentionShares;
    }

    /** Unsealed publish bytes one instance may hold (publish.budget-fraction of the pool); default half the pool. */
    public StorageSettings publishBudgetBytes(long publishBudgetBytes) {
        this.publishBudgetBytes = publishBudgetBytes;
        return this;
    }

    /** Changes the residency stream keeps for followers before they see a gap. */
    public StorageSettings residencyCapacity(int residencyCapacity) {
        this.residencyCapacity = residencyCapacity;
        return this;
    }

    /** This Manager's incarnation, carried by the residency stream. */
    public StorageSettings incarnation(long incarnation) {
        this.incarnation = incarnation;
        return this;
    }

    /** How long slots of an ended session are not reused (session.quarantine-ms). */
    public StorageSettings quarantineNanos(long quarantineNanos) {
        this.quarantineNanos = quarantineNanos;
        return this;
    }

    /**
     * With an SSD tier: sealed images are offered to {@code ssd} (weak references), committed extents are mirrored
     * for probes, and keys found only on SSD are read back on demand; SSD reads are observed against {@code ssdStore}.
     */
    public StorageSettings ssd(SsdProxy ssd, ResourceId ssdStore) {
        this.ssd = ssd;
        this.ssdStore = ssdStore;
        return this;
    }

    /** With cost observation: pool copies and SSD reads are reported to {@code cost} against {@code dramPool}. */
    public StorageSettings cost(CostProxy cost, ResourceId dramPool) {
        this.cost = cost;
        this.dramPool = dramPool;
        return this;
    }

    /**
     * After a seal without checksums, compute the images' CRC32C on a worker and remember them at their exact slot
     * generations (a peer source then grants them without reading the pages again). Off by default; the Manager turns
     * it on with the peer role.
     */
    public StorageSettings backgroundChecksums(boolean backgroundChecksums) {
        this.backgroundChecksums = backgroundChecksums;
        return this;
    }

    boolean backgroundChecksums() {
        return backgroundChecksums;
    }

    /** Checks the required settings; answers this. */
    StorageSettings validate() {
        Objects.requireNonNull(poolPath, "pool path");
        if (poolBytes <= 0 || chunkBytes <= 0 || poolBytes % chunkBytes != 0) {
            throw new IllegalArgumentException("the pool (" + poolBytes + " bytes) must be a positive multiple of its chunk ("
                    + chunkBytes + " bytes)");
        }
        if (!(retentionBudgetFraction >= 0 && retentionBudgetFraction <= 1) || retentionMaxTtlNanos <= 0) {
            throw new IllegalArgumentException("retention budget fraction must be in [0, 1] and its max ttl > 0, got "
                    + retentionBudgetFraction + ", " + retentionMaxTtlNanos + " ns");
        }
        return this;
    }

    Path poolPath() {
        return poolPath;
    }

    PoolPages.Answer poolPages() {
        return poolPages;
    }

    long poolBytes() {
        return poolBytes;
    }

    long chunkBytes() {
        return chunkBytes;
    }

    long publishBudgetBytes() {
        return publishBudgetBytes >= 0 ? publishBudgetBytes : poolBytes / 2;
    }

    int residencyCapacity() {
        return residencyCapacity;
    }

    long incarnation() {
        return incarnation;
    }

    long quarantineNanos() {
        return quarantineNanos;
    }

    SsdProxy ssd() {
        return ssd;
    }

    ResourceId ssdStore() {
        return ssdStore;
    }

    CostProxy cost() {
        return cost;
    }

    ResourceId dramPool() {
        return dramPool;
    }
}
