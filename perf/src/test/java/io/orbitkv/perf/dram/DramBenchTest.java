package io.orbitkv.perf.dram;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.sim.SyntheticKv;
import io.orbitkv.perf.BenchArgs;
import io.orbitkv.perf.Benchmarks;
import io.orbitkv.perf.report.BenchReport;
import io.orbitkv.perf.report.KeyedContent;
import io.orbitkv.protocol.engine.AllocatePublishReply;
import io.orbitkv.protocol.engine.Lease;
import io.orbitkv.protocol.engine.QueryReply;
import io.orbitkv.protocol.engine.SlotStatus;
import io.vertx.core.json.JsonObject;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code bench dram}: verification against key-derived bytes before the baseline rewrites the destination, alternating
 * order, and real runs whose path is broken on purpose (a flipped byte in a published page, a wrong ALREADY_PRESENT,
 * an older round's slot in the lease) that the report must name.
 */
class DramBenchTest {
    private static final int PAGES = 4;
    private static final long PAGE_BYTES = 64 << 10;
    private static final String[] SMALL_RUN = {"--rounds=4", "--batch-pages=8", "--page-bytes=256KiB",
            "--pool-size=64MiB", "--query-iterations=200", "--query-warmup=50", "--rpc-warmup=50"};

    private static MemorySegment[] pages(Arena arena) {
        MemorySegment[] pages = new MemorySegment[PAGES];
        for (int i = 0; i < PAGES; i++) {
            pages[i] = arena.allocate(PAGE_BYTES, 4096);
        }
        return pages;
    }

    private static void restore(MemorySegment[] destination, List<ByteString> chain) {
        for (int i = 0; i < destination.length; i++) {
            KeyedContent.fill(destination[i], chain.get(i));
        }
    }

    @Test
    void aCycleThatRestoredNothingFailsItsRoundEvenWhenMemcpyRewritesTheDestinationAfterIt() {
        List<ByteString> chain = SyntheticKv.chain(5, PAGES);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment[] destination = pages(arena);
            restore(destination, chain); // what a previous round left behind
            Runnable brokenCycle = () -> { };
            Runnable memcpy = () -> restore(destination, chain);
            for (int round : new int[] {0, 1}) { // cycle first, then memcpy first
                assertThatThrownBy(() -> DramBench.measuredRound(round, brokenCycle, memcpy, destination, chain))
                        .as("round %d", round).isInstanceOf(DramBench.RoundFailure.class)
                        .hasMessageContaining("after the publish→restore cycle, restored page 0 differs");
            }
        }
    }

    @Test
    void anOlderRoundsPagesAtTheSamePositionsFail() {
        List<ByteString> older = SyntheticKv.chain(5, PAGES);
        List<ByteString> current = SyntheticKv.chain(6, PAGES);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment[] destination = pages(arena);
            assertThatThrownBy(() -> DramBench.measuredRound(0, () -> restore(destination, older),
                    () -> restore(destination, current), destination, current))
                    .hasMessageContaining("after the publish→restore cycle, restored page 0 differs");
        }
    }

    @Test
    void aCycleThatRestoredOnePageWrongFails() {
        List<ByteString> chain = SyntheticKv.chain(5, PAGES);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment[] destination = pages(arena);
            Runnable cycle = () -> {
                restore(destination, chain);
                destination[2].set(ValueLayout.JAVA_BYTE, 4097, (byte) ~destination[2].get(ValueLayout.JAVA_BYTE, 4097));
            };
            assertThatThrownBy(() -> DramBench.measuredRound(0, cycle, () -> restore(destination, chain), destination, chain))
                    .hasMessageContaining("restored page 2 differs").hasMessageContaining("at byte 4096");
        }
    }

    @Test
    void theCycleAndMemcpyAlternateWhichGoesFirst() {
        List<ByteString> chain = SyntheticKv.chain(5, PAGES);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment[] destination = pages(arena);
            List<String> order = new ArrayList<>();
            for (int round = 0; round < 4; round++) {
                long[] nanos = DramBench.measuredRound(round, () -> {
                    order.add("cycle");
                    restore(destination, chain);
                }, () -> {
                    order.add("memcpy");
                    restore(destination, chain);
                }, destination, chain);
                assertThat(nanos[0]).isPositive();
                assertThat(nanos[1]).isPositive();
            }
            assertThat(order).containsExactly("cycle", "memcpy", "memcpy", "cycle", "cycle", "memcpy", "memcpy", "cycle");
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aSmallRealRunVerifiesEveryRoundAndReportsThePairedRatioFirst() {
        JsonObject report = Benchmarks.run("dram", SMALL_RUN);

        JsonObject config = report.getJsonObject("config");
        assertThat(BenchReport.passed(report)).as(report.encode()).isTrue();
        assertThat(config.getInteger("completed_rounds")).isEqualTo(4);
        assertThat(config.getInteger("cycle_first_rounds")).isEqualTo(2);
        assertThat(config.getInteger("memcpy_first_rounds")).isEqualTo(2);
        assertThat(config.getInteger("ping_first_iterations")).isEqualTo(100);
        assertThat(config.getInteger("query_first_iterations")).isEqualTo(100);
        assertThat(report.getJsonObject("figures").getLong("verified_pages")).isEqualTo(2L * 4 * 8);
        assertThat(report.getJsonObject("figures").getJsonObject("query_64_page_hit").getLong("count")).isEqualTo(200);
        assertThat(report.getJsonObject("baselines").getJsonObject("noop_grpc_ping").getLong("count")).isEqualTo(200);
        assertThat(report.getJsonObject("baselines").getJsonObject("colocated_noop_ping").getLong("count")).isEqualTo(200);
        JsonObject ratios = report.getJsonObject("ratios");
        assertThat(ratios.fieldNames().iterator().next()).isEqualTo("throughput_ratio");
        assertThat(report.getDouble("throughput_ratio")).isPositive()
                .isBetween(ratios.getDouble("throughput_ratio_lower_95"), ratios.getDouble("throughput_ratio_upper_95"));
        assertThat(report.getJsonObject("figures").getJsonObject("throughput_ratio_paired").getJsonArray("rounds"))
                .hasSize(4);
        // Where the cycle's time went: every phase of the timed rounds, the memcpy side's two copies, and the four
        // calls alone; each was timed, so none is zero.
        JsonObject phases = report.getJsonObject("figures").getJsonObject("cycle_phases_micros");
        assertThat(phases.fieldNames()).containsExactly("allocate", "copy_in", "seal", "query", "copy_out", "release");
        JsonObject alone = report.getJsonObject("figures").getJsonObject("control_calls_alone_micros");
        assertThat(alone.fieldNames()).containsExactly("allocate", "seal", "query", "release", "query_again",
                "release_again");
        JsonObject percentiles = report.getJsonObject("figures").getJsonObject("control_calls_alone_percentiles_micros");
        assertThat(percentiles.fieldNames()).containsExactlyElementsOf(alone.fieldNames());
        percentiles.forEach(e -> assertThat(((JsonObject) e.getValue()).getDouble("p50")).as(e.getKey()).isPositive()
                .isLessThanOrEqualTo(((JsonObject) e.getValue()).getDouble("p99")));
        assertThat(report.getJsonObject("figures").getJsonObject("control_calls_alone_cpu_micros_per_round")
                .getDouble("engine_thread")).isPositive();
        assertThat(report.getJsonObject("figures").getJsonObject("jvm_during_calls_alone").getLong("gc_count"))
                .isNotNegative();
        assertThat(report.getJsonObject("baselines").getJsonObject("memcpy_phases_micros").fieldNames())
                .containsExactly("copy_in", "copy_out");
        for (JsonObject micros : List.of(phases, alone)) {
            micros.forEach(e -> assertThat(((Number) e.getValue()).longValue()).as(e.getKey()).isPositive());
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void theCycleProfileWritesTheJfrRecordingOfTheTimedRounds(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir) {
        String[] args = java.util.Arrays.copyOf(SMALL_RUN, SMALL_RUN.length + 1);
        args[SMALL_RUN.length] = "--profile-cycle=" + dir;
        JsonObject report = Benchmarks.run("dram", args);

        assertThat(BenchReport.passed(report)).as(report.encode()).isTrue();
        assertThat(report.getJsonObject("config").getJsonArray("profile_files").getList())
                .contains(dir.resolve("dram-cycle.jfr").toString());
        assertThat(dir.resolve("dram-cycle.jfr")).isNotEmptyFile();
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void theCallsAloneCanFollowACopyAndReportTheLoopsCpuPerCall() {
        String[] args = java.util.Arrays.copyOf(SMALL_RUN, SMALL_RUN.length + 2);
        args[SMALL_RUN.length] = "--calls-alone-copy-bytes=1MiB";
        args[SMALL_RUN.length + 1] = "--calls-alone-rounds=3";
        JsonObject report = Benchmarks.run("dram", args);

        assertThat(BenchReport.passed(report)).as(report.encode()).isTrue();
        assertThat(report.getJsonObject("config").getLong("calls_alone_copy_bytes")).isEqualTo(1L << 20);
        assertThat(report.getJsonObject("config").getInteger("calls_alone_rounds")).isEqualTo(3);
        // Every call alone ran on the Manager's loop (the query and the allocate do per-page work there), and every
        // timed round's calls too.
        JsonObject loopCpu = report.getJsonObject("figures").getJsonObject("control_calls_alone_loop_cpu_micros");
        assertThat(loopCpu.fieldNames()).containsExactly("allocate", "seal", "query", "release", "query_again",
                "release_again");
        assertThat(loopCpu.getLong("query")).isPositive();
        assertThat(loopCpu.getLong("allocate")).isPositive();
        JsonObject roundsCpu = report.getJsonObject("figures").getJsonObject("cycle_calls_loop_cpu_per_round_micros");
        assertThat(roundsCpu.getJsonArray("query")).hasSize(4);
        assertThat(report.getJsonObject("figures").getJsonObject("control_calls_alone_percentiles_micros")
                .getJsonObject("query").getLong("p50")).isPositive();
    }

    @Test
    void aNegativeCopyBeforeTheCallsAloneIsRefused() {
        String[] args = java.util.Arrays.copyOf(SMALL_RUN, SMALL_RUN.length + 1);
        args[SMALL_RUN.length] = "--calls-alone-copy-bytes=-1";
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> DramBench.run(BenchArgs.parse(args), DramBench.Fault.NONE))
                .isInstanceOf(IllegalArgumentException.class);
    }

    private static JsonObject brokenRun(DramBench.Fault fault) {
        return DramBench.run(BenchArgs.parse(SMALL_RUN), fault);
    }

    private static void assertFailed(JsonObject report, String reason) {
        assertThat(BenchReport.passed(report)).as(report.encode()).isFalse();
        assertThat(report.getJsonArray(BenchReport.FAILURES).getList()).as(report.encode())
                .anySatisfy(f -> assertThat((String) f).contains(reason))
                .noneSatisfy(f -> assertThat((String) f).contains("leases leaked"));
        assertThat(report.getJsonObject("config").getInteger("completed_rounds")).isEqualTo(1);
        assertThat(report.containsKey("throughput_ratio")).isFalse();
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aByteFlippedInAPublishedPageFailsTheRun() {
        JsonObject report = brokenRun(new DramBench.Fault() {
            @Override
            public void sealed(int round, EngineSession session, AllocatePublishReply allocated) {
                if (round == 1) {
                    MemorySegment page = session.slot(allocated.getSlots(3).getSlot());
                    page.set(ValueLayout.JAVA_BYTE, 100, (byte) ~page.get(ValueLayout.JAVA_BYTE, 100));
                }
            }
        });
        assertFailed(report, "round 2: after the publish→restore cycle, restored page 3 differs from the bytes "
                + "published under its key at byte 96");
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aManagerAnsweringAlreadyPresentForAFreshKeyFailsTheRoundInsteadOfSkippingTheSlot() {
        JsonObject report = brokenRun(new DramBench.Fault() {
            @Override
            public AllocatePublishReply allocated(int round, AllocatePublishReply reply) {
                if (round != 1) {
                    return reply;
                }
                return reply.toBuilder().setSlots(2, reply.getSlots(2).toBuilder().setStatus(SlotStatus.ALREADY_PRESENT))
                        .build();
            }
        });
        assertFailed(report, "round 2: slot 2 of a fresh chain answered ALREADY_PRESENT, not ALLOCATED");
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aLeaseOfAnOlderRoundsSlotFailsTheRun() {
        JsonObject report = brokenRun(new DramBench.Fault() {
            private Lease previous;

            @Override
            public QueryReply ready(int round, QueryReply reply) {
                Lease current = reply.getLease();
                if (round == 0) {
                    previous = current;
                    return reply;
                }
                // the older round's image at the same position is still resident (the pool is far from full)
                Lease stale = current.toBuilder().setPages(5, current.getPages(5).toBuilder()
                        .setSlot(previous.getPages(5).getSlot())).build();
                return reply.toBuilder().setLease(stale).build();
            }
        });
        assertFailed(report, "round 2: after the publish→restore cycle, restored page 5 differs");
    }
}
