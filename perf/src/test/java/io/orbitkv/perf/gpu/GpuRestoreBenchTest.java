package io.orbitkv.perf.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import com.google.protobuf.ByteString;
import io.orbitkv.client.sim.SyntheticKv;
import io.orbitkv.nativeio.cuda.CudaRuntime;
import io.orbitkv.perf.Benchmarks;
import io.orbitkv.perf.report.BenchReport;
import io.orbitkv.perf.report.KeyedContent;
import io.orbitkv.perf.report.MachineInfo;
import io.orbitkv.restore.RestoreCommands;
import io.vertx.core.json.JsonObject;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@code bench gpu-restore} without a GPU: the unavailable path reports its cause and measures nothing, and the round
 * protocol ({@link RestoreRounds}) with the report it feeds is run against a destination in host memory with copiers
 * that restore correctly, restore nothing after the first round, or poison nothing. The CUDA copies themselves cannot
 * run on this machine (no driver); {@code perf/gpu/qualify.sh} runs the real bench, which uses the same protocol.
 */
class GpuRestoreBenchTest {
    private static final int PAGES = 4;
    private static final long PAGE_BYTES = 16 << 10;
    private static final int ROUNDS = 4;

    @Test
    void withoutAGpuTheReportFailsWithTheCauseAndNoFigures() {
        assumeFalse(CudaRuntime.isAvailable(), "a GPU is present: perf/gpu/qualify.sh runs the real bench");
        JsonObject report = Benchmarks.run("gpu-restore", new String[] {"--pages", "4", "--rounds", "1"});
        assertThat(BenchReport.passed(report)).isFalse();
        assertThat(report.getJsonArray(BenchReport.FAILURES).getString(0))
                .startsWith("CUDA unavailable: ").contains(CudaRuntime.unavailabilityCause().getMessage());
        assertThat(report.getJsonObject("figures").isEmpty()).isTrue();
        assertThat(report.getJsonObject("config").getInteger("pages")).isEqualTo(4);
    }

    /** Device memory stand-in: a host segment; poison may be switched off to model a poison that does not take. */
    private static final class HostDestination implements RestoreRounds.Destination {
        final MemorySegment memory;
        final boolean poisons;

        HostDestination(Arena arena, boolean poisons) {
            this.memory = arena.allocate(PAGES * PAGE_BYTES, 4096);
            this.poisons = poisons;
        }

        @Override
        public void poison() {
            if (poisons) {
                memory.fill(RestoreRounds.POISON);
            }
        }

        @Override
        public void readBack(MemorySegment host) {
            host.copyFrom(memory);
        }

        void writeCorrectly(List<ByteString> chain) {
            for (int p = 0; p < PAGES; p++) {
                KeyedContent.fill(memory.asSlice(p * PAGE_BYTES, PAGE_BYTES), chain.get(p));
            }
        }
    }

    private static JsonObject report(RestoreRounds.Result result) {
        JsonObject json = result.toJson().put("bytes", PAGES * PAGE_BYTES)
                .put("lease_nanos", new io.vertx.core.json.JsonArray(result.baselineNanos().stream().map(n -> 1000L).toList()));
        return GpuRestoreBench.reduce(json, PAGES, ROUNDS, BenchReport.builder("gpu-restore")
                .machine(MachineInfo.probe())).build().toJson();
    }

    @Test
    void aCorrectRunVerifiesEveryPageOfBothSidesInEveryRoundAlternatingOrderAndReportsThePairedRatioFirst() {
        List<ByteString> chain = SyntheticKv.chain(3, PAGES);
        List<String> order = new ArrayList<>();
        try (Arena arena = Arena.ofConfined()) {
            HostDestination device = new HostDestination(arena, true);
            RestoreRounds.Result result = RestoreRounds.run(ROUNDS, chain, PAGE_BYTES, device,
                    arena.allocate(PAGES * PAGE_BYTES, 4096), round -> {
                        order.add("restore");
                        device.writeCorrectly(chain);
                        return 2000;
                    }, round -> {
                        order.add("baseline");
                        device.writeCorrectly(chain);
                        return 1000;
                    });
            assertThat(order).containsExactly("restore", "baseline", "baseline", "restore", "restore", "baseline",
                    "baseline", "restore");
            assertThat(result.verifiedPages()).isEqualTo(2L * ROUNDS * PAGES);
            JsonObject report = report(result);
            assertThat(BenchReport.passed(report)).as(report.encode()).isTrue();
            assertThat(report.getJsonObject("ratios").fieldNames().iterator().next()).isEqualTo("restore_ratio");
            assertThat(report.getDouble("restore_ratio")).isEqualTo(0.5);
            assertThat(report.getJsonObject("figures").getLong("verified_pages")).isEqualTo(2L * ROUNDS * PAGES);
            assertThat(report.getJsonObject("config").getInteger("restore_first_rounds")).isEqualTo(ROUNDS / 2);
        }
    }

