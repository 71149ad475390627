package io.orbitkv.perf.trace;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** Offline LRU agrees with {@link CacheBounds}; Belady's MIN never hits less than LRU and keeps what is reused next. */
class OfflineCachesTest {

    private static TraceRequest request(long... ids) {
        return new TraceRequest(0, ids.length * 512, 1, ids);
    }

    @Test
    void beladyKeepsTheBlocksUsedSoonestWhereLruKeepsTheMostRecent() {
        // Capacity 2: A, B, C, A, B. LRU evicts A for C and B for A: no hit. MIN drops C (never used again): A and B hit.
        List<TraceRequest> trace = List.of(request(1), request(2), request(3), request(1), request(2));

        assertThat(Arrays.stream(OfflineCaches.lru(trace, 2)).sum()).isZero();
        assertThat(OfflineCaches.belady(trace, 2)).containsExactly(0, 0, 0, 1, 1);
    }

    @Test
    void lruMatchesCacheBoundsAndBeladyNeverHitsLessOnRandomPrefixTraces() {
        long seed = 42;
        Random random = new Random(seed);
        List<TraceRequest> trace = new ArrayList<>();
        for (int i = 0; i < 400; i++) {
            int prefix = random.nextInt(8);
            int length = 1 + random.nextInt(12);
            long[] ids = new long[length];
            for (int p = 0; p < length; p++) {
                // Shared prefixes from a small family, then private blocks.
                ids[p] = p < 3 ? prefix * 100L + p : 10_000L + i * 20L + p;
            }
            trace.add(request(ids));
        }
        for (long capacity : new long[] {5, 20, 80}) {
            long lru = Arrays.stream(OfflineCaches.lru(trace, capacity)).sum();
            long belady = Arrays.stream(OfflineCaches.belady(trace, capacity)).sum();
            assertThat(lru).as("seed %d capacity %d", seed, capacity)
                    .isEqualTo(CacheBounds.simulate(trace, capacity).lruAt(capacity).hitBlocks());
            assertThat(belady).as("seed %d capacity %d", seed, capacity).isGreaterThanOrEqualTo(lru);
        }
    }
}
