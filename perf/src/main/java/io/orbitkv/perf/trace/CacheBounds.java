package io.orbitkv.perf.trace;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Offline hit-ratio bounds of a trace: what an infinite prefix cache and an LRU prefix cache of a given capacity (in
 * blocks) would hit. A replay against the Manager is judged against these numbers.
 *
 * <h2>Counting (the exact definition)</h2>
 * The unit is one prefix block (one hash id). Requests are processed one at a time in trace order; for each request:
 * <ol>
 *   <li><b>References</b>: every block of the request counts once, so the total is the sum of {@code hash_ids} lengths.
 *   <li><b>Hits</b>: the leading run of the request's blocks that are in the cache <em>at arrival</em> (before this
 *       request changes anything). The run stops at the first absent block; a later block that happens to be cached is
 *       still a miss, because an engine can only reuse a contiguous prefix of its KV cache.
 *   <li><b>Update</b>: then every block of the request, first to last, is touched: a cached block moves to the
 *       most-recently-used end, an absent block is inserted there, and while the cache holds more than its capacity
 *       the least-recently-used block is evicted (this may evict an earlier block of the same request when the request
 *       is longer than the capacity). So the request's last block ends up most recent.
 * </ol>
 * Hit ratio = hits / references. The infinite cache is the same with no eviction; there, a block is present exactly
 * when it was referenced before, so its hits are references minus unique blocks.
 *
 * <p>On {@code shared/traces/synthetic_trace.jsonl} this gives the figures of the traces README: 121,877 references,
 * 43,924 unique blocks, infinite 64.0 %, LRU at 2,000 / 5,000 / 10,000 / 20,000 / 50,000 blocks (decimal thousands)
 * 14.4 / 27.9 / 42.3 / 57.1 / 64.0 %. Counting every cached block as a hit (not just the leading run) instead gives
 * 14.6 % at 2,000 blocks, and binary thousands (2,048, ...) give 14.6 / 28.2 / 43.1 / 57.7 %: both are "counting
 * something else".
 *
 * <p>Design note: all capacities are simulated in one pass over the trace, so a trace file is streamed once however
 * many points the curve has. Capacities are independent simulations; the reference stream does not depend on the
 * capacity, so LRU's inclusion property holds and the curve is non-decreasing in capacity.
 */
public final class CacheBounds {

    private CacheBounds() {
    }

    /** Hits of one simulated cache. {@code capacityBlocks} is {@link #INFINITE} for the unbounded cache. */
    public record HitRatio(long capacityBlocks, long blockReferences, long hitBlocks) {
        public static final long INFINITE = -1;

        /** Hits / references; 0 for an empty trace. */
        public double ratio() {
            return blockReferences == 0 ? 0.0 : (double) hitBlocks / blockReferences;
        }

        /** The ratio in percent rounded half-up to one decimal, as the traces README quotes it. */
        public double percentRounded() {
            return Math.round(ratio() * 1000.0) / 10.0;
        }
    }

    /**
     * The bounds of one trace.
     *
     * @param requests        requests simulated
     * @param blockReferences sum of the requests' block counts
     * @param uniqueBlocks    distinct hash ids
     * @param infinite        the unbounded cache
     * @param lru             one entry per requested capacity, in the order asked
     */
    public record Bounds(long requests, long blockReferences, long uniqueBlocks, HitRatio infinite, List<HitRatio> lru) {
        public Bounds {
            lru = List.copyOf(lru);
        }

        /** The LRU point for {@code capacityBlocks}; throws when it was not simulated. */
        public HitRatio lruAt(long capacityBlocks) {
            return lru.stream().filter(point -> point.capacityBlocks() == capacityBlocks).findFirst()
                    .orElseThrow(() -> new IllegalArgumentException("capacity " + capacityBlocks + " not simulated"));
        }
    }

    /** Simulates the infinite cache and LRU at each of {@code capacitiesBlocks} over {@code trace} in one pass. */
    public static Bounds simulate(Iterable<TraceRequest> trace, long... capacitiesBlocks) {
        Simulation simulation = new Simulation(capacitiesBlocks);
        for (TraceRequest request : trace) {
            simulation.onRequest(request.hashIds());
        }
        return simulation.bounds();
    }

    /** As {@link #simulate(Iterable, long...)}, streaming the trace file instead of holding it. */
    public static Bounds simulate(Path trace, long... capacitiesBlocks) throws IOException {
        Simulation simulation = new Simulation(capacitiesBlocks);
        MooncakeTrace.forEach(trace, request -> simulation.onRequest(request.hashIds()));
        return simulation.bounds();
    }

    /** Incremental form, for callers that already iterate a trace for another purpose. */
    public static final class Simulation {
        private final Set<Long> seen = new HashSet<>();
        private final LruPrefixCache[] lruCaches;
        private long requests;
        private long blockReferences;
        private long infiniteHits;

        public Simulation(long... capacitiesBlocks) {
            lruCaches = Arrays.stream(capacitiesBlocks).mapToObj(LruPrefixCache::new).toArray(LruPrefixCache[]::new);
        }

        public void onRequest(long[] hashIds) {
            requests++;
            blockReferences += hashIds.length;
            infiniteHits += leadingRunIn(hashIds, seen);
            for (long id : hashIds) {
                seen.add(id);
            }
            for (LruPrefixCache cache : lruCaches) {
                cache.onRequest(hashIds);
            }
        }

        public Bounds bounds() {
            List<HitRatio> lru = new ArrayList<>(lruCaches.length);
            for (LruPrefixCache cache : lruCaches) {
                lru.add(new HitRatio(cache.capacityBlocks, blockReferences, cache.hits));
            }
            return new Bounds(requests, blockReferences, seen.size(),
                    new HitRatio(HitRatio.INFINITE, blockReferences, infiniteHits), lru);
        }
    }

    private static int leadingRunIn(long[] hashIds, Set<Long> cached) {
        int run = 0;
        while (run < hashIds.length && cached.contains(hashIds[run])) {
            run++;
        }
        return run;
    }

    /** LRU over block ids; {@link LinkedHashMap} in access order is the recency list. */
    private static final class LruPrefixCache {
        private final long capacityBlocks;
        private final LinkedHashMap<Long, Boolean> recency;
        private long hits;

        LruPrefixCache(long capacityBlocks) {
            if (capacityBlocks < 0) {
                throw new IllegalArgumentException("capacity must be >= 0 blocks, got " + capacityBlocks);
            }
            this.capacityBlocks = capacityBlocks;
            this.recency = new LinkedHashMap<>(16, 0.75f, true) {
                @Override
                protected boolean removeEldestEntry(Map.Entry<Long, Boolean> eldest) {
                    return size() > LruPrefixCache.this.capacityBlocks;
                }
            };
        }

        void onRequest(long[] hashIds) {
            int run = 0;
            while (run < hashIds.length && recency.containsKey(hashIds[run])) {
                run++;
            }
            hits += run;
            for (long id : hashIds) {
                // put() both refreshes a present key (access order) and inserts an absent one, evicting the eldest.
                recency.put(id, Boolean.TRUE);
            }
        }
    }
}
