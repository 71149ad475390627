package io.orbitkv.perf.load;

import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.perf.BenchArgs;
import io.orbitkv.perf.engine.InProcessManager;
import io.orbitkv.perf.engine.SimulatedEngine;
import io.orbitkv.perf.engine.TierCounters;
import io.orbitkv.perf.report.BenchReport;
import io.orbitkv.perf.report.LatencySummary;
import io.orbitkv.perf.report.Plots;
import io.orbitkv.perf.trace.CacheBounds;
import io.orbitkv.protocol.engine.InstanceIdentity;
import io.orbitkv.protocol.engine.StatsReply;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * {@code orbitkv bench load}: simulated engines on the real gRPC API under natural DRAM pressure, partial-prefix
 * reuse and a cancellation mix, at several concurrencies, against a no-op RPC and memcpy measured in the same run.
 *
 * <h2>What one simulated request does</h2>
 * Query its chained prefix (submit, poll while PENDING) → copy the READY pages out of the pool into engine memory and
 * verify a sample of bytes → release the lease → "prefill": publish the pages the Manager did not have (allocate,
 * write, seal). A cancellation mix replaces some of these: {@code after-submit} cancels the ticket right after submit
 * (the engine stopped waiting; if the answer was READY the cancel ends the lease) and the engine then recomputes and
 * publishes the whole chain, its query counted as a miss; {@code after-ready} copies half of the READY pages, then
 * cancels instead of releasing (the request was aborted) and publishes nothing.
 *
 * <h2>Load model</h2>
 * Each concurrency level C runs C engines (threads, each with its own client connection and session) in two phases:
 * <ol>
 *   <li><b>closed loop</b> (no think time unless {@code --think-ms}): each engine issues its next request when the
 *       last is done. Its requests/s is the capacity at C, the throughput-vs-concurrency figure.
 *   <li><b>open loop</b>: Poisson arrivals at {@code --load-fraction} (default 0.5) of the closed-loop capacity (or
 *       {@code --rate}), split evenly over the C engines. Latency is measured from each request's scheduled arrival,
 *       so it includes the time a request waited behind its engine's previous one (the generator's queue): nothing is
 *       hidden by starting the clock when the request is served.
 * </ol>
 * Arrivals still queued 2 × the phase duration after its start are dropped and counted ({@code dropped_arrivals}).
 *
 * <h2>Baselines (same run, same channels)</h2>
 * A no-op gRPC call (Ping) round trip interleaved with the measured phase itself: each engine sends one Ping on its
 * own connection after every {@code --ping-every} requests (closed loop; its time counts in the phase) or, in the
 * open loop, after a request when its next arrival is not yet due, so the Ping sees the same load, connections and
 * moment as the queries it is compared with. memcpy bandwidth of the same page size with as many threads as the phase
 * had engines, over buffers larger than the CPU caches, measured right after each phase. And an offline bound on the
 * generated stream (infinite cache and LRU at the pool's capacity, {@link CacheBounds}, in dispatch order).
 *
 * <h2>Verdict</h2>
 * A copied page whose bytes differ from what was published, or a lease still active at the end, fails the run: the
 * report lists the reason under {@code failures}, says {@code "passed": false}, and the command exits 1.
 *
 * <h2>SSD mix ({@code --ssd-mix=F})</h2>
 * {@code F = 0} (default): the Manager runs DRAM-only. {@code F > 0}: the in-process Manager runs with its
 * SSD tier on ({@code ssd.enabled=true}, write policy {@code all}: every sealed page is written to SSD in the
 * background; {@code ssd.extent} = the page size; {@code ssd.capacity} = twice the prefix catalog's extents unless
 * {@code --ssd-capacity} says otherwise; unique tails are written too, so a long run can wrap the SSD ring), and each
 * request, with probability F, takes its prefix uniformly from the <em>cold tail</em> of the catalog instead of the
 * Zipf draw. The cold tail is every prefix past the most popular ones whose blocks alone fill the DRAM pool
 * ({@link PrefixWorkload#coldTailStart}): these are the prefixes the Zipf stream leaves to be evicted, so re-querying
 * them finds their pages on SSD (PENDING while they are read back into the pool, then READY) once they have been
 * published and evicted. F is the share of such cold-tail requests, not a measured share of SSD hits; the measured
 * hits by tier come from the Manager's tier counters ({@link TierCounters}), per phase.
 */
public final class LoadBench {
    static final String NAME = "load";

    private LoadBench() {}

    /** The knobs, with their defaults (see {@link #run}). */
    record Settings(int[] concurrencies, long poolBytes, long pageBytes, int prefixes, int prefixMinBlocks,
                    int prefixMaxBlocks, double zipfExponent, int uniqueMin, int uniqueMax, double cancelFraction,
                    double phaseSeconds, long phaseRequests, int warmupRequests, double loadFraction, double fixedRate,
                    String mode, double thinkMillis, int pingEvery, int fullVerifyEvery, double ssdMix, long seed,
                    Path out, boolean sharedClient, long ssdCapacity, double memcpySeconds) {
        boolean ssd() {
            return ssdMix > 0;
        }

        boolean closed() {
            return !mode.equals("open") || fixedRate <= 0;
        }

        boolean open() {
            return !mode.equals("closed");
        }
    }

    public static JsonObject run(BenchArgs a) {
        Settings s = new Settings(
                a.integers("concurrency", "1,4,8,16"),
                a.bytes("pool-size", "256MiB"),
                a.bytes("page-bytes", "256KiB"),
                a.integer("prefixes", 128),
                a.integer("prefix-min-blocks", 8),
                a.integer("prefix-max-blocks", 40),
                a.decimal("zipf", 1.0),
                a.integer("unique-min-blocks", 1),
                a.integer("unique-max-blocks", 8),
                a.decimal("cancel-fraction", 0.1),
                a.decimal("seconds", 5),
                a.longValue("requests", 0),
                a.integer("warmup-requests", 400),
                a.decimal("load-fraction", 0.5),
                a.decimal("rate", 0),
                a.string("mode", "both"),
                a.decimal("think-ms", 0),
                a.integer("ping-every", 4),
                a.integer("full-verify-every", 16),
                a.decimal("ssd-mix", 0),
                a.longValue("seed", 1),
                a.path("out"),
                a.flag("shared-client", false),
                a.bytesOrZero("ssd-capacity"),
                a.decimal("memcpy-seconds", 0.5));
        a.requireAllUsed();
        if (!List.of("both", "closed", "open").contains(s.mode())) {
            throw new IllegalArgumentException("--mode is both, closed or open; got " + s.mode());
        }
        if (s.concurrencies().length == 0 || java.util.Arrays.stream(s.concurrencies()).anyMatch(c -> c < 1)) {
            throw new IllegalArgumentException("--concurrency takes positive integers, e.g. 1,4,8,16");
        }
        if (s.mode().equals("open") && s.fixedRate() <= 0) {
            throw new IllegalArgumentException("--mode=open needs --rate=REQUESTS_PER_SECOND (there is no closed phase to calibrate it)");
        }
        if (s.uniqueMax() >= 4096) {
            throw new IllegalArgumentException("--unique-max-blocks must be below 4096");
        }
        if (s.ssdMix() < 0 || s.ssdMix() > 1) {
            throw new IllegalArgumentException("--ssd-mix is a fraction in [0, 1]; got " + s.ssdMix());
        }
        if (s.memcpySeconds() <= 0) {
            throw new IllegalArgumentException("--memcpy-seconds must be positive");
        }
        if (s.pingEvery() < 1) {
            throw new IllegalArgumentException("--ping-every is a positive number of requests");
        }
        if (s.pageBytes() % 4096 != 0) {
            throw new IllegalArgumentException("--page-bytes must be a multiple of 4096");
        }
        try {
            return measure(s);
        } catch (RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new IllegalStateException("load bench failed: " + e, e);
        }
    }

    private static JsonObject measure(Settings s) throws Exception {
        PrefixWorkload workload = new PrefixWorkload(s.prefixes(), s.prefixMinBlocks(), s.prefixMaxBlocks(), s.zipfExponent(),
                s.uniqueMin(), s.uniqueMax(), s.seed());
        long capacityBlocks = s.poolBytes() / io.orbitkv.storage.StorageProxy.slotBytesOf(s.pageBytes());
        long workingSetBytes = workload.catalogBlocks() * s.pageBytes();
        log("load: pool %s, page %s (capacity %d pages); prefix catalog %d blocks = %s (%.1fx the pool) + unique tails",
                mib(s.poolBytes()), kib(s.pageBytes()), capacityBlocks, workload.catalogBlocks(), mib(workingSetBytes),
                (double) workingSetBytes / s.poolBytes());
        int coldStart = workload.coldTailStart(capacityBlocks);
        workload.coldTailStart = coldStart;
        Map<String, String> ssdSettings = Map.of();
        long ssdCapacity = 0;
        if (s.ssd()) {
            long extentSlot = s.pageBytes() + 4096;
            ssdCapacity = s.ssdCapacity() > 0 ? s.ssdCapacity()
                    : ((2 * workload.catalogBlocks() + 64) * extentSlot + (1L << 20) - 1) / (1L << 20) * (1L << 20);
            ssdSettings = Map.of("ssd.enabled", "true", "ssd.capacity", Long.toString(ssdCapacity),
                    "ssd.extent", Long.toString(s.pageBytes()), "ssd.write-policy", "all");
            log("load: SSD tier on, capacity %s (%d extents of %s + 4 KiB header; catalog %d blocks); --ssd-mix=%.2f: "
                    + "that share of requests takes a prefix uniformly from the cold tail (Zipf ranks %d..%d, beyond what DRAM holds)",
                    mib(ssdCapacity), ssdCapacity / extentSlot, kib(s.pageBytes()), workload.catalogBlocks(), s.ssdMix(),
                    coldStart + 1, s.prefixes());
        }
        int maxConcurrency = java.util.Arrays.stream(s.concurrencies()).max().orElse(1);
        CacheBounds.Simulation offline = new CacheBounds.Simulation(capacityBlocks);
        AtomicLong requestIds = new AtomicLong();
        List<Worker> workers = new ArrayList<>();
        try (InProcessManager manager = InProcessManager.start("orbitkv-bench-load-", s.poolBytes(), chunkFor(s.pageBytes()), ssdSettings)) {
            io.micrometer.core.instrument.MeterRegistry registry = manager.manager().registry();
            InstanceIdentity identity = SimulatedEngine.identity("orbitkv-perf/load", "synthetic;page_bytes=" + s.pageBytes(),
                    16, s.pageBytes());
            OrbitKvClient shared = s.sharedClient() ? OrbitKvClient.connectUnix(manager.unixSocket(), manager.token()) : null;
            try {
                for (int i = 0; i < maxConcurrency; i++) {
                    OrbitKvClient client = shared != null ? shared : OrbitKvClient.connectUnix(manager.unixSocket(), manager.token());
                    workers.add(new Worker(i, SimulatedEngine.register(client, shared == null, identity, s.fullVerifyEvery()),
                            new SplittableRandom(s.seed() * 1_000_003L + i)));
                }
                // Warm-up: fill the pool through the real path so the measured phases run under eviction pressure.
                int warmC = Math.min(4, maxConcurrency);
                PhaseStats warm = runPhase(s, workload, offline, requestIds, workers.subList(0, warmC), false, 0,
                        Math.max(60, s.phaseSeconds() * 4), s.warmupRequests());
                StatsReply afterWarm = workers.get(0).engine.stats();
                log("load: warm-up %d requests, pool %s used of %s, %d evictions", warm.requests.sum(),
                        mib(afterWarm.getPoolBytesUsed()), mib(afterWarm.getPoolBytesTotal()), afterWarm.getEvictions());

                JsonArray perConcurrency = new JsonArray();
                JsonObject pingBaselines = new JsonObject();
                JsonObject memcpyBaselines = new JsonObject();
                List<Plots.Series> cdfSeries = new ArrayList<>();
                List<Plots.Series> requestCdfSeries = new ArrayList<>();
                double[] xs = new double[s.concurrencies().length];
                double[] closedRps = new double[xs.length];
                double[] openRps = new double[xs.length];
                double[] closedGbps = new double[xs.length];
                double[] closedMemcpyGbps = new double[xs.length];
                Double firstRatio = null;
                int firstRatioConcurrency = 0;
                long totalVerified = 0;
                long totalMismatched = 0;
                for (int ci = 0; ci < s.concurrencies().length; ci++) {
                    int c = s.concurrencies()[ci];
                    List<Worker> active = workers.subList(0, c);
                    JsonObject entry = new JsonObject().put("concurrency", c);
                    PhaseStats closed = null;
                    PhaseStats open = null;
                    double rate = s.fixedRate();
                    if (s.closed()) {
                        long ev0 = workers.get(0).engine.stats().getEvictions();
                        TierCounters t0 = TierCounters.read(registry);
                        long hits0 = offlineHits(offline);
                        long refs0 = offlineRefs(offline);
                        closed = runPhase(s, workload, offline, requestIds, active, false, 0, s.phaseSeconds(), s.phaseRequests());
                        long ev = workers.get(0).engine.stats().getEvictions() - ev0;
                        TierCounters tiers = TierCounters.read(registry).minus(t0);
                        logTiers(s, c, "closed", tiers, closed);
                        double memcpy = memcpyBandwidth(s.pageBytes(), s.memcpySeconds(), c);
                        String key = phaseKey(c, "closed_loop");
                        memcpyBaselines.put(key, memcpyJson(memcpy, c, s.pageBytes()));
                        pingBaselines.put(key, closed.ping.summary().toJson());
                        entry.put("closed_loop", closed.toJson().put("evictions", ev).put("hits_by_tier", tiers.toJson())
                                .put("offline_lru_hit_ratio", ratio(offlineHits(offline) - hits0, offlineRefs(offline) - refs0))
                                .put("memcpy_bytes_per_second_same_threads", memcpy)
                                .put("restored_over_memcpy_same_threads", closed.restoredBytesPerSecond() / memcpy));
                        log("load c=%d closed: %.0f req/s, %.2f GB/s, hit %.1f%%, time-to-ready p50 %.0f µs p99 %.0f µs, %d evictions; "
                                        + "interleaved ping p50 %.0f µs (%d); memcpy %d threads %.2f GB/s",
                                c, closed.requestsPerSecond(), closed.bytesPerSecond() / 1e9, 100 * entry.getJsonObject("closed_loop").getDouble("hit_ratio"),
                                closed.timeToReady.summary().p50Nanos() / 1e3, closed.timeToReady.summary().p99Nanos() / 1e3, ev,
                                closed.ping.summary().p50Nanos() / 1e3, closed.ping.summary().count(), c, memcpy / 1e9);
                        if (rate <= 0) {
                            rate = closed.requestsPerSecond() * s.loadFraction();
                        }
                        totalVerified += closed.verifiedBytes.sum();
                        totalMismatched += closed.mismatchedPages.sum();
                    }
                    if (s.open() && rate > 0) {
                        long ev0 = workers.get(0).engine.stats().getEvictions();
                        TierCounters t0 = TierCounters.read(registry);
                        open = runPhase(s, workload, offline, requestIds, active, true, rate, s.phaseSeconds(), s.phaseRequests());
                        long ev = workers.get(0).engine.stats().getEvictions() - ev0;
                        TierCounters tiers = TierCounters.read(registry).minus(t0);
                        logTiers(s, c, "open", tiers, open);
                        double memcpy = memcpyBandwidth(s.pageBytes(), s.memcpySeconds(), c);
                        String key = phaseKey(c, "open_loop");
                        memcpyBaselines.put(key, memcpyJson(memcpy, c, s.pageBytes()));
                        pingBaselines.put(key, open.ping.summary().toJson());
                        entry.put("open_loop", open.toJson().put("target_requests_per_second", rate).put("evictions", ev)
                                .put("hits_by_tier", tiers.toJson())
                                .put("memcpy_bytes_per_second_same_threads", memcpy)
                                .put("restored_over_memcpy_same_threads", open.restoredBytesPerSecond() / memcpy));
                        log("load c=%d open @ %.0f req/s: achieved %.0f req/s, time-to-ready p50 %.0f µs p99 %.0f µs p99.9 %.0f µs, request p99 %.0f µs",
                                c, rate, open.requestsPerSecond(), open.timeToReady.summary().p50Nanos() / 1e3,
                                open.timeToReady.summary().p99Nanos() / 1e3, open.timeToReady.summary().p999Nanos() / 1e3,
                                open.request.summary().p99Nanos() / 1e3);
                        totalVerified += open.verifiedBytes.sum();
                        totalMismatched += open.mismatchedPages.sum();
                    }
                    PhaseStats latencyPhase = open != null ? open : closed;
                    // The closed loop when there is one: its pings ran on the same C connections under the same load.
                    PhaseStats ratioPhase = closed != null ? closed : open;
                    LatencySummary rpc = ratioPhase.queryRpc.summary();
                    LatencySummary ping = ratioPhase.ping.summary();
                    double ratio = ping.p50Nanos() > 0 && rpc.count() > 0 ? (double) rpc.p50Nanos() / ping.p50Nanos() : 0;
                    entry.put("query_rpc_p50_over_ping_p50", ratio)
                            .put("query_rpc_p50_over_ping_p50_phase", closed != null ? "closed_loop" : "open_loop");
                    if (firstRatio == null && ratio > 0) {
                        firstRatio = ratio;
                        firstRatioConcurrency = c;
                    }
                    perConcurrency.add(entry);
                    String phaseName = open != null ? "open" : "closed";
                    cdfSeries.add(Plots.Series.latencyCdf("time-to-ready c=" + c + " (" + phaseName + ")", latencyPhase.timeToReady.summary().cdf()));
                    requestCdfSeries.add(Plots.Series.latencyCdf("request c=" + c + " (" + phaseName + ")", latencyPhase.request.summary().cdf()));
                    Plots.Series pingCdf = Plots.Series.latencyCdf("no-op ping c=" + c, ping.cdf());
                    cdfSeries.add(new Plots.Series(pingCdf.name(), pingCdf.x(), pingCdf.y(), true));
                    xs[ci] = c;
                    closedRps[ci] = closed != null ? closed.requestsPerSecond() : 0;
                    closedGbps[ci] = closed != null ? closed.bytesPerSecond() / 1e9 : 0;
                    closedMemcpyGbps[ci] = closed != null ? entry.getJsonObject("closed_loop").getDouble("memcpy_bytes_per_second_same_threads") / 1e9 : 0;
                    openRps[ci] = open != null ? open.requestsPerSecond() : 0;
                }
                StatsReply end = workers.get(0).engine.stats();
                long leakedLeases = end.getActiveLeases();
                CacheBounds.Bounds bounds = offline.bounds();
                BenchReport.Builder report = BenchReport.builder(NAME)
                        .figure("per_concurrency", perConcurrency)
                        .figure("verified_bytes", totalVerified)
                        .figure("mismatched_pages", totalMismatched)
                        .figure("active_leases_at_end", leakedLeases)
                        .figure("evictions_total", end.getEvictions())
                        .figure("warmup", warm.toJson().put("evictions_after", afterWarm.getEvictions()))
                        .figure("ssd", ssdFigure(s, ssdCapacity, coldStart, TierCounters.read(registry)))
                        .baseline("memcpy_bytes_per_second", memcpyBaselines)
                        .baseline("noop_grpc_ping", pingBaselines)
                        .baseline("offline_generated_stream", new JsonObject()
                                .put("block_references", bounds.blockReferences())
                                .put("infinite_hit_ratio", bounds.infinite().ratio())
                                .put("lru_capacity_blocks", capacityBlocks)
                                .put("lru_hit_ratio", bounds.lruAt(capacityBlocks).ratio())
                                .put("note", "whole run incl. warm-up, in dispatch order; LRU touches every block of a request"));
                if (firstRatio != null) {
                    report.topLevelRatio("query_p50_ratio_c" + firstRatioConcurrency, firstRatio);
                }
                for (int ci = 0; ci < xs.length; ci++) {
                    JsonObject entry = perConcurrency.getJsonObject(ci);
                    int c = (int) xs[ci];
                    report.ratio("query_rpc_p50_over_ping_p50_c" + c, entry.getDouble("query_rpc_p50_over_ping_p50"));
                    for (String phase : List.of("closed_loop", "open_loop")) {
                        JsonObject stats = entry.getJsonObject(phase);
                        if (stats != null) {
                            report.ratio(phase + "_restored_over_memcpy_c" + c, stats.getDouble("restored_over_memcpy_same_threads"));
                        }
                    }
                }
                judge(report, totalMismatched, leakedLeases, sessionLeases(workers));
                report.config("concurrency", new JsonArray(java.util.Arrays.stream(s.concurrencies()).boxed().toList()))
                        .config("pool_bytes", s.poolBytes()).config("page_bytes", s.pageBytes())
                        .config("pool_capacity_pages", capacityBlocks)
                        .config("prefix_catalog_blocks", workload.catalogBlocks())
                        .config("working_set_over_pool", (double) workingSetBytes / s.poolBytes())
                        .config("prefixes", s.prefixes()).config("prefix_blocks", s.prefixMinBlocks() + ".." + s.prefixMaxBlocks())
                        .config("zipf_exponent", s.zipfExponent())
                        .config("shared_length", "whole prefix with p=" + PrefixWorkload.FULL_PREFIX_PROBABILITY + ", else uniform 1..len")
                        .config("unique_blocks", s.uniqueMin() + ".." + s.uniqueMax())
                        .config("cancel_fraction", s.cancelFraction())
                        .config("cancel_mix", "half after-submit (cancel the ticket, recompute all, query counted as miss), half after-ready (copy half, cancel, publish nothing)")
                        .config("mode", s.mode()).config("phase_seconds", s.phaseSeconds()).config("phase_requests_cap", s.phaseRequests())
                        .config("warmup_requests", s.warmupRequests())
                        .config("load_model", "closed loop (think " + s.thinkMillis() + " ms) for capacity; open loop Poisson at "
                                + (s.fixedRate() > 0 ? s.fixedRate() + " req/s" : s.loadFraction() + " x closed-loop capacity")
                                + ", latency from scheduled arrival (includes generator queue wait)")
                        .config("engines", s.sharedClient() ? "threads sharing one gRPC connection" : "threads, one gRPC connection and session each")
                        .config("channel", "grpc over unix socket, in-process Manager")
                        .config("verification", "first " + SimulatedEngine.VERIFY_PREFIX_BYTES + " bytes of every copied page, whole page for 1 in " + s.fullVerifyEvery())
                        .config("ping_every", s.pingEvery())
                        .config("ping_baseline", "interleaved with the measured phase on the same connections: closed loop one Ping "
                                + "per " + s.pingEvery() + " requests per engine (its time counts in the phase); open loop one Ping after a "
                                + "request when the engine's next arrival is not yet due")
                        .config("memcpy_baseline", "after each phase, as many threads as the phase had engines, each copying "
                                + kib(s.pageBytes()) + " pages over its own buffers (beyond the CPU caches together), "
                                + s.memcpySeconds() + " s")
                        .config("ssd_mix", s.ssdMix())
                        .config("ssd_mix_meaning", "share of requests whose prefix is drawn uniformly from the cold tail "
                                + "(Zipf ranks " + (coldStart + 1) + ".." + s.prefixes() + ", beyond the most popular prefixes that fill DRAM) "
                                + "instead of the Zipf draw; 0 = DRAM-only Manager")
                        .config("ssd_capacity_bytes", ssdCapacity).config("seed", s.seed());
                BenchReport built = report.build();
                if (s.out() != null) {
                    built.writeTo(s.out(), "load.json");
                    List<Plots.Series> rps = new ArrayList<>();
                    if (s.closed()) {
                        rps.add(Plots.Series.measured("closed loop (capacity)", xs, closedRps));
                    }
                    if (s.open()) {
                        rps.add(Plots.Series.measured("open loop (achieved)", xs, openRps));
                    }
                    Plots.throughputVsConcurrency(s.out().resolve("load_throughput_vs_concurrency.png"),
                            "bench load: requests/s vs concurrency (" + kib(s.pageBytes()) + " pages, pool " + mib(s.poolBytes()) + ")",
                            "requests/s", rps, Plots.DEFAULT_WIDTH, Plots.DEFAULT_HEIGHT);
                    if (s.closed()) {
                        Plots.throughputVsConcurrency(s.out().resolve("load_bytes_vs_concurrency.png"),
                                "bench load: restored + published GB/s (closed loop) vs memcpy", "GB/s",
                                List.of(Plots.Series.measured("restored + published", xs, closedGbps),
                                        Plots.Series.measured("memcpy, C threads", xs, closedMemcpyGbps)),
                                Plots.DEFAULT_WIDTH, Plots.DEFAULT_HEIGHT);
                    }
                    Plots.latencyCdf(s.out().resolve("load_time_to_ready_cdf.png"),
                            "bench load: time-to-ready from arrival (dashed: no-op ping)", cdfSeries, Plots.DEFAULT_WIDTH, Plots.DEFAULT_HEIGHT);
                    Plots.latencyCdf(s.out().resolve("load_request_latency_cdf.png"),
                            "bench load: request latency from arrival (query, copy-out, release, publish)", requestCdfSeries,
                            Plots.DEFAULT_WIDTH, Plots.DEFAULT_HEIGHT);
                    log("load: wrote %s/load.json and PNGs", s.out());
                }
                if (!built.toJson().getBoolean(BenchReport.PASSED)) {
                    log("load: FAILED: %s", built.toJson().getJsonArray(BenchReport.FAILURES));
                }
                return built.toJson();
            } finally {
                for (Worker w : workers) {
                    try {
                        w.engine.close();
                    } catch (Exception e) {
                        log("load: closing engine %d failed: %s", w.index, e);
                    }
                }
                if (shared != null) {
                    shared.close();
                }
            }
        }
    }

    private static JsonObject ssdFigure(Settings s, long capacity, int coldStart, TierCounters whole) {
        JsonObject ssd = new JsonObject().put("requested_mix", s.ssdMix()).put("available", s.ssd());
        if (!s.ssd()) {
            return ssd.put("reason", "--ssd-mix=0: the in-process Manager runs DRAM-only (pass --ssd-mix=F > 0 for the SSD tier)");
        }
        return ssd.put("capacity_bytes", capacity).put("extent_payload_bytes", s.pageBytes()).put("write_policy", "all")
                .put("cold_tail_first_rank", coldStart + 1)
                .put("whole_run_including_warmup", whole.toJson());
    }

    private static void logTiers(Settings s, int c, String phase, TierCounters t, PhaseStats stats) {
        if (!s.ssd()) {
            return;
        }
        log("load c=%d %s: hit pages DRAM %d, SSD %d (%.1f%%); SSD read %s, written %s (%d committed, %d dropped); "
                        + "%d PENDING polls; %d evictions",
                c, phase, t.dramResidentPages(), t.ssdPages(), t.dramPages() == 0 ? 0.0 : 100.0 * t.ssdPages() / t.dramPages(),
                mib(t.ssdBytes()), mib(t.ssdWriteBytes()), t.ssdWritesCommitted(), t.ssdWritesDropped(),
                stats.pendingPolls.sum(), t.evictions());
    }

    private static double ratio(long numerator, long denominator) {
        return denominator == 0 ? 0.0 : (double) numerator / denominator;
    }

    private static long offlineHits(CacheBounds.Simulation offline) {
        synchronized (offline) {
            CacheBounds.Bounds b = offline.bounds();
            return b.lru().get(0).hitBlocks();
        }
    }

    private static long offlineRefs(CacheBounds.Simulation offline) {
        synchronized (offline) {
            return offline.bounds().blockReferences();
        }
    }

    /** A pool chunk that holds whole pages: the page size itself when it is at least 64 KiB, else 2 MiB. */
    static long chunkFor(long pageBytes) {
        long cls = io.orbitkv.storage.StorageProxy.slotBytesOf(pageBytes);
        return cls >= (64 << 10) && (2L << 20) % cls != 0 ? cls : 2L << 20;
    }

    record Worker(int index, SimulatedEngine engine, SplittableRandom random) {}

    /** Runs one phase on {@code workers}; returns when every worker is done. */
    static PhaseStats runPhase(Settings s, PrefixWorkload workload, CacheBounds.Simulation offline, AtomicLong requestIds,
                               List<Worker> workers, boolean openLoop, double ratePerSecond, double seconds, long maxRequests)
            throws InterruptedException {
        PhaseStats stats = new PhaseStats();
        long durationNanos = (long) (seconds * 1e9);
        long start = System.nanoTime();
        AtomicLong issued = new AtomicLong();
        double meanGapNanos = openLoop ? workers.size() * 1e9 / ratePerSecond : 0;
        List<Thread> threads = new ArrayList<>();
        List<Throwable> failures = java.util.Collections.synchronizedList(new ArrayList<>());
        for (Worker worker : workers) {
            Thread thread = Thread.ofPlatform().name("load-engine-" + worker.index()).start(() -> {
                try {
                    double nextArrival = start + (openLoop ? exponential(worker.random(), meanGapNanos) : 0);
                    long done = 0;
                    while (true) {
                        long now = System.nanoTime();
                        long arrival;
                        if (openLoop) {
                            if (nextArrival - start >= durationNanos) {
                                break;
                            }
                            if (now - start >= 2 * durationNanos) {
                                // Hopelessly behind: count what was still due and stop.
                                while (nextArrival - start < durationNanos) {
                                    stats.droppedArrivals.increment();
                                    nextArrival += exponential(worker.random(), meanGapNanos);
                                }
                                break;
                            }
                            arrival = (long) nextArrival;
                            while (System.nanoTime() < arrival) {
                                LockSupport.parkNanos(arrival - System.nanoTime());
                            }
                            nextArrival += exponential(worker.random(), meanGapNanos);
                        } else {
                            if (now - start >= durationNanos) {
                                break;
                            }
                            arrival = now;
                        }
                        if (maxRequests > 0 && issued.incrementAndGet() > maxRequests) {
                            break;
                        }
                        oneRequest(s, workload, offline, requestIds, worker, arrival, stats);
                        done++;
                        // The no-op baseline, inside the phase on this engine's own connection: closed loop every
                        // ping-every requests; open loop only while the next arrival is not yet due (no added queueing).
                        if (openLoop ? System.nanoTime() < (long) nextArrival : done % s.pingEvery() == 0) {
                            long p0 = System.nanoTime();
                            worker.engine().client().ping().await();
                            stats.ping.recordNanos(System.nanoTime() - p0);
                        }
                        if (!openLoop && s.thinkMillis() > 0) {
                            LockSupport.parkNanos((long) (s.thinkMillis() * 1e6));
                        }
                    }
                } catch (Throwable t) {
                    failures.add(t);
                }
            });
            threads.add(thread);
        }
        for (Thread thread : threads) {
            thread.join();
        }
        stats.elapsedNanos = System.nanoTime() - start;
        if (!failures.isEmpty()) {
            IllegalStateException failure = new IllegalStateException("a load engine failed: " + failures.get(0), failures.get(0));
            failures.stream().skip(1).forEach(failure::addSuppressed);
            throw failure;
        }
        return stats;
    }

    private static double exponential(SplittableRandom random, double mean) {
        return -Math.log(1.0 - random.nextDouble()) * mean;
    }

    enum CancelKind { NONE, AFTER_SUBMIT, AFTER_READY }

    static void oneRequest(Settings s, PrefixWorkload workload, CacheBounds.Simulation offline, AtomicLong requestIds,
                           Worker worker, long arrivalNanos, PhaseStats stats) {
        PrefixWorkload.Request request = workload.next(requestIds.incrementAndGet(), worker.random(), s.ssdMix(),
                workload.coldTailStart);
        synchronized (offline) {
            offline.onRequest(request.offlineIds());
        }
        double draw = worker.random().nextDouble();
        CancelKind cancel = draw < s.cancelFraction() / 2 ? CancelKind.AFTER_SUBMIT
                : draw < s.cancelFraction() ? CancelKind.AFTER_READY : CancelKind.NONE;
        SimulatedEngine engine = worker.engine();
        stats.referenceBlocks.add(request.chain().size());
        stats.sharedBlocks.add(request.sharedBlocks());
        long submitAt = System.nanoTime();
        SimulatedEngine.QueryOutcome query = engine.submit(request.chain());
        if (query.refusal() != null) {
            stats.refusedQuery(query.refusal());
        }
        int publishFrom;
        if (cancel == CancelKind.AFTER_SUBMIT) {
            cancel(engine, query, stats);
            stats.cancelledAfterSubmit.increment();
            stats.missQueries.increment(); // the engine did not use the answer: a miss
            publishFrom = 0;
        } else {
            query = engine.settle(query);
            long readyAt = System.nanoTime();
            stats.timeToReady.recordNanos(readyAt - arrivalNanos);
            stats.queryRpc.recordNanos(readyAt - submitAt);
            stats.pendingPolls.add(query.polls());
            if (query.ready()) {
                stats.readyQueries.increment();
                stats.hitBlocks.add(query.readyBlocks());
            } else {
                stats.missQueries.increment();
            }
            int copyPages = cancel == CancelKind.AFTER_READY ? Math.max(1, query.pages().size() / 2) : Integer.MAX_VALUE;
            if (query.ready()) {
                SimulatedEngine.CopyOutcome copy = engine.copyOut(query, copyPages, request);
                stats.restoredPages.add(copy.pages());
                stats.restoredBytes.add(copy.bytes());
                stats.verifiedBytes.add(copy.verifiedBytes());
                stats.mismatchedPages.add(copy.mismatchedPages());
            }
            if (cancel == CancelKind.AFTER_READY) {
                cancel(engine, query, stats);
                stats.cancelledAfterReady.increment();
                publishFrom = request.chain().size(); // aborted: nothing computed, nothing published
            } else {
                engine.release(query);
                publishFrom = query.readyBlocks();
            }
        }
        SimulatedEngine.PublishOutcome published = engine.publish(request.chain(), publishFrom, request);
        if (published.refusal() != null) {
            stats.refusedPublish(published.refusal());
        }
        stats.publishedPages.add(published.sealedPages());
        stats.publishedBytes.add(published.sealedBytes());
        stats.alreadyPresentPages.add(published.alreadyPresentPages());
        stats.request.recordNanos(System.nanoTime() - arrivalNanos);
        stats.requests.increment();
    }

    private static void cancel(SimulatedEngine engine, SimulatedEngine.QueryOutcome query, PhaseStats stats) {
        if (query.ticket() == 0) {
            return; // refused at submit: there is no ticket
        }
        try {
            engine.cancel(query);
        } catch (RuntimeException e) {
            stats.cancelFailures.increment();
        }
    }

    static String phaseKey(int concurrency, String phase) {
        return "c" + concurrency + "_" + phase;
    }

    private static JsonObject memcpyJson(double bytesPerSecond, int threads, long pageBytes) {
        return new JsonObject().put("bytes_per_second", bytesPerSecond).put("threads", threads).put("copy_bytes", pageBytes);
    }

    /** The run's own checks: wrong bytes or a lease left behind fail it (the report keeps every figure). */
    static void judge(BenchReport.Builder report, long mismatchedPages, long activeLeases, long sessionLeases) {
        report.check(mismatchedPages == 0, mismatchedPages + " copied pages differ from what was published")
                .check(activeLeases == 0, activeLeases + " leases still active in the Manager at the end")
                .check(sessionLeases == 0, sessionLeases + " leases of the load engines' sessions still active at the end");
    }

    private static long sessionLeases(List<Worker> workers) {
        long leases = 0;
        for (Worker worker : workers) {
            leases += worker.engine().stats().getSessionLeases();
        }
        return leases;
    }

    /**
     * Aggregate memcpy bandwidth of {@code threads} threads, each copying {@code pageBytes} pages between its own
     * buffers; together the buffers exceed the CPU caches (64 MiB of source and of destination, at least 8 pages per
     * thread), so this is the memory bandwidth C copying engines would share.
     */
    static double memcpyBandwidth(long pageBytes, double seconds, int threads) throws InterruptedException {
        int pagesPerThread = (int) Math.max(8, (64L << 20) / threads / pageBytes);
        java.util.concurrent.CyclicBarrier ready = new java.util.concurrent.CyclicBarrier(threads);
        long[] copied = new long[threads]; // each written by its own thread, read after join
        long[] elapsed = new long[threads];
        List<Thread> copiers = new ArrayList<>();
        List<Throwable> failures = java.util.Collections.synchronizedList(new ArrayList<>());
        for (int t = 0; t < threads; t++) {
            int index = t;
            copiers.add(Thread.ofPlatform().name("load-memcpy-" + t).start(() -> {
                try (Arena arena = Arena.ofConfined()) {
                    MemorySegment[] src = new MemorySegment[pagesPerThread];
                    MemorySegment[] dst = new MemorySegment[pagesPerThread];
                    for (int i = 0; i < pagesPerThread; i++) {
                        src[i] = arena.allocate(pageBytes, 4096);
                        dst[i] = arena.allocate(pageBytes, 4096);
                        src[i].fill((byte) i);
                        dst[i].copyFrom(src[i]); // first touch and warm-up
                    }
                    ready.await();
                    long bytes = 0;
                    long start = System.nanoTime();
                    long deadline = start + (long) (seconds * 1e9);
                    int i = 0;
                    while (System.nanoTime() < deadline) {
                        dst[i].copyFrom(src[i]);
                        bytes += pageBytes;
                        i = (i + 1) % pagesPerThread;
                    }
                    elapsed[index] = System.nanoTime() - start;
                    copied[index] = bytes;
                } catch (Throwable e) {
                    failures.add(e);
                    ready.reset();
                }
            }));
        }
        for (Thread copier : copiers) {
            copier.join();
        }
        if (!failures.isEmpty()) {
            throw new IllegalStateException("memcpy baseline failed: " + failures.get(0), failures.get(0));
        }
        long longest = java.util.Arrays.stream(elapsed).max().orElse(1);
        return java.util.Arrays.stream(copied).sum() * 1e9 / longest;
    }

    static String mib(long bytes) {
        return String.format(Locale.ROOT, "%.0f MiB", bytes / 1048576.0);
    }

    static String kib(long bytes) {
        return String.format(Locale.ROOT, "%.0f KiB", bytes / 1024.0);
    }

    static void log(String format, Object... args) {
        System.err.println(String.format(Locale.ROOT, format, args));
    }
}
