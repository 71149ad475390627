package io.orbitkv.perf.replay;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * An offline model of what the Manager's DRAM tier does with a replayed request, to explain its measured hit ratio
 * against {@link io.orbitkv.perf.trace.CacheBounds}' LRU.
 *
 * <p>The two differ in one rule. CacheBounds' LRU touches <em>every</em> block of a request (refresh or insert). The
 * Manager only sees what an engine does: the query pins and so refreshes the leading resident run; the publish then
 * inserts the blocks that are absent, while a block that is resident behind a gap comes back ALREADY_PRESENT and is
 * <em>not</em> refreshed. Such blocks age out sooner than LRU would let them, so the Manager's hit ratio can be a
 * little lower than LRU's at the same capacity. This model applies exactly the Manager's rule (leading run refreshed
 * first to last, absent blocks inserted first to last, evicting the least recent), so with one engine replaying in
 * order its hits should equal the Manager's measured hits; a remaining difference would be something else (pinned or
 * in-flight pages, allocator size classes, concurrency).
 */
final class ManagerLruModel {
    private final long capacityBlocks;
    private final LinkedHashMap<Long, Boolean> recency;
    private long hits;
    private long references;
    private long residentBehindGap;

    ManagerLruModel(long capacityBlocks) {
        this.capacityBlocks = capacityBlocks;
        this.recency = new LinkedHashMap<>(16, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<Long, Boolean> eldest) {
                return size() > ManagerLruModel.this.capacityBlocks;
            }
        };
    }

    void onRequest(long[] hashIds) {
        references += hashIds.length;
        int run = 0;
        while (run < hashIds.length && recency.containsKey(hashIds[run])) {
            run++;
        }
        hits += run;
        for (int i = 0; i < run; i++) {
            recency.get(hashIds[i]); // refresh: the lease's pins end at release, in chain order
        }
        for (int i = run; i < hashIds.length; i++) {
            if (recency.containsKey(hashIds[i])) {
                residentBehindGap++; // ALREADY_PRESENT: not refreshed
            } else {
                recency.put(hashIds[i], Boolean.TRUE);
            }
        }
    }

    long hits() {
        return hits;
    }

    long references() {
        return references;
    }

    long residentBehindGap() {
        return residentBehindGap;
    }

    double hitRatio() {
        return references == 0 ? 0.0 : (double) hits / references;
    }
}