    @Test
    void aRestoreThatDoesNothingAfterTheFirstRoundFailsInEveryLaterRoundWhicheverSideRanBefore() {
        List<ByteString> chain = SyntheticKv.chain(3, PAGES);
        try (Arena arena = Arena.ofConfined()) {
            HostDestination device = new HostDestination(arena, true);
            RestoreRounds.Result result = RestoreRounds.run(ROUNDS, chain, PAGE_BYTES, device,
                    arena.allocate(PAGES * PAGE_BYTES, 4096), round -> {
                        if (round == 0) {
                            device.writeCorrectly(chain);
                        }
                        return 2000;
                    }, round -> {
                        device.writeCorrectly(chain); // the baseline always leaves the right bytes behind
                        return 1000;
                    });
            assertThat(result.restoreMismatches()).isEqualTo((long) (ROUNDS - 1) * PAGES);
            assertThat(result.baselineMismatches()).isZero();
            assertThat(result.details().getFirst()).isEqualTo("round 2, after the restore: page 0 differs from the "
                    + "bytes published under its key at byte 0");
            JsonObject report = report(result);
            assertThat(BenchReport.passed(report)).isFalse();
            assertThat(report.getJsonArray(BenchReport.FAILURES).getString(0))
                    .startsWith((ROUNDS - 1) * PAGES + " restored pages (over all rounds) differ");
        }
    }

    @Test
    void aBaselineThatCopiesTheWrongPagesIsReportedToo() {
        List<ByteString> chain = SyntheticKv.chain(3, PAGES);
        List<ByteString> stale = SyntheticKv.chain(4, PAGES);
        try (Arena arena = Arena.ofConfined()) {
            HostDestination device = new HostDestination(arena, true);
            RestoreRounds.Result result = RestoreRounds.run(ROUNDS, chain, PAGE_BYTES, device,
                    arena.allocate(PAGES * PAGE_BYTES, 4096), round -> {
                        device.writeCorrectly(chain);
                        return 2000;
                    }, round -> {
                        device.writeCorrectly(stale);
                        return 1000;
                    });
            assertThat(result.baselineMismatches()).isEqualTo((long) ROUNDS * PAGES);
            assertThat(BenchReport.passed(report(result))).isFalse();
        }
    }

    @Test
    void aPoisonThatDoesNotTakeCountsNothingAsVerifiedAndFailsTheRun() {
        List<ByteString> chain = SyntheticKv.chain(3, PAGES);
        try (Arena arena = Arena.ofConfined()) {
            HostDestination device = new HostDestination(arena, false);
            RestoreRounds.Result result = RestoreRounds.run(ROUNDS, chain, PAGE_BYTES, device,
                    arena.allocate(PAGES * PAGE_BYTES, 4096), round -> {
                        if (round == 0) {
                            device.writeCorrectly(chain);
                        }
                        return 2000;
                    }, round -> {
                        device.writeCorrectly(chain);
                        return 1000;
                    });
            // Only the first side of round 1 found poison-like (never written) memory; after that nothing could fail.
            assertThat(result.verifiedPages()).isEqualTo(PAGES);
            assertThat(result.restoreMismatches()).isZero(); // the skipped restores went unseen: hence the failure below
            assertThat(result.poisonFailures()).isEqualTo((2L * ROUNDS - 1) * PAGES);
            JsonObject report = report(result);
            assertThat(BenchReport.passed(report)).isFalse();
            assertThat(report.getJsonArray(BenchReport.FAILURES).getList())
                    .anySatisfy(f -> assertThat((String) f).contains("still held their expected bytes after the poison"))
                    .anySatisfy(f -> assertThat((String) f).startsWith("verified " + PAGES + " pages, expected "));
        }
    }

