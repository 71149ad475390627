package io.orbitkv.perf.replay;

import com.google.protobuf.ByteString;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.perf.engine.InProcessManager;
import io.orbitkv.perf.engine.SimulatedEngine;
import io.orbitkv.perf.report.BenchReport;
import io.orbitkv.perf.report.LatencyRecorder;
import io.orbitkv.perf.report.LatencySummary;
import io.orbitkv.perf.report.MachineInfo;
import io.orbitkv.perf.trace.ChainedBlockHashes;
import io.orbitkv.perf.trace.MooncakeTrace;
import io.orbitkv.perf.trace.TraceRequest;
import io.orbitkv.protocol.engine.InstanceIdentity;
import io.orbitkv.protocol.engine.QueryStatus;
import io.orbitkv.storage.PoolAllocator;
import io.vertx.core.json.JsonObject;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;

/**
 * {@code orbitkv replay --trace FILE --hint-lead-ms L --ssd-capacity SIZE [...]}: deadline-driven prefetch measured on
 * a trace. Each request's demand is first submitted as a speculative hint ({@code speculative}, {@code first_use_micros}
 * = L ms) L ms before its first use, then, at first use, as the real demand (the next revision of the same request,
 * which takes over what the hint prepared, or replaces it when the hint does not cover it). The same requests run twice in one invocation, each pass on a fresh
 * in-process Manager with the SSD tier on: prefetch on (hints sent) and off (no hints, the real demand at the same
 * first use). Requests run one after another on one engine, so a hint prepares while the engine waits for its first
 * use (the lead), not while other requests run. An unreported warm-up pass over the first {@value #WARM_UP_REQUESTS}
 * requests runs first, so the first measured pass is not the one on a cold JVM.
 *
 * <p>Each side runs twice (order on, off, off, on) and its two runs are reported together. Per side:
 * {@code ready_at_first_use_fraction} (the real demand's first reply was not PENDING: READY, or MISS with
 * nothing to wait for), {@code wait_after_first_use_p50_us} / {@code _p99_us} (first use until the real demand
 * settled, the gRPC round trip included), hits, SSD pages read, and the planner's boundary-choice counts
 * ({@code orbitkv_planning_plans_total{reason}}). Every leased byte is verified against what was published; the run
 * fails (exit 1) on a mismatch or a lease left behind.
 */
public final class HintedReplay {
    public static final String REPORT_FILE = "replay_hints.json";
    static final int WARM_UP_REQUESTS = 100;

    private HintedReplay() {}

    public static JsonObject run(TraceReplayer.Options options, long leadMs, Consumer<String> progress) throws Exception {
        options.validate();
        if (!options.ssd() || options.dataDir() != null) {
            throw new IllegalArgumentException("--hint-lead-ms replays against an in-process Manager with the SSD tier: "
                    + "give --ssd-capacity and no --data-dir");
        }
        if (leadMs < 0) {
            throw new IllegalArgumentException("--hint-lead-ms must be >= 0");
        }
        List<TraceRequest> requests = new ArrayList<>();
        try (MooncakeTrace trace = MooncakeTrace.open(options.trace())) {
            for (TraceRequest r = trace.next(); r != null && (options.limit() <= 0 || requests.size() < options.limit());
                 r = trace.next()) {
                requests.add(r);
            }
        }
        progress.accept(String.format(Locale.ROOT, "replay-hints: %d requests, hint lead %d ms, SSD %d B", requests.size(),
                leadMs, options.ssdCapacityBytes()));
        // A short unreported pass first, so no measured pass runs on a cold JVM (JIT, class loading); then the two
        // sides in the order on, off, off, on (each on a fresh Manager), so a drift of the machine's load over the run
        // weighs on both alike.
        pass(options, requests.subList(0, Math.min(requests.size(), WARM_UP_REQUESTS)), leadMs, new Pass(true),
                line -> { });
        Pass on = new Pass(true);
        Pass off = new Pass(false);
        for (Pass side : List.of(on, off, off, on)) {
            pass(options, requests, leadMs, side, progress);
        }
        on.waits = on.waitRecorder.summary();
        off.waits = off.waitRecorder.summary();
        BenchReport.Builder report = BenchReport.builder("replay-hints")
                .figure("prefetch_on", on.toJson())
                .figure("prefetch_off", off.toJson())
                .ratio("wait_after_first_use_p50_on_vs_off", on.waits.p50Nanos(), Math.max(1, off.waits.p50Nanos()))
                .ratio("wait_after_first_use_p99_on_vs_off", on.waits.p99Nanos(), Math.max(1, off.waits.p99Nanos()))
                .config("trace", options.trace().toString())
                .config("requests", requests.size())
                .config("runs_per_side", 2)
                .config("hint_lead_ms", leadMs)
                .config("pool_blocks", options.poolBlocks())
                .config("ssd_capacity_bytes", options.ssdCapacityBytes())
                .config("page_bytes_scaled", options.scaledPageBytes())
                .config("block_tokens", options.blockTokens())
                .check(on.mismatchedPages == 0 && off.mismatchedPages == 0, "restored bytes differed from the published ones")
                .check(on.leasesLeft == 0 && off.leasesLeft == 0, "a lease was left behind")
                .machine(MachineInfo.probe());
        BenchReport built = report.build();
        built.writeTo(options.out(), REPORT_FILE);
        progress.accept("replay-hints: wrote " + options.out().resolve(REPORT_FILE));
        return built.toJson();
    }

