package io.orbitkv.perf.dram;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.orbitkv.client.sim.SyntheticKv;
import io.orbitkv.perf.Benchmarks;
import io.vertx.core.json.JsonObject;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** {@code bench dram}: verification before the baseline rewrites the destination, alternating order, a small real run. */
class DramBenchTest {
    private static final int PAGES = 4;
    private static final long PAGE_BYTES = 64 << 10;

    private static MemorySegment[] pages(Arena arena) {
        MemorySegment[] pages = new MemorySegment[PAGES];
        for (int i = 0; i < PAGES; i++) {
            pages[i] = arena.allocate(PAGE_BYTES, 4096);
        }
        return pages;
    }

    private static void restoreCorrectly(MemorySegment[] destination) {
        for (int i = 0; i < destination.length; i++) {
            SyntheticKv.fill(destination[i], DramBench.CONTENT_SEED, 0, i);
        }
    }

    @Test
    void aCycleThatRestoredNothingFailsItsRoundEvenWhenMemcpyRewritesTheDestinationAfterIt() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment[] destination = pages(arena);
            restoreCorrectly(destination); // what a previous round left behind
            Runnable brokenCycle = () -> { };
            Runnable memcpy = () -> restoreCorrectly(destination);
            for (int round : new int[] {0, 1}) { // cycle first, then memcpy first
                assertThatThrownBy(() -> DramBench.measuredRound(round, brokenCycle, memcpy, destination))
                        .as("round %d", round).isInstanceOf(IllegalStateException.class)
                        .hasMessageContaining("after the publish→restore cycle, restored page 0 differs");
            }
        }
    }

    @Test
    void aCycleThatRestoredOnePageWrongFails() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment[] destination = pages(arena);
            Runnable cycle = () -> {
                restoreCorrectly(destination);
                destination[2].set(java.lang.foreign.ValueLayout.JAVA_BYTE, 4097, (byte) 0);
            };
            assertThatThrownBy(() -> DramBench.measuredRound(0, cycle, () -> restoreCorrectly(destination), destination))
                    .hasMessageContaining("restored page 2 differs");
        }
    }

    @Test
    void theCycleAndMemcpyAlternateWhichGoesFirst() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment[] destination = pages(arena);
            List<String> order = new ArrayList<>();
            for (int round = 0; round < 4; round++) {
                long[] nanos = DramBench.measuredRound(round, () -> {
                    order.add("cycle");
                    restoreCorrectly(destination);
                }, () -> {
                    order.add("memcpy");
                    restoreCorrectly(destination);
                }, destination);
                assertThat(nanos[0]).isPositive();
                assertThat(nanos[1]).isPositive();
            }
            assertThat(order).containsExactly("cycle", "memcpy", "memcpy", "cycle", "cycle", "memcpy", "memcpy", "cycle");
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aSmallRealRunVerifiesEveryRoundAndAlternatesBothPairs() {
        JsonObject report = Benchmarks.run("dram", new String[] {"--rounds=4", "--batch-pages=8", "--page-bytes=256KiB",
                "--pool-size=64MiB", "--query-iterations=200", "--query-warmup=50", "--rpc-warmup=50"});

        JsonObject config = report.getJsonObject("config");
        assertThat(report.getBoolean("passed")).isTrue();
        assertThat(config.getInteger("cycle_first_rounds")).isEqualTo(2);
        assertThat(config.getInteger("memcpy_first_rounds")).isEqualTo(2);
        assertThat(config.getInteger("ping_first_iterations")).isEqualTo(100);
        assertThat(config.getInteger("query_first_iterations")).isEqualTo(100);
        assertThat(report.getJsonObject("figures").getLong("verified_pages")).isEqualTo(2L * 4 * 8);
        assertThat(report.getJsonObject("figures").getJsonObject("query_64_page_hit").getLong("count")).isEqualTo(200);
        assertThat(report.getJsonObject("baselines").getJsonObject("noop_grpc_ping").getLong("count")).isEqualTo(200);
        assertThat(report.getDouble("throughput_ratio")).isPositive();
    }
}