    @Test
    void aRefusedRoundEndsTheRoundsAndTheReportHasNoRatio() {
        List<ByteString> chain = SyntheticKv.chain(3, PAGES);
        try (Arena arena = Arena.ofConfined()) {
            HostDestination device = new HostDestination(arena, true);
            RestoreRounds.Result result = RestoreRounds.run(ROUNDS, chain, PAGE_BYTES, device,
                    arena.allocate(PAGES * PAGE_BYTES, 4096), round -> {
                        if (round == 2) {
                            throw new IllegalStateException("the restore answered MISS with 0 of 4 pages");
                        }
                        device.writeCorrectly(chain);
                        return 2000;
                    }, round -> {
                        device.writeCorrectly(chain);
                        return 1000;
                    });
            assertThat(result.error()).isEqualTo("round 3, restore: the restore answered MISS with 0 of 4 pages");
            JsonObject report = report(result);
            assertThat(BenchReport.passed(report)).isFalse();
            assertThat(report.getJsonArray(BenchReport.FAILURES).getString(0)).startsWith("round 3, restore:");
            assertThat(report.containsKey("restore_ratio")).isFalse();
        }
    }

    @Test
    void theBreakdownSaysWhereARestoresTimeWentPerDemandPagePerBatchAndOnce() {
        // 5 restores of 128 pages, one batch each: 8 ms execution, 0.2 ms to the first copy; 1.5 ms queueing 128
        // copies and 6 ms waiting per batch; the demands took 18 ms at the median, so 10 ms went outside the role.
        RestoreCommands.LaneTimings t = new RestoreCommands.LaneTimings(5, 5 * 8_000_000L, 5 * 200_000L, 5, 640,
                5 * 50_000L, 5 * 1_500_000L, 5 * 6_000_000L, 1, 3_000_000L);
        JsonObject b = GpuRestoreBench.breakdown(t, 250_000_000L, 18_000_000d);
        JsonObject demand = b.getJsonObject("per_demand");
        assertThat(demand.getDouble("execution_ms")).isEqualTo(8.0);
        assertThat(demand.getDouble("to_first_copy_ms")).isEqualTo(0.2);
        assertThat(demand.getDouble("batches")).isEqualTo(1.0);
        assertThat(demand.getDouble("outside_execution_ms")).isEqualTo(10.0);
        assertThat(b.getJsonObject("per_page").getDouble("submit_us")).isCloseTo(11.71875, org.assertj.core.data.Offset.offset(1e-9));
        JsonObject batch = b.getJsonObject("per_batch");
        assertThat(batch.getDouble("handoff_us")).isEqualTo(50.0);
        assertThat(batch.getDouble("submit_ms")).isEqualTo(1.5);
        assertThat(batch.getDouble("stream_wait_ms")).isEqualTo(6.0);
        assertThat(b.getJsonObject("once").getDouble("pool_registration_ms")).isEqualTo(250.0);
        assertThat(b.getJsonObject("once").getDouble("ipc_import_ms")).isEqualTo(3.0);
        // nothing counted: unknown (-1), never zero
        JsonObject none = GpuRestoreBench.breakdown(new RestoreCommands.LaneTimings(0, 0, 0, 0, 0, 0, 0, 0, 0, 0), -1, -1);
        assertThat(none.getJsonObject("per_demand").getDouble("execution_ms")).isEqualTo(-1.0);
        assertThat(none.getJsonObject("per_demand").getDouble("outside_execution_ms")).isEqualTo(-1.0);
        assertThat(none.getJsonObject("per_batch").getDouble("stream_wait_ms")).isEqualTo(-1.0);
        assertThat(none.getJsonObject("once").getDouble("pool_registration_ms")).isEqualTo(-1.0);
    }
}
