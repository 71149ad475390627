package io.orbitkv.perf.trace;

import org.junit.jupiter.api.Test;
import org.quicktheories.core.Gen;

import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.quicktheories.QuickTheory.qt;
import static org.quicktheories.generators.SourceDSL.integers;
import static org.quicktheories.generators.SourceDSL.lists;

/**
 * Offline cache bounds. The two properties run on QuickTheories: a failure prints the shrunk trace and "Seed was N",
 * and {@code -DQT_SEED=N} replays exactly that run.
 */
class CacheBoundsTest {

    private static TraceRequest request(long... hashIds) {
        return new TraceRequest(0, hashIds.length * TraceRequest.BLOCK_TOKENS, 1, hashIds);
    }

    @Test
    void reproducesTheTracesReadmeFiguresOnTheSharedTrace() throws Exception {
        CacheBounds.Bounds bounds = CacheBounds.simulate(SharedTraces.syntheticOrSkip(),
                TraceBoundsReport.README_CAPACITIES_BLOCKS);

        assertThat(bounds.requests()).isEqualTo(3_993);
        assertThat(bounds.blockReferences()).isEqualTo(121_877);
        assertThat(bounds.uniqueBlocks()).isEqualTo(43_924);
        assertThat(bounds.infinite().percentRounded()).isEqualTo(64.0);
        assertThat(bounds.lru()).extracting(CacheBounds.HitRatio::percentRounded)
                .containsExactly(14.4, 27.9, 42.3, 57.1, 64.0);
    }

    @Test
    void onlyTheLeadingRunOfCachedBlocksHits() {
        // Block 3 is cached, but block 9 before it is not: an engine cannot reuse KV after a gap.
        CacheBounds.Bounds bounds = CacheBounds.simulate(List.of(request(1, 2, 3), request(1, 9, 3)), 100);

        assertThat(bounds.blockReferences()).isEqualTo(6);
        assertThat(bounds.uniqueBlocks()).isEqualTo(4);
        assertThat(bounds.infinite().hitBlocks()).isEqualTo(1);
        assertThat(bounds.lruAt(100).hitBlocks()).isEqualTo(1);
    }

    @Test
    void lruEvictsTheLeastRecentlyTouchedBlockAndHitsRefreshRecency() {
        List<TraceRequest> trace = List.of(
                request(1),     // cache (oldest first): 1
                request(2),     // 1 2
                request(1),     // hit; 2 1
                request(3),     // evicts 2: 1 3
                request(1),     // hit; 3 1
                request(2));    // miss (was evicted); evicts 3: 1 2

        CacheBounds.Bounds bounds = CacheBounds.simulate(trace, 2);

        assertThat(bounds.lruAt(2).hitBlocks()).isEqualTo(2);
        assertThat(bounds.infinite().hitBlocks()).isEqualTo(3);
    }

    @Test
    void zeroCapacityNeverHitsAndAnEmptyTraceHasRatioZero() {
        assertThat(CacheBounds.simulate(List.of(request(1), request(1)), 0).lruAt(0).hitBlocks()).isZero();
        assertThat(CacheBounds.simulate(List.<TraceRequest>of(), 10).infinite().ratio()).isZero();
    }

    @Test
    void lruCurveIsNonDecreasingAndBoundedByTheInfiniteCache() {
        qt().withExamples(200).forAll(prefixTraces(), integers().between(0, 40)).checkAssert((trace, capacity) -> {
            CacheBounds.Bounds bounds = CacheBounds.simulate(trace, capacity, capacity + 1, capacity + 7);

            long smaller = bounds.lruAt(capacity).hitBlocks();
            long larger = bounds.lruAt(capacity + 1).hitBlocks();
            long largest = bounds.lruAt(capacity + 7).hitBlocks();
            assertThat(smaller).isLessThanOrEqualTo(larger);
            assertThat(larger).isLessThanOrEqualTo(largest);
            assertThat(largest).isLessThanOrEqualTo(bounds.infinite().hitBlocks());
        });
    }

    @Test
    void lruWithRoomForEveryBlockEqualsTheInfiniteCache() {
        qt().withExamples(200).forAll(prefixTraces()).checkAssert(trace -> {
            long unique = CacheBounds.simulate(trace).uniqueBlocks();
            CacheBounds.Bounds bounds = CacheBounds.simulate(trace, unique);

            assertThat(bounds.lruAt(unique).hitBlocks()).isEqualTo(bounds.infinite().hitBlocks());
            // With an infinite cache and chained ids, every repeated block is a hit.
            assertThat(bounds.infinite().hitBlocks()).isEqualTo(bounds.blockReferences() - unique);
        });
    }

    /** Traces whose ids are prefix-chained like Mooncake's: requests share prefixes of a small tree of documents. */
    static Gen<List<TraceRequest>> prefixTraces() {
        Gen<int[]> paths = lists().of(integers().between(0, 2)).ofSizeBetween(0, 8)
                .map(path -> path.stream().mapToInt(Integer::intValue).toArray());
        return lists().of(paths).ofSizeBetween(0, 30).map(CacheBoundsTest::chainedRequests);
    }

    /** Maps each branch path (child index per level) to ids unique per (prefix, block), as Mooncake ids are. */
    private static List<TraceRequest> chainedRequests(List<int[]> branchPaths) {
        List<TraceRequest> requests = new ArrayList<>();
        for (int[] path : branchPaths) {
            long[] ids = new long[path.length];
            long node = 0;
            for (int level = 0; level < path.length; level++) {
                node = node * 3 + path[level] + 1; // distinct id per tree node
                ids[level] = node;
            }
            requests.add(request(ids));
        }
        return requests;
    }
}
