package io.orbitkv.perf.gpu;

import io.orbitkv.nativeio.cuda.CudaRuntime;
import io.orbitkv.perf.BenchArgs;
import io.orbitkv.perf.engine.InProcessManager;
import io.orbitkv.perf.report.BenchReport;
import io.orbitkv.perf.report.Bootstrap;
import io.orbitkv.perf.report.MachineInfo;
import io.orbitkv.restore.RestoreCommands;
import io.orbitkv.restore.RestoreProxy;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * {@code orbitkv bench gpu-restore}: the CUDA restore route. This JVM runs the Manager (its restore role pins the pool
 * with {@code cudaHostRegister} and imports engine allocations through CUDA IPC); a second process
 * ({@link GpuEngineProcess}) is the engine: it exports a device allocation, registers it as a restore destination,
 * publishes {@code --pages} pages of {@code --page-bytes} (bytes derived from their keys), and runs the rounds of
 * {@link RestoreRounds}: per round the Manager-executed restore (submit to READY) and, as the same-run baseline,
 * {@code cudaMemcpyAsync} of the same leased bytes from the engine's own pinned mapping of the same pool into the same
 * device buffer, in alternating order, each on a destination poisoned before it and compared after it.
 *
 * <p>Reported first: {@code restore_ratio}, the median of the per-round paired ratios (restore over baseline
 * throughput; the restore includes the RPCs and polling, the baseline only the copies) with a bootstrap interval;
 * then the medians of each side. Fails (exit 1) without a GPU, naming the probe's cause, and on any mismatch on either
 * side, a poison that did not take, a page left unverified, or a refused round.
 */
public final class GpuRestoreBench {
    private static final int BOOTSTRAP_RESAMPLES = 10_000;
    private static final long BOOTSTRAP_SEED = 42;

    private GpuRestoreBench() {}

