package io.orbitkv.perf.cost;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.sim.SyntheticKv;
import io.orbitkv.manager.Manager;
import io.orbitkv.manager.ManagerConfig;
import io.orbitkv.perf.BenchArgs;
import io.orbitkv.perf.report.BenchReport;
import io.orbitkv.perf.report.LatencyRecorder;
import io.orbitkv.perf.report.LatencySummary;
import io.orbitkv.protocol.engine.*;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * {@code orbitkv bench cost-overhead}: the price of cost observation. One Manager runs the same workload in
 * alternating rounds with observation switched off and on at run time (off, on, on, off, ...): each request
 * publishes one new page (the engine's prefill), then queries its prefix, copies the leased pages out and releases.
 * Observed paths: every READY answer reports a complete HOST_READY route, and every Manager-side pool or SSD operation
 * of the request reports its operation sample.
 *
 * <p>Reported: the regressions {@code throughput_regression = 1 - median_r(on_r/off_r)} and {@code p50_regression =
 * median_r(p50on_r/p50off_r) - 1} over rounds r, each round's two sides run back to back (fractions; negative =
 * faster with observation, i.e. noise), plus the unpaired medians. The baseline is the same workload with observation
 * off, in the same run.
 */
public final class CostOverheadBench {
    private CostOverheadBench() {}

    private record Side(String name, Manager manager, OrbitKvClient client, EngineSession session, LatencyRecorder latency,
                        double[] throughput, double[] roundP50) {}

    public static JsonObject run(BenchArgs a) {
        int rounds = a.integer("rounds", 160);
        int requestsPerRound = a.integer("requests", 100);
        int prefixBlocks = a.integer("prefix-blocks", 16);
        long pageBytes = a.bytes("page-bytes", "64KiB");
        a.requireAllUsed();
        try {
            return measure(rounds, requestsPerRound, prefixBlocks, pageBytes);
        } catch (Exception e) {
            throw new IllegalStateException("cost-overhead bench failed: " + e.getMessage(), e);
        }
    }

    private static Side open(String name, boolean observe, long pageBytes, int rounds, List<Path> dirs) throws Exception {
        Path dataDir = Files.createTempDirectory("orbitkv-bench-cost-" + name + "-");
        dirs.add(dataDir);
        Map<String, String> settings = new HashMap<>();
        settings.put("data-dir", dataDir.toString());
        settings.put("pool.size", "256MiB");
        settings.put("grpc.tcp-port", "0");
        settings.put("metrics.port", "0");
        settings.put("cost.observations", String.valueOf(observe));
        // The SSD tier is on: every publish is offered to SSD (pool copy + SSD write observed), and queries of
        // prefixes evicted from DRAM read back from SSD (SSD read observed).
        settings.put("ssd.capacity", "512MiB");
        settings.put("ssd.extent", "64KiB");
        Manager manager = Manager.start(ManagerConfig.from(settings)).await(120, TimeUnit.SECONDS);
        OrbitKvClient client = OrbitKvClient.connectUnix(manager.unixSocket(), manager.token());
        InstanceIdentity identity = InstanceIdentity.newBuilder().setModelFingerprint("bench/cost")
                .setRepresentation(Representation.RAW).setLayout("bench").setGeometry("bench").setPageSizeTokens(16)
                .setTpSize(1).setPpSize(1)
                .addGroups(GroupSpec.newBuilder().setGroupId(0).setKind(GroupKind.FULL_ATTENTION).setBytesPerPage(pageBytes))
                .build();
        EngineSession session = client.register(identity, InstanceRole.PREFILL_AND_DECODE).await();
        return new Side(name, manager, client, session, LatencyRecorder.singleWriter(), new double[rounds], new double[rounds]);
    }