    /** What one pass measured. */
    private static final class Pass {
        final boolean prefetch;
        final LatencyRecorder waitRecorder = LatencyRecorder.singleWriter();
        LatencySummary waits;
        long requests;
        long readyAtFirstUse;
        long hitBlocks;
        long referenceBlocks;
        long mismatchedPages;
        long verifiedBytes;
        long hintRefusals;
        long leasesLeft;
        double ssdPagesRead;
        double speculationDropped;
        double speculationRefused;
        double takeOvers;
        final JsonObject boundaryReasons = new JsonObject();

        Pass(boolean prefetch) {
            this.prefetch = prefetch;
        }

        JsonObject toJson() {
            return new JsonObject().put("prefetch", prefetch).put("requests", requests)
                    .put("ready_at_first_use_fraction", requests == 0 ? 0.0 : (double) readyAtFirstUse / requests)
                    .put("wait_after_first_use_p50_us", waits.p50Nanos() / 1e3)
                    .put("wait_after_first_use_p99_us", waits.p99Nanos() / 1e3)
                    .put("wait_after_first_use_mean_us", waits.meanNanos() / 1e3)
                    .put("hit_ratio", referenceBlocks == 0 ? 0.0 : (double) hitBlocks / referenceBlocks)
                    .put("ssd_pages_read", ssdPagesRead).put("hint_refusals", hintRefusals)
                    .put("speculation_dropped", speculationDropped).put("speculation_refused", speculationRefused)
                    .put("takeovers", takeOvers)
                    .put("boundary_choices", boundaryReasons).put("verified_bytes", verifiedBytes)
                    .put("mismatched_pages", mismatchedPages).put("leases_left", leasesLeft);
        }
    }

