package io.orbitkv.storage;

import io.orbitkv.common.ConfigException;
import io.orbitkv.common.ConfigValues;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.ToDoubleFunction;

/**
 * The storage role's section of the Manager's configuration: the DRAM pool ({@code pool.*}), the publish budget
 * ({@code publish.*}) and retention hints ({@code retention.*}).
 *
 * @param sizeBytes             the pool, a multiple of {@code chunkBytes}
 * @param chunkBytes            the allocator's chunk, a multiple of 4 KiB
 * @param shmDir                where the pool file is created
 * @param hugePages             what to do when {@code shmDir} does not give huge pages
 * @param publishBudgetFraction of the pool: unsealed publish bytes one instance may hold
 * @param retention             the retention budget and the longest retention
 */
public record PoolSettings(long sizeBytes, long chunkBytes, Path shmDir, HugePages hugePages,
                           double publishBudgetFraction, Retention retention) {

    /** The keys and defaults this section adds to the Manager's configuration. */
    public static final Map<String, String> DEFAULTS = Map.of(
            "pool.size", "1GiB",
            "pool.chunk", "2MiB",
            "pool.shm-dir", "/dev/shm",
            // prefer: huge pages where pool.shm-dir gives them, else 4 KiB pages and a WARN; require: else refuse to start.
            "pool.huge-pages", "prefer",
            "publish.budget-fraction", "0.5",
            // Of the pool: bytes all tenants' retention hints may hold together; one hint lives at most max-ttl-ms.
            "retention.budget-fraction", "0.5",
            "retention.max-ttl-ms", "86400000");

    /**
     * {@code pool.huge-pages}: what the Manager does when {@code pool.shm-dir} does not back the pool with huge pages
     * (see {@link io.orbitkv.nativeio.shm.PoolPages}): start on 4 KiB pages with one WARN line, or refuse to start.
     */
    public enum HugePages {
        PREFER, REQUIRE
    }

    /**
     * Retention hints ({@code retention.*}): all tenants together retain at most {@code budgetFraction} of the pool,
     * each its {@code query.tenant-shares} share of it (equal shares among retaining tenants when none are configured);
     * one retention lives at most {@code maxTtlMillis}.
     */
    public record Retention(double budgetFraction, long maxTtlMillis) {}

    public static PoolSettings fromConfig(ConfigValues v) {
        long pool = v.size("pool.size", 4L << 20, 1L << 40);
        long chunk = v.size("pool.chunk", 64L << 10, 1L << 30);
        if (chunk % 4096 != 0) {
            throw new ConfigException("pool.chunk", "must be a multiple of 4KiB, got " + v.string("pool.chunk"));
        }
        if (pool % chunk != 0) {
            throw new ConfigException("pool.size", "must be a multiple of pool.chunk (" + v.string("pool.chunk")
                    + "), got " + v.string("pool.size"));
        }
        return new PoolSettings(pool, chunk, v.path("pool.shm-dir", false), hugePages(v),
                v.fraction("publish.budget-fraction"),
                new Retention(v.fraction("retention.budget-fraction"),
                        v.integer("retention.max-ttl-ms", 1, 30L * 24 * 3600 * 1000)));
    }

    private static HugePages hugePages(ConfigValues v) {
        return switch (v.string("pool.huge-pages").strip().toLowerCase(Locale.ROOT)) {
            case "prefer" -> HugePages.PREFER;
            case "require" -> HugePages.REQUIRE;
            default -> throw new ConfigException("pool.huge-pages", "must be prefer or require, got '"
                    + v.string("pool.huge-pages") + "'");
        };
    }

    /** A pool file name unique to this Manager's process and incarnation. */
    public Path poolPath(long incarnation) {
        return shmDir.resolve("orbitkv-pool-" + ProcessHandle.current().pid() + "-" + Long.toHexString(incarnation));
    }

    /**
     * The storage role's settings for the pool file at {@code path}: its size, chunk, publish budget and retention,
     * with each tenant's share of the retention budget from {@code retentionShares} (null: equal shares).
     */
    public StorageSettings storageSettings(Path path, ToDoubleFunction<String> retentionShares) {
        return new StorageSettings().pool(path, sizeBytes).chunkBytes(chunkBytes)
                .publishBudgetBytes((long) (sizeBytes * publishBudgetFraction))
                .retention(retention.budgetFraction(), TimeUnit.MILLISECONDS.toNanos(retention.maxTtlMillis()),
                        retentionShares);
    }
}
