package io.orbitkv.perf.engine;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.vertx.core.json.JsonObject;

/**
 * A snapshot of the Manager's tier counters, read from its meter registry (the same meters the Prometheus scrape shows
 * as {@code orbitkv_tier_reads_total{tier}}, {@code orbitkv_tier_read_bytes_total{tier}}, {@code orbitkv_ssd_*},
 * {@code orbitkv_evictions_total}). Two snapshots give a phase's deltas ({@link #minus}).
 *
 * <p>What the tier counters count (StorageVerticle): {@code dram} = pages leased to engines (every READY page, including
 * those that had just been read back from SSD into the pool); {@code ssd} = pages read back from SSD into pool slots.
 * So pages served straight from DRAM = dram − ssd (a page read back is leased once by the query that asked for it).
 */
public record TierCounters(long dramPages, long dramBytes, long ssdPages, long ssdBytes, long ssdReadHits,
                           long ssdReadBytes, long ssdWriteBytes, long ssdWritesCommitted, long ssdWritesDropped,
                           long ssdKeys, long evictions, java.util.Map<String, Long> droppedByReason) {

    public static TierCounters read(MeterRegistry registry) {
        java.util.Map<String, Long> byReason = new java.util.TreeMap<>();
        for (Counter c : registry.find("orbitkv.ssd.writes.dropped").counters()) {
            byReason.merge(String.valueOf(c.getId().getTag("reason")), (long) c.count(), Long::sum);
        }
        long dropped = byReason.values().stream().mapToLong(Long::longValue).sum();
        Gauge keys = registry.find("orbitkv.ssd.keys").gauge();
        return new TierCounters(
                counter(registry, "orbitkv.tier.reads", "dram"), counter(registry, "orbitkv.tier.read.bytes", "dram"),
                counter(registry, "orbitkv.tier.reads", "ssd"), counter(registry, "orbitkv.tier.read.bytes", "ssd"),
                counter(registry, "orbitkv.ssd.read.hits", null), counter(registry, "orbitkv.ssd.read.bytes", null),
                counter(registry, "orbitkv.ssd.write.bytes", null), counter(registry, "orbitkv.ssd.writes.committed", null),
                dropped, keys == null ? 0 : (long) keys.value(), functionCounter(registry, "orbitkv.evictions"), byReason);
    }

    private static long counter(MeterRegistry registry, String name, String tier) {
        var search = registry.find(name);
        if (tier != null) {
            search = search.tag("tier", tier);
        }
        Counter c = search.counter();
        return c == null ? 0 : (long) c.count();
    }

    private static long functionCounter(MeterRegistry registry, String name) {
        var fc = registry.find(name).functionCounter();
        return fc == null ? 0 : (long) fc.count();
    }

    /** Deltas since {@code earlier}; {@code ssdKeys} stays this snapshot's level (a gauge). */
    public TierCounters minus(TierCounters earlier) {
        return new TierCounters(dramPages - earlier.dramPages, dramBytes - earlier.dramBytes, ssdPages - earlier.ssdPages,
                ssdBytes - earlier.ssdBytes, ssdReadHits - earlier.ssdReadHits, ssdReadBytes - earlier.ssdReadBytes,
                ssdWriteBytes - earlier.ssdWriteBytes, ssdWritesCommitted - earlier.ssdWritesCommitted,
                ssdWritesDropped - earlier.ssdWritesDropped, ssdKeys, evictions - earlier.evictions, dropDeltas(earlier));
    }

    private java.util.Map<String, Long> dropDeltas(TierCounters earlier) {
        java.util.Map<String, Long> out = new java.util.TreeMap<>();
        droppedByReason.forEach((reason, n) -> {
            long d = n - earlier.droppedByReason.getOrDefault(reason, 0L);
            if (d != 0) {
                out.put(reason, d);
            }
        });
        return out;
    }

    /** Pages leased that were already in DRAM (not read back from SSD for this query). */
    public long dramResidentPages() {
        return Math.max(0, dramPages - ssdPages);
    }

    public JsonObject toJson() {
        return new JsonObject()
                .put("hit_pages_from_dram", dramResidentPages())
                .put("hit_pages_from_ssd", ssdPages)
                .put("ssd_share_of_hit_pages", dramPages == 0 ? 0.0 : (double) ssdPages / dramPages)
                .put("tier_reads_dram_pages", dramPages)
                .put("tier_read_bytes_dram", dramBytes)
                .put("tier_reads_ssd_pages", ssdPages)
                .put("tier_read_bytes_ssd", ssdBytes)
                .put("ssd_read_hits", ssdReadHits)
                .put("ssd_read_bytes", ssdReadBytes)
                .put("ssd_write_bytes", ssdWriteBytes)
                .put("ssd_writes_committed", ssdWritesCommitted)
                .put("ssd_writes_dropped", ssdWritesDropped)
                .put("ssd_writes_dropped_by_reason", new JsonObject(new java.util.LinkedHashMap<>(droppedByReason)))
                .put("ssd_keys_at_end", ssdKeys)
                .put("evictions", evictions)
                .put("note", "dram = pages leased (incl. pages just read back from SSD); ssd = pages read back from SSD "
                        + "into the pool (PENDING then READY); hit_pages_from_dram = dram - ssd");
    }
}
