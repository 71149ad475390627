package io.orbitkv.perf.trace;

import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * Per-request hits of offline caches at one capacity, with {@link CacheBounds}' counting (a hit is the leading run of a
 * request's blocks cached at its arrival; then every block of the request is touched, first to last).
 *
 * <ul>
 *   <li>{@link #lru}: least recently used, exactly {@link CacheBounds}' LRU.</li>
 *   <li>{@link #belady}: Belady's MIN, which evicts the cached block whose next reference is farthest in the future
 *       (never referenced again first). It maximises block hits for a given capacity; with leading-run hits it is the
 *       classic offline reference rather than a proven optimum, since a block behind a gap counts as no hit.</li>
 * </ul>
 */
public final class OfflineCaches {

    private OfflineCaches() {}

    /** Hit blocks of each request under LRU at {@code capacityBlocks}. */
    public static int[] lru(List<TraceRequest> requests, long capacityBlocks) {
        LinkedHashMap<Long, Boolean> recency = new LinkedHashMap<>(16, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<Long, Boolean> eldest) {
                return size() > capacityBlocks;
            }
        };
        int[] hits = new int[requests.size()];
        for (int i = 0; i < requests.size(); i++) {
            long[] ids = requests.get(i).hashIds();
            int run = 0;
            while (run < ids.length && recency.containsKey(ids[run])) {
                run++;
            }
            hits[i] = run;
            for (long id : ids) {
                recency.put(id, Boolean.TRUE);
            }
        }
        return hits;
    }

    /** Hit blocks of each request under Belady's MIN at {@code capacityBlocks}. */
    public static int[] belady(List<TraceRequest> requests, long capacityBlocks) {
        // nextUse[i][p]: the index of the next request after i that references block p's id (MAX_VALUE: never).
        int[][] nextUse = new int[requests.size()][];
        Map<Long, Integer> later = new HashMap<>();
        for (int i = requests.size() - 1; i >= 0; i--) {
            long[] ids = requests.get(i).hashIds();
            nextUse[i] = new int[ids.length];
            for (int p = 0; p < ids.length; p++) {
                nextUse[i][p] = later.getOrDefault(ids[p], Integer.MAX_VALUE);
            }
            for (long id : ids) {
                later.put(id, i);
            }
        }
        // Cached ids by next use, farthest last; ties by id so the set is a total order.
        Map<Long, Integer> cached = new HashMap<>();
        TreeSet<long[]> byNextUse = new TreeSet<>((a, b) -> a[0] != b[0] ? Long.compare(a[0], b[0]) : Long.compare(a[1], b[1]));
        int[] hits = new int[requests.size()];
        for (int i = 0; i < requests.size(); i++) {
            long[] ids = requests.get(i).hashIds();
            int run = 0;
            while (run < ids.length && cached.containsKey(ids[run])) {
                run++;
            }
            hits[i] = run;
            for (int p = 0; p < ids.length; p++) {
                Integer old = cached.put(ids[p], nextUse[i][p]);
                if (old != null) {
                    byNextUse.remove(new long[] {old, ids[p]});
                }
                byNextUse.add(new long[] {nextUse[i][p], ids[p]});
                if (cached.size() > capacityBlocks) {
                    long[] victim = byNextUse.pollLast();
                    cached.remove(victim[1]);
                }
            }
        }
        return hits;
    }
}
