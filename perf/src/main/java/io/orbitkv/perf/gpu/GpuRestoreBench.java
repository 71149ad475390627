package io.orbitkv.perf.gpu;

import io.orbitkv.nativeio.cuda.CudaRuntime;
import io.orbitkv.perf.BenchArgs;
import io.orbitkv.perf.engine.InProcessManager;
import io.orbitkv.perf.report.BenchReport;
import io.orbitkv.perf.report.MachineInfo;
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
 * publishes {@code --pages} pages of {@code --page-bytes}, and per round measures the Manager-executed restore (submit
 * to READY, the bytes then verified on the device) and, as the same-run baseline, {@code cudaMemcpyAsync} of the same
 * leased bytes from its own pinned mapping of the same pool into the same device buffer.
 *
 * <p>Reported: restore and baseline throughput (median over rounds, GB/s) and their ratio ({@code restore_ratio},
 * restore over baseline; the restore includes the RPCs and polling, the baseline only the copies). Fails (exit 1)
 * without a GPU, naming the probe's cause, and on any byte mismatch or refused round.
 */
public final class GpuRestoreBench {
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
            if (result.containsKey("error")) {
                return report.failure(result.getString("error")).build().toJson();
            }
            double bytes = result.getLong("bytes");
            double restore = bytes / median(result.getJsonArray("restore_nanos"));
            double baseline = bytes / median(result.getJsonArray("baseline_nanos"));
            // The engine's own alternative: lease the pages (a demand without restore), then cudaMemcpyAsync them.
            JsonArray leaseThenCopy = new JsonArray();
            for (int i = 0; i < result.getJsonArray("lease_nanos").size(); i++) {
                leaseThenCopy.add(result.getJsonArray("lease_nanos").getLong(i) + result.getJsonArray("baseline_nanos").getLong(i));
            }
            double leaseThenCopyRate = bytes / median(leaseThenCopy);
            report.figure("restore_gb_per_s", restore).figure("restore_nanos", result.getJsonArray("restore_nanos"))
                    .figure("verified_pages", result.getLong("verified_pages"))
                    .baseline("cuda_memcpy_async_gb_per_s", baseline)
                    .baseline("cuda_memcpy_async_nanos", result.getJsonArray("baseline_nanos"))
                    .topLevelRatio("restore_ratio", restore, baseline)
                    .figure("lease_demand_nanos", result.getJsonArray("lease_nanos"))
                    .baseline("lease_then_copy_gb_per_s", leaseThenCopyRate)
                    .topLevelRatio("restore_vs_lease_then_copy_ratio", restore, leaseThenCopyRate)
                    .check(result.getLong("mismatches") == 0, result.getLong("mismatches") + " restored pages differ from"
                            + " the published bytes")
                    .check(engine.exitValue() == 0, "engine process exited " + engine.exitValue())
                    .check(manager.manager().registry().find("orbitkv.leases.active").gauge().value() == 0,
                            "leases left after the run");
            return report.build().toJson();
        } catch (IllegalArgumentException | BenchArgs.HelpRequested e) {
            throw e;
        } catch (Exception e) {
            return report.failure("gpu-restore bench failed: " + e).build().toJson();
        }
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