    public static JsonObject run(BenchArgs args) {
        int pages = args.integer("pages", 128);
        long pageBytes = args.bytes("page-bytes", "2MiB");
        int rounds = args.integer("rounds", 5);
        int device = args.integer("device", 0);
        long poolBytes = args.bytes("pool-bytes", "1GiB");
        args.requireAllUsed();
        if (pages <= 0 || rounds <= 0 || pageBytes <= 0 || (long) pages * pageBytes > poolBytes * 3 / 8) {
            throw new IllegalArgumentException("need pages, rounds, page-bytes > 0 and pages * page-bytes at most 3/8 of"
                    + " the pool (restore and baseline demands hold the pages at once under the 0.75 query budget)");
        }
        BenchReport.Builder report = BenchReport.builder("gpu-restore").machine(MachineInfo.probe())
                .config("pages", pages).config("page_bytes", pageBytes).config("rounds", rounds).config("device", device)
                .config("pool_bytes", poolBytes).config("cuda_runtime", String.valueOf(CudaRuntime.libraryName()))
                .config("cuda_driver_version", CudaRuntime.driverVersion());
        if (!CudaRuntime.isAvailable()) {
            return report.failure("CUDA unavailable: " + CudaRuntime.unavailabilityCause().getMessage()).build().toJson();
        }
        try (InProcessManager manager = InProcessManager.start("orbitkv-gpu-bench-", poolBytes, pageBytes, Map.of())) {
            List<String> command = new ArrayList<>();
            command.add(ProcessHandle.current().info().command().orElse("java"));
            command.add("--enable-native-access=ALL-UNNAMED");
            command.add("--sun-misc-unsafe-memory-access=allow");
            command.add("-cp");
            command.add(System.getProperty("java.class.path"));
            command.add(GpuEngineProcess.class.getName());
            command.addAll(List.of(manager.unixSocket().toString(), manager.token(), Integer.toString(pages),
                    Long.toString(pageBytes), Integer.toString(rounds), Integer.toString(device)));
            System.err.println("gpu-restore: engine process " + GpuEngineProcess.class.getSimpleName() + ", " + pages
                    + " pages of " + pageBytes + " bytes, " + rounds + " rounds");
            Process engine = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
            String last = null;
            try (BufferedReader out = new BufferedReader(new InputStreamReader(engine.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line = out.readLine(); line != null; line = out.readLine()) {
                    last = line;
                }
            }
            if (!engine.waitFor(600, TimeUnit.SECONDS)) {
                engine.destroyForcibly();
                return report.failure("engine process did not finish").build().toJson();
            }
            JsonObject result = last == null ? new JsonObject().put("error", "engine process printed nothing")
                    : new JsonObject(last);
            RestoreCommands.RestoreStats stats = new RestoreProxy(manager.manager().vertx()).stats()
                    .await(10, TimeUnit.SECONDS);
            RestoreCommands.LaneStats lane = stats.lane("cuda:" + device);
            if (lane != null) {
                JsonArray restoreNanos = result.getJsonArray("restore_nanos", new JsonArray());
                report.figure("breakdown", breakdown(lane.timings(), stats.poolRegistrationNanos(),
                        restoreNanos.isEmpty() ? -1 : median(restoreNanos)));
            }
            return reduce(result, pages, rounds, report)
                    .check(engine.exitValue() == 0, "engine process exited " + engine.exitValue())
                    .check(manager.manager().registry().find("orbitkv.leases.active").gauge().value() == 0,
                            "leases left after the run")
                    .build().toJson();
        } catch (IllegalArgumentException | BenchArgs.HelpRequested e) {
            throw e;
        } catch (Exception e) {
            return report.failure("gpu-restore bench failed: " + e).build().toJson();
        }
    }

    /**
     * The engine process's result ({@link RestoreRounds.Result#toJson()} plus {@code lease_nanos} and {@code bytes})
     * into the report: figures only when every round ran; a failure for an error, a mismatch on either side, a poison
     * that did not take, or fewer verified pages than {@code 2 × rounds × pages}.
     */
    static BenchReport.Builder reduce(JsonObject result, int pages, int rounds, BenchReport.Builder report) {
        if (result.containsKey("error")) {
            report.failure(result.getString("error"));
        }
        long restoreMismatches = result.getLong("restore_mismatches", 0L);
        long baselineMismatches = result.getLong("baseline_mismatches", 0L);
        long poisonFailures = result.getLong("poison_failures", 0L);
        long verified = result.getLong("verified_pages", 0L);
        long expectedVerified = 2L * rounds * pages;
        JsonArray details = result.getJsonArray("mismatch_details", new JsonArray());
        report.check(restoreMismatches == 0, restoreMismatches + " restored pages (over all rounds) differ from the "
                        + "bytes published under their keys" + (details.isEmpty() ? "" : ": " + details.getString(0)))
                .check(baselineMismatches == 0, baselineMismatches + " baseline pages (over all rounds) differ from the "
                        + "bytes published under their keys")
                .check(poisonFailures == 0, poisonFailures + " pages still held their expected bytes after the poison")
                .check(verified == expectedVerified, "verified " + verified + " pages, expected " + expectedVerified
                        + " (every page, both sides, every round, each after a poison)");
        JsonArray restoreNanos = result.getJsonArray("restore_nanos", new JsonArray());
        JsonArray baselineNanos = result.getJsonArray("baseline_nanos", new JsonArray());
        JsonArray leaseNanos = result.getJsonArray("lease_nanos", new JsonArray());
        report.figure("verified_pages", verified)
                .config("restore_first_rounds", result.getInteger("restore_first_rounds", 0))
                .config("verification", "every byte of every page, both sides, every round, read back from the device "
                        + "after a poison that was read back first, compared with bytes derived from the page's key");
        if (result.containsKey("error") || restoreNanos.size() != rounds || baselineNanos.size() != rounds
                || leaseNanos.size() != rounds) {
            return report;
        }
        double bytes = result.getLong("bytes");
        double[] paired = new double[rounds];
        double[] pairedWithLease = new double[rounds];
        for (int r = 0; r < rounds; r++) {
            paired[r] = (double) baselineNanos.getLong(r) / restoreNanos.getLong(r);
            pairedWithLease[r] = (double) (leaseNanos.getLong(r) + baselineNanos.getLong(r)) / restoreNanos.getLong(r);
        }
        Bootstrap.Interval ratio = Bootstrap.medianInterval(paired, 0.95, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED);
        Bootstrap.Interval withLease = Bootstrap.medianInterval(pairedWithLease, 0.95, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED);
        double restore = bytes / median(restoreNanos);
        double baseline = bytes / median(baselineNanos);
        JsonArray leaseThenCopy = new JsonArray();
        for (int i = 0; i < rounds; i++) {
            leaseThenCopy.add(leaseNanos.getLong(i) + baselineNanos.getLong(i));
        }
        return report.topLevelRatio("restore_ratio", ratio.estimate())
                .ratio("restore_ratio_lower_95", ratio.lower()).ratio("restore_ratio_upper_95", ratio.upper())
                .figure("restore_ratio_paired", ratio.toJson().put("rounds", new JsonArray(Arrays.stream(paired).boxed().toList())))
                .figure("restore_gb_per_s", restore).figure("restore_nanos", restoreNanos)
                .baseline("cuda_memcpy_async_gb_per_s", baseline)
                .baseline("cuda_memcpy_async_nanos", baselineNanos)
                .figure("lease_demand_nanos", leaseNanos)
                .baseline("lease_then_copy_gb_per_s", bytes / median(leaseThenCopy))
                .topLevelRatio("restore_vs_lease_then_copy_ratio", withLease.estimate())
                .ratio("restore_vs_lease_then_copy_ratio_lower_95", withLease.lower())
                .ratio("restore_vs_lease_then_copy_ratio_upper_95", withLease.upper())
                .ratio("restore_ratio_of_medians", restore, baseline);
    }

    /**
     * Where a Manager-executed restore's time went, from the restore role's lane timings over the run's restores: per
     * demand (the execution from the role's execute to terminal, the time to its first copy, and what the demand
     * spent outside the execution: admission, planning, the lease, the RPCs and polling, as the median demand minus
     * the mean execution), per page (queueing its {@code cudaMemcpyAsync}), per batch on the worker's stream (the
     * handoff from the role to the worker, the wait for the stream's event), and the one-off costs (pinning the pool
     * at start, importing the destination). Milliseconds and microseconds; -1 where nothing was counted.
     */
    static JsonObject breakdown(RestoreCommands.LaneTimings t, long poolRegistrationNanos, double medianDemandNanos) {
        double executionMs = per(t.executionNanos(), t.restores(), 1e6);
        JsonObject perDemand = new JsonObject().put("restores", t.restores())
                .put("execution_ms", executionMs)
                .put("to_first_copy_ms", per(t.firstCopyNanos(), t.restores(), 1e6))
                .put("batches", per(t.batches(), t.restores(), 1))
                .put("outside_execution_ms", medianDemandNanos < 0 || t.restores() == 0 ? -1
                        : (medianDemandNanos - per(t.executionNanos(), t.restores(), 1)) / 1e6);
        JsonObject perPage = new JsonObject().put("copies", t.copies())
                .put("submit_us", per(t.submitNanos(), t.copies(), 1e3));
        JsonObject perBatch = new JsonObject().put("batches", t.batches())
                .put("handoff_us", per(t.handoffNanos(), t.batches(), 1e3))
                .put("submit_ms", per(t.submitNanos(), t.batches(), 1e6))
                .put("stream_wait_ms", per(t.waitNanos(), t.batches(), 1e6));
        JsonObject once = new JsonObject()
                .put("pool_registration_ms", poolRegistrationNanos < 0 ? -1 : poolRegistrationNanos / 1e6)
                .put("ipc_imports", t.ipcImports())
                .put("ipc_import_ms", per(t.ipcImportNanos(), t.ipcImports(), 1e6));
        return new JsonObject().put("per_demand", perDemand).put("per_page", perPage).put("per_batch", perBatch)
                .put("once", once);
    }

    /** {@code total / count / unit}, or -1 when nothing was counted. */
    private static double per(long total, long count, double unit) {
        return count == 0 ? -1 : (double) total / count / unit;
    }

    /** Median of nanosecond samples, in nanoseconds (GB/s = bytes / ns). */
    static double median(JsonArray nanos) {
        long[] values = new long[nanos.size()];
        for (int i = 0; i < values.length; i++) {
            values[i] = nanos.getLong(i);
        }
        Arrays.sort(values);
        int n = values.length;
        return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2.0;
    }
}