    private static JsonObject measure(int rounds, int requestsPerRound, int prefixBlocks, long pageBytes) throws Exception {
        List<Path> dirs = new ArrayList<>();
        // One Manager, observation switched between rounds: the two sides differ in nothing else.
        Side off = open("off", false, pageBytes, rounds, dirs);
        Side on = new Side("on", off.manager(), off.client(), off.session(), LatencyRecorder.singleWriter(),
                new double[rounds], new double[rounds]);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment engine = arena.allocate(pageBytes, 4096);
            SyntheticKv.fill(engine, 3, 0, 0);
            List<ByteString> prefix = SyntheticKv.chain(77, prefixBlocks);
            publish(off.session(), prefix, engine);
            for (Side side : List.of(off, on)) {
                off.manager().cost().setObservationsEnabled(side == on);
                round(side, prefix, engine, 300, side == on ? 500 : 0, -1); // warm-up, not recorded
            }
            long[] seed = {1_000_000};
            for (int r = 0; r < rounds; r++) {
                Side first = r % 2 == 0 ? off : on;
                Side second = first == off ? on : off;
                for (Side side : List.of(first, second)) {
                    off.manager().cost().setObservationsEnabled(side == on);
                    side.throughput()[r] = round(side, prefix, engine, requestsPerRound, seed[0], r);
                    seed[0] += requestsPerRound;
                }
                System.err.printf("cost-overhead round %d/%d: off %.0f req/s, on %.0f req/s%n", r + 1, rounds,
                        off.throughput()[r], on.throughput()[r]);
            }
            double offTput = median(off.throughput());
            double onTput = median(on.throughput());
            // Paired by round (the two sides ran back to back): drift and noise common to a round cancel out.
            double[] tputRatios = new double[rounds];
            double[] p50Ratios = new double[rounds];
            for (int r = 0; r < rounds; r++) {
                tputRatios[r] = on.throughput()[r] / off.throughput()[r];
                p50Ratios[r] = on.roundP50()[r] / off.roundP50()[r];
            }
            LatencySummary offLat = off.latency().summary();
            LatencySummary onLat = on.latency().summary();
            off.manager().cost().setObservationsEnabled(false);
            String observed = on.manager().registry().scrape();
            long samples = observed.lines().filter(l -> l.startsWith("orbitkv_cost_operations_total{") && l.contains("succeeded"))
                    .mapToLong(l -> (long) Double.parseDouble(l.substring(l.lastIndexOf(' ') + 1))).sum();
            if (samples == 0) {
                throw new IllegalStateException("the observing Manager recorded no cost samples: nothing was measured");
            }
            return BenchReport.builder("cost-overhead")
                    .figure("observations_on_requests_per_second_median", onTput)
                    .figure("observations_on_latency", onLat.toJson())
                    .figure("observations_on_rounds_requests_per_second", new JsonArray(Arrays.stream(on.throughput()).boxed().toList()))
                    .figure("observed_successful_samples", samples)
                    .baseline("observations_off_requests_per_second_median", offTput)
                    .baseline("observations_off_latency", offLat.toJson())
                    .baseline("observations_off_rounds_requests_per_second", new JsonArray(Arrays.stream(off.throughput()).boxed().toList()))
                    .topLevelRatio("throughput_regression", 1.0 - median(tputRatios))
                    .topLevelRatio("p50_regression", median(p50Ratios) - 1.0)
                    .ratio("throughput_regression_of_medians", 1.0 - onTput / offTput)
                    .ratio("p50_regression_all_samples", (double) onLat.p50Nanos() / offLat.p50Nanos() - 1.0)
                    .config("rounds", rounds).config("requests_per_round", requestsPerRound)
                    .config("prefix_blocks", prefixBlocks).config("page_bytes", pageBytes)
                    .config("workload", "publish one new page, query prefix+page, copy out, release; alternating off/on rounds")
                    .build().toJson();
        } finally {
            off.session().close();
            off.client().close();
            off.manager().close();
            for (Path dir : dirs) {
                try (var paths = Files.walk(dir)) {
                    paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
                }
            }
        }
    }

    /** One round of requests on one side; returns requests per second. */
    private static double round(Side side, List<ByteString> prefix, MemorySegment engine, int requests, long seed, int roundIndex) {
        long[] latencies = new long[requests];
        long start = System.nanoTime();
        for (int i = 0; i < requests; i++) {
            long t0 = System.nanoTime();
            ByteString tail = SyntheticKv.chain(seed + i, 1).get(0);
            List<ByteString> chain = new ArrayList<>(prefix);
            chain.add(tail);
            publish(side.session(), List.of(tail), engine);
            QueryReply reply = side.session().submit(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(chain).build()), 0).await();
            if (reply.getStatus() != QueryStatus.READY) {
                throw new IllegalStateException("expected READY, got " + reply.getStatus());
            }
            for (LeasedPage page : reply.getLease().getPagesList()) {
                engine.copyFrom(side.session().slot(page.getSlot()));
            }
            side.session().release(reply.getLease().getLeaseId()).await();
            latencies[i] = System.nanoTime() - t0;
            if (roundIndex >= 0) {
                side.latency().recordNanos(latencies[i]);
            }
        }
        double perSecond = requests * 1e9 / (System.nanoTime() - start);
        if (roundIndex >= 0) {
            Arrays.sort(latencies);
            side.roundP50()[roundIndex] = latencies[requests / 2];
        }
        return perSecond;
    }

    private static void publish(EngineSession session, List<ByteString> hashes, MemorySegment source) {
        AllocatePublishReply allocated = session.allocate(hashes.stream()
                .map(h -> PageKey.newBuilder().setGroupId(0).setBlockHash(h).build()).toList()).await();
        boolean any = false;
        for (PublishSlot slot : allocated.getSlotsList()) {
            if (slot.getStatus() == SlotStatus.ALLOCATED) {
                session.slot(slot.getSlot()).copyFrom(source);
                any = true;
            }
        }
        if (any) {
            session.seal(allocated.getPublishId(), List.of()).await();
        }
    }

    static double median(double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        int n = sorted.length;
        return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    }
}