    /** Replays {@code requests} once on a fresh Manager, adding what it measured to {@code pass}. */
    private static void pass(TraceReplayer.Options options, List<TraceRequest> requests, long leadMs, Pass pass,
                             Consumer<String> progress) throws Exception {
        boolean prefetch = pass.prefetch;
        long pageBytes = options.scaledPageBytes();
        long slotBytes = PoolAllocator.sizeClassOf(pageBytes);
        long chunk = slotBytes >= (64 << 10) ? slotBytes : 64 << 10;
        long pagesPerChunk = chunk / slotBytes;
        long chunks = (options.poolBlocks() + pagesPerChunk - 1) / pagesPerChunk;
        Map<String, String> ssd = Map.of("ssd.enabled", "true", "ssd.capacity", Long.toString(options.ssdCapacityBytes()),
                "ssd.extent", Long.toString(pageBytes), "ssd.write-policy", "all");
        try (InProcessManager manager = InProcessManager.start("orbitkv-replay-hints-", chunks * chunk, chunk, ssd)) {
            InstanceIdentity identity = SimulatedEngine.identity("orbitkv-replay/8b-class",
                    String.format(Locale.ROOT, "bytes_per_token=%d;block_tokens=%d;scale=1/%d", options.bytesPerToken(),
                            options.blockTokens(), options.bytesScale()), options.blockTokens(), pageBytes);
            MeterRegistry registry = manager.manager().registry();
            try (SimulatedEngine engine = SimulatedEngine.register(OrbitKvClient.connectUnix(manager.unixSocket(),
                    manager.token()), true, identity, options.fullVerifyEvery())) {
                double ssdBefore = count(registry, "orbitkv.tier.reads", "tier", "ssd");
                long leadNanos = TimeUnit.MILLISECONDS.toNanos(leadMs);
                for (int i = 0; i < requests.size(); i++) {
                    replayOne(options, requests.get(i), i, engine, leadNanos, pass);
                    if ((i + 1) % 200 == 0) {
                        progress.accept(String.format(Locale.ROOT, "replay-hints: prefetch %s, %d/%d requests",
                                prefetch ? "on" : "off", i + 1, requests.size()));
                    }
                }
                pass.ssdPagesRead += count(registry, "orbitkv.tier.reads", "tier", "ssd") - ssdBefore;
                pass.leasesLeft += engine.stats().getSessionLeases();
            }
            for (String reason : List.of("longest", "earlier_first_token", "budget")) {
                pass.boundaryReasons.put(reason, pass.boundaryReasons.getDouble(reason, 0.0)
                        + count(registry, "orbitkv.planning.plans", "reason", reason));
            }
            pass.speculationDropped += registry.find("orbitkv.planning.speculation.dropped").counters().stream()
                    .mapToDouble(Counter::count).sum();
            pass.speculationRefused += count(registry, "orbitkv.queries.speculation.refused", null, null);
            pass.takeOvers += registry.find("orbitkv.queries.takeovers").counters().stream()
                    .mapToDouble(Counter::count).sum();
        }
    }

    private static double count(MeterRegistry registry, String name, String tag, String value) {
        Counter counter = tag == null ? registry.find(name).counter() : registry.find(name).tag(tag, value).counter();
        return counter == null ? 0 : counter.count();
    }

    private static void replayOne(TraceReplayer.Options options, TraceRequest request, int index, SimulatedEngine engine,
                                  long leadNanos, Pass pass) {
        long[] ids = request.hashIds();
        if (ids.length == 0) {
            return;
        }
        byte[][] hashes = ChainedBlockHashes.chain(ids);
        List<ByteString> chain = new ArrayList<>(hashes.length);
        for (byte[] hash : hashes) {
            chain.add(ByteString.copyFrom(hash));
        }
        SimulatedEngine.PageSeeds seeds = position -> ids[position];
        String requestId = "r" + index;
        long operation = index + 1L;
        long hintAt = System.nanoTime();
        long revision = 0;
        if (pass.prefetch) {
            SimulatedEngine.QueryOutcome hint = engine.submitDemand(requestId, revision++, operation,
                    options.blockTokens(), chain, true, TimeUnit.NANOSECONDS.toMicros(leadNanos), 1.0f);
            if (hint.refusal() != null) {
                pass.hintRefusals++;
            }
        }
        long firstUse = hintAt + leadNanos;
        while (System.nanoTime() < firstUse) {
            LockSupport.parkNanos(firstUse - System.nanoTime());
        }
        SimulatedEngine.QueryOutcome real = engine.submitDemand(requestId, revision, operation, options.blockTokens(),
                chain, false, 0, 0f);
        boolean readyAtOnce = real.status() != QueryStatus.PENDING;
        SimulatedEngine.QueryOutcome settled = engine.settle(real);
        pass.waitRecorder.recordNanos(System.nanoTime() - firstUse);
        pass.requests++;
        if (readyAtOnce) {
            pass.readyAtFirstUse++;
        }
        int ready = 0;
        if (settled.ready()) {
            ready = settled.readyBlocks();
            SimulatedEngine.CopyOutcome copy = engine.copyOut(settled, Integer.MAX_VALUE, seeds);
            pass.verifiedBytes += copy.verifiedBytes();
            pass.mismatchedPages += copy.mismatchedPages();
            engine.release(settled);
        }
        pass.referenceBlocks += ids.length;
        pass.hitBlocks += ready;
        engine.publish(chain, ready, seeds);
    }
}
