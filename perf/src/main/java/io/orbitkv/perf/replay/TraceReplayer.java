package io.orbitkv.perf.replay;

import com.google.protobuf.ByteString;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.perf.engine.InProcessManager;
import io.orbitkv.perf.engine.SimulatedEngine;
import io.orbitkv.perf.engine.SsdWriteBacklog;
import io.orbitkv.perf.engine.TierCounters;
import io.orbitkv.perf.report.BenchReport;
import io.orbitkv.perf.report.LatencyRecorder;
import io.orbitkv.perf.report.LatencySummary;
import io.orbitkv.perf.report.MachineInfo;
import io.orbitkv.perf.report.Plots;
import io.orbitkv.perf.trace.CacheBounds;
import io.orbitkv.perf.trace.ChainedBlockHashes;
import io.orbitkv.perf.trace.MooncakeTrace;
import io.orbitkv.perf.trace.TraceBoundsReport;
import io.orbitkv.perf.trace.TraceRequest;
import io.orbitkv.protocol.engine.InstanceIdentity;
import io.orbitkv.protocol.engine.StatsReply;
import io.orbitkv.storage.StorageProxy;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;

/**
 * Replays a Mooncake trace against a Manager as an inference engine would, and judges the Manager's hits against the
 * trace's offline bounds.
 *
 * <h2>What one request does</h2>
 * Its {@code hash_ids} become a chained block-hash prefix ({@link ChainedBlockHashes}) of a registered instance, one
 * page per 512-token block. At the request's arrival the replayer queries the chain (submit, poll while PENDING), copies
 * the READY pages out of the pool and verifies a sample of bytes, releases the lease, and then "prefills": publishes
 * the pages the Manager did not have (the engine computed them). The page of block {@code i} holds SyntheticKv's
 * stream for (hash id, i), so any hit can be verified against what was published.
 *
 * <h2>Geometry and the byte scale</h2>
 * A logical page is {@code bytesPerToken × blockTokens}: 131,072 B/token (an 8B-class model: 32 layers × 8 KV heads ×
 * 128 dims × 2 (K and V) × 2 bytes) × 512 tokens = 64 MiB. Replaying 64 MiB pages would need ~640 GiB of pool for a
 * 10K-block cache and move ~5 TB for this trace, so the bytes actually stored and copied are divided by
 * {@code bytesScale}. Hits, evictions and capacities are counted in blocks and do not depend on the scale; bytes are
 * reported both ways ({@code *_logical_bytes} and {@code *_scaled_bytes}); latencies are those of the scaled pages.
 *
 * <h2>Time</h2>
 * {@code speed = 0} replays as fast as possible (each request arrives when the previous is done); {@code speed = N}
 * schedules request arrivals at trace timestamp / N, and time-to-ready counts from that scheduled arrival (a replayer
 * behind schedule shows it as latency, nothing is hidden). With the SSD tier the replay may pause between requests
 * while the SSD writer catches up ({@link SsdWriteBacklog}); the pauses' count and time are reported.
 *
 * <h2>Model</h2>
 * What is computed rather than measured goes in the report's {@code model} section: the logical bytes (scaled bytes ×
 * {@code bytesScale}) and the time to first token from each request's arrival ({@link ArrivalModel}: engine wait,
 * measured time to READY, SSD reads at the stated device rate queued behind each other, host-to-device copy,
 * recompute of the rest), beside the same arrivals and engines with no hit.
 *
 * <h2>Bounds with the SSD tier</h2>
 * With the SSD tier on, the Manager can hit on anything DRAM or SSD holds, so its measured hit ratio is compared with
 * LRU at the DRAM plus SSD capacity (and, for reference, at DRAM alone and at SSD alone).
 */
public final class TraceReplayer {
    public static final String BENCH_NAME = "replay";
    public static final String REPORT_FILE = "replay.json";
    public static final String HIT_RATIO_PLOT = "replay_hit_ratio_vs_capacity.png";
    public static final String LATENCY_PLOT = "replay_time_to_ready_cdf.png";

    /** Replay settings. {@code dataDir} null: start a Manager in-process with {@code poolBlocks} pages of pool. */
    public record Options(Path trace, Path out, long limit, double speed, long bytesPerToken, int blockTokens,
                          long bytesScale, long poolBlocks, Path dataDir, double prefillTokensPerSecond, int engines,
                          int fullVerifyEvery, long ssdCapacityBytes, double hostToDeviceBytesPerSecond,
                          double ssdReadBytesPerSecond) {
        /** The stated host-to-device rate of the TTFT model: PCIe Gen4 x16 at about 80 % of its 32 GB/s. */
        public static final double DEFAULT_H2D_BYTES_PER_SECOND = 25e9;

        /** The options without an SSD tier (the DRAM-only default). */
        public Options(Path trace, Path out, long limit, double speed, long bytesPerToken, int blockTokens, long bytesScale,
                       long poolBlocks, Path dataDir, double prefillTokensPerSecond, int engines, int fullVerifyEvery) {
            this(trace, out, limit, speed, bytesPerToken, blockTokens, bytesScale, poolBlocks, dataDir,
                    prefillTokensPerSecond, engines, fullVerifyEvery, 0);
        }

        /** The options with the default model rates (stated host-to-device rate, SSD read rate measured in the run). */
        public Options(Path trace, Path out, long limit, double speed, long bytesPerToken, int blockTokens, long bytesScale,
                       long poolBlocks, Path dataDir, double prefillTokensPerSecond, int engines, int fullVerifyEvery,
                       long ssdCapacityBytes) {
            this(trace, out, limit, speed, bytesPerToken, blockTokens, bytesScale, poolBlocks, dataDir,
                    prefillTokensPerSecond, engines, fullVerifyEvery, ssdCapacityBytes, DEFAULT_H2D_BYTES_PER_SECOND, 0);
        }

        /** SSD extents the in-process Manager's SSD tier holds (each a scaled page plus its 4 KiB header). */
        public long ssdExtents() {
            return ssdCapacityBytes / (scaledPageBytes() + 4096);
        }

        public boolean ssd() {
            return ssdCapacityBytes > 0;
        }

        public long logicalPageBytes() {
            return bytesPerToken * blockTokens;
        }

        public long scaledPageBytes() {
            return logicalPageBytes() / bytesScale;
        }

        void validate() {
            if (bytesPerToken <= 0 || blockTokens <= 0 || bytesScale <= 0) {
                throw new IllegalArgumentException("bytes per token, block tokens and bytes scale must be positive");
            }
            if (logicalPageBytes() % bytesScale != 0 || scaledPageBytes() % 4096 != 0 || scaledPageBytes() == 0) {
                throw new IllegalArgumentException("a scaled page (" + logicalPageBytes() + " / " + bytesScale
                        + ") must be a whole multiple of 4096 bytes");
            }
            if (ssdCapacityBytes > 0 && dataDir != null) {
                throw new IllegalArgumentException("--ssd-capacity configures the in-process Manager; with --data-dir the running Manager's own SSD settings apply");
            }
            if (ssdCapacityBytes > 0 && ssdCapacityBytes < scaledPageBytes() + 4096) {
                throw new IllegalArgumentException("--ssd-capacity must hold at least one extent of " + (scaledPageBytes() + 4096) + " bytes");
            }
            if (speed < 0 || prefillTokensPerSecond <= 0 || engines < 1 || poolBlocks < 1) {
                throw new IllegalArgumentException("speed >= 0, prefill rate > 0, engines >= 1, pool blocks >= 1");
            }
            if (!(hostToDeviceBytesPerSecond > 0) || ssdReadBytesPerSecond < 0) {
                throw new IllegalArgumentException("--h2d-bytes-per-second > 0 and --ssd-read-bytes-per-second >= 0 (0: the stated bench ssd rate)");
            }
        }
    }

    private TraceReplayer() {}

    /** Replays, writes {@value #REPORT_FILE} and the PNGs into {@code options.out()}, and returns the report. */
    public static JsonObject run(Options options, Consumer<String> progress) throws Exception {
        options.validate();
        List<TraceRequest> requests = new ArrayList<>();
        try (MooncakeTrace trace = MooncakeTrace.open(options.trace())) {
            for (TraceRequest r = trace.next(); r != null && (options.limit() <= 0 || requests.size() < options.limit()); r = trace.next()) {
                requests.add(r);
            }
        }
        long pageBytes = options.scaledPageBytes();
        long slotBytes = StorageProxy.slotBytesOf(pageBytes);
        progress.accept(String.format(Locale.ROOT, "replay: %d requests from %s; page %d B logical, %d B stored (scale 1/%d)",
                requests.size(), options.trace(), options.logicalPageBytes(), pageBytes, options.bytesScale()));
        InProcessManager inProcess = null;
        try {
            Path socket;
            String token;
            if (options.dataDir() == null) {
                // Chunk = one slot when a slot is at least the Manager's minimum chunk, so capacity is exactly
                // poolBlocks pages; smaller pages share 64 KiB chunks and the capacity rounds up to fill them.
                long chunk = slotBytes >= (64 << 10) ? slotBytes : 64 << 10;
                long pagesPerChunk = chunk / slotBytes;
                long chunks = (options.poolBlocks() + pagesPerChunk - 1) / pagesPerChunk;
                Map<String, String> ssd = Map.of();
                if (options.ssd()) {
                    // Extent payload = the scaled page rounded up to 4 KiB (it is already a multiple of 4 KiB).
                    ssd = Map.of("ssd.enabled", "true", "ssd.capacity", Long.toString(options.ssdCapacityBytes()),
                            "ssd.extent", Long.toString(pageBytes), "ssd.write-policy", "all");
                }
                inProcess = InProcessManager.start("orbitkv-replay-", chunks * chunk, chunk, ssd);
                socket = inProcess.unixSocket();
                token = inProcess.token();
                progress.accept(String.format(Locale.ROOT, "replay: in-process Manager, pool %d B = %d pages%s", chunks * chunk,
                        chunks * pagesPerChunk, options.ssd() ? String.format(Locale.ROOT, "; SSD tier %d B = %d extents of %d B + 4 KiB header",
                                options.ssdCapacityBytes(), options.ssdCapacityBytes() / (pageBytes + 4096), pageBytes) : "; DRAM only"));
            } else {
                socket = options.dataDir().resolve("engine.sock");
                token = OrbitKvClient.readToken(options.dataDir().resolve("engine.token"));
                progress.accept("replay: using the Manager at " + socket);
            }
            return replay(options, requests, socket, token, inProcess, progress);
        } finally {
            if (inProcess != null) {
                inProcess.close();
            }
        }
    }

    private static JsonObject replay(Options options, List<TraceRequest> requests, Path socket, String token,
                                     InProcessManager manager, Consumer<String> progress) throws Exception {
        boolean inProcess = manager != null;
        long pageBytes = options.scaledPageBytes();
        InstanceIdentity identity = SimulatedEngine.identity("orbitkv-replay/8b-class",
                String.format(Locale.ROOT, "bytes_per_token=%d;block_tokens=%d;scale=1/%d", options.bytesPerToken(),
                        options.blockTokens(), options.bytesScale()), options.blockTokens(), pageBytes);
        List<SimulatedEngine> engines = new ArrayList<>();
        try {
            for (int i = 0; i < options.engines(); i++) {
                engines.add(SimulatedEngine.register(OrbitKvClient.connectUnix(socket, token), true, identity,
                        options.fullVerifyEvery()));
            }
            StatsReply before = engines.get(0).stats();
            TierCounters tiersBefore = inProcess ? TierCounters.read(manager.manager().registry()) : null;
            long capacityBlocks = before.getPoolBytesTotal() / StorageProxy.slotBytesOf(pageBytes);
            Counters counters = new Counters();
            // One engine on an in-process Manager: the SSD read-backs a request caused are the tier counter's delta
            // around its query. With several engines they interleave, and a Manager reached by --data-dir has no
            // counters here: the model then apportions or leaves out the SSD transfer (and says which).
            java.util.function.LongSupplier ssdPagesRead = inProcess && options.ssd() && options.engines() == 1
                    ? () -> TierCounters.read(manager.manager().registry()).ssdPages() : null;
            // In-process SSD tier: the replay waits while the SSD writer is more than a quarter of the pool behind, so a
            // loaded machine cannot turn the run into one where DRAM evicts pages before they are written (the SSD tier
            // would then hold nothing to hit on). A writer that keeps up never makes it wait; the count is reported.
            SsdWriteBacklog ssdBacklog = inProcess && options.ssd()
                    ? new SsdWriteBacklog(manager.manager().registry(), Math.max(1, capacityBlocks / 4)) : null;
            AtomicInteger next = new AtomicInteger();
            long start = System.nanoTime();
            List<Thread> threads = new ArrayList<>();
            List<Throwable> failures = java.util.Collections.synchronizedList(new ArrayList<>());
            for (SimulatedEngine engine : engines) {
                threads.add(Thread.ofPlatform().name("replay-engine").start(() -> {
                    try {
                        for (int i = next.getAndIncrement(); i < requests.size(); i = next.getAndIncrement()) {
                            replayOne(options, requests.get(i), i, engine, start, counters, ssdPagesRead, ssdBacklog);
                            int done = counters.completed.intValue();
                            if (done % 500 == 0) {
                                progress.accept(String.format(Locale.ROOT, "replay: %d/%d requests, hit ratio so far %.1f%%",
                                        done, requests.size(), 100.0 * counters.hitBlocks.sum() / Math.max(1, counters.referenceBlocks.sum())));
                            }
                        }
                    } catch (Throwable t) {
                        failures.add(t);
                    }
                }));
            }
            for (Thread thread : threads) {
                thread.join();
            }
            long elapsedNanos = System.nanoTime() - start;
            if (!failures.isEmpty()) {
                throw new IllegalStateException("replay engine failed: " + failures.get(0), failures.get(0));
            }
            if (ssdBacklog != null) {
                counters.ssdBacklogWaits.add(ssdBacklog.waits());
                counters.ssdBacklogWaitNanos.add(ssdBacklog.waitedNanos());
            }
            StatsReply after = engines.get(0).stats();
            // Background SSD writes of the last publishes may still be in flight: written/dropped are counted as of now.
            TierCounters tiers = inProcess ? TierCounters.read(manager.manager().registry()).minus(tiersBefore) : null;
            long sessionLeases = 0;
            for (SimulatedEngine engine : engines) {
                sessionLeases += engine.stats().getSessionLeases();
            }
            progress.accept(String.format(Locale.ROOT, "replay: done in %.1f s; simulating offline bounds", elapsedNanos / 1e9));

            // Offline bounds on exactly the replayed requests, LRU at the Manager's capacity and along a curve.
            TreeSet<Long> capacities = new TreeSet<>();
            for (long c : TraceBoundsReport.README_CAPACITIES_BLOCKS) {
                capacities.add(c);
            }
            capacities.add(capacityBlocks);
            if (options.ssd() && inProcess) {
                capacities.add(options.ssdExtents());
                capacities.add(capacityBlocks + options.ssdExtents());
            }
            long unique = requests.stream().flatMapToLong(r -> java.util.Arrays.stream(r.hashIds())).distinct().count();
            for (int i = 1; i <= 20; i++) {
                capacities.add(Math.max(1, unique * i / 16));
            }
            CacheBounds.Bounds bounds = CacheBounds.simulate(requests, capacities.stream().mapToLong(Long::longValue).toArray());
            ManagerLruModel model = new ManagerLruModel(capacityBlocks);
            for (TraceRequest r : requests) {
                model.onRequest(r.hashIds());
            }
            return report(options, requests.size(), counters, elapsedNanos, capacityBlocks, before, after, sessionLeases,
                    bounds, model, inProcess, tiers, progress);
        } finally {
            for (SimulatedEngine engine : engines) {
                engine.close();
            }
        }
    }

    /** Shared by the engine threads. */
    static final class Counters {
        final LongAdder completed = new LongAdder();
        final LongAdder referenceBlocks = new LongAdder();
        final LongAdder hitBlocks = new LongAdder();
        final LongAdder readyQueries = new LongAdder();
        final LongAdder inputTokens = new LongAdder();
        final LongAdder hitTokens = new LongAdder();
        final LongAdder restoredBytes = new LongAdder();
        final LongAdder verifiedBytes = new LongAdder();
        final LongAdder mismatchedPages = new LongAdder();
        final LongAdder publishedPages = new LongAdder();
        final LongAdder publishedBytes = new LongAdder();
        final LongAdder alreadyPresentPages = new LongAdder();
        final LongAdder pendingPolls = new LongAdder();
        final LongAdder queryRefusals = new LongAdder();
        final LongAdder publishRefusals = new LongAdder();
        /** Times the replay waited for the in-process Manager's SSD writer ({@link SsdWriteBacklog}). */
        final LongAdder ssdBacklogWaits = new LongAdder();
        final LongAdder ssdBacklogWaitNanos = new LongAdder();
        final LatencyRecorder timeToReady = LatencyRecorder.concurrent();
        /** Per request, what the TTFT model needs; the model runs after the replay, once the SSD rate is known. */
        final java.util.Queue<RequestCost> costs = new java.util.concurrent.ConcurrentLinkedQueue<>();
    }

    /**
     * One request's measured part and the work the model charges time for. {@code ssdPages} is -1 when the pages read
     * back for this request cannot be told apart (several engines, or a Manager without counters here).
     */
    record RequestCost(long index, long timestampMs, int inputTokens, long timeToReadyNanos, int readyBlocks, long ssdPages) {}

    static void replayOne(Options options, TraceRequest request, int index, SimulatedEngine engine, long start, Counters counters,
                          java.util.function.LongSupplier ssdPagesRead, SsdWriteBacklog ssdBacklog) {
        long arrival;
        if (options.speed() > 0) {
            arrival = start + (long) (request.timestampMs() * 1e6 / options.speed());
            while (System.nanoTime() < arrival) {
                LockSupport.parkNanos(arrival - System.nanoTime());
            }
        } else {
            arrival = System.nanoTime();
        }
        long[] ids = request.hashIds();
        byte[][] hashes = ChainedBlockHashes.chain(ids);
        List<ByteString> chain = new ArrayList<>(hashes.length);
        for (byte[] hash : hashes) {
            chain.add(ByteString.copyFrom(hash));
        }
        SimulatedEngine.PageSeeds seeds = position -> ids[position];
        long ssdBefore = ssdPagesRead == null ? 0 : ssdPagesRead.getAsLong();
        SimulatedEngine.QueryOutcome query = ids.length == 0 ? null : engine.query(chain);
        long settled = System.nanoTime();
        long ssdPages = ssdPagesRead == null ? -1 : ssdPagesRead.getAsLong() - ssdBefore;
        int ready = 0;
        if (query != null) {
            if (query.refusal() != null) {
                counters.queryRefusals.increment();
            }
            counters.pendingPolls.add(query.polls());
            if (query.ready()) {
                ready = query.readyBlocks();
                counters.readyQueries.increment();
                SimulatedEngine.CopyOutcome copy = engine.copyOut(query, Integer.MAX_VALUE, seeds);
                counters.restoredBytes.add(copy.bytes());
                counters.verifiedBytes.add(copy.verifiedBytes());
                counters.mismatchedPages.add(copy.mismatchedPages());
                engine.release(query);
            }
        }
        long timeToReady = settled - arrival;
        long hitTokens = Math.min((long) ready * options.blockTokens(), request.inputLength());
        counters.timeToReady.recordNanos(timeToReady);
        counters.costs.add(new RequestCost(index, request.timestampMs(), request.inputLength(), timeToReady, ready, ssdPages));
        counters.referenceBlocks.add(ids.length);
        counters.hitBlocks.add(ready);
        counters.inputTokens.add(request.inputLength());
        counters.hitTokens.add(hitTokens);
        SimulatedEngine.PublishOutcome published = engine.publish(chain, ready, seeds);
        if (published.refusal() != null) {
            counters.publishRefusals.increment();
        }
        counters.publishedPages.add(published.sealedPages());
        if (ssdBacklog != null) {
            ssdBacklog.bound(counters.publishedPages.sum());
        }
        counters.publishedBytes.add(published.sealedBytes());
        counters.alreadyPresentPages.add(published.alreadyPresentPages());
        counters.completed.increment();
    }

    private static JsonObject report(Options options, int requestCount, Counters c, long elapsedNanos, long capacityBlocks,
                                     StatsReply before, StatsReply after, long sessionLeases, CacheBounds.Bounds bounds,
                                     ManagerLruModel model, boolean inProcess, TierCounters tiers,
                                     Consumer<String> progress) throws Exception {
        long references = c.referenceBlocks.sum();
        double measured = references == 0 ? 0.0 : (double) c.hitBlocks.sum() / references;
        CacheBounds.HitRatio lru = bounds.lruAt(capacityBlocks);
        boolean tiered = options.ssd() && inProcess;
        // The capacity the measured hits are judged against: what the Manager can hit on (DRAM, plus SSD when on).
        long effectiveCapacity = tiered ? capacityBlocks + options.ssdExtents() : capacityBlocks;
        CacheBounds.HitRatio lruEffective = bounds.lruAt(effectiveCapacity);
        LatencySummary ttr = c.timeToReady.summary();
        TtftModel ttftModel = TtftModel.of(options, c, tiers, inProcess);
        LatencySummary ttft = ttftModel.result().ttft();
        LatencySummary ttftNoCache = ttftModel.noCache().ttft();
        long logicalPage = options.logicalPageBytes();
        long scaledPage = options.scaledPageBytes();
        JsonArray lruCurve = new JsonArray();
        for (CacheBounds.HitRatio point : bounds.lru()) {
            lruCurve.add(new JsonObject().put("capacity_blocks", point.capacityBlocks()).put("hit_ratio", point.ratio())
                    .put("hit_ratio_percent", point.percentRounded()));
        }
        JsonObject readme = new JsonObject();
        for (long cap : TraceBoundsReport.README_CAPACITIES_BLOCKS) {
            readme.put(Long.toString(cap), bounds.lruAt(cap).percentRounded());
        }
        long hitBlocks = c.hitBlocks.sum();
        String explanation = String.format(Locale.ROOT,
                "LRU touches every block of a request; the Manager refreshes only the leading resident run (the query's pins) "
                        + "and inserts absent blocks, while %d blocks resident behind a gap came back ALREADY_PRESENT and were "
                        + "not refreshed. The offline model of exactly that rule predicts %d hit blocks (%.2f%%); the Manager "
                        + "measured %d (%.2f%%)%s.", c.alreadyPresentPages.sum(), model.hits(), 100 * model.hitRatio(),
                hitBlocks, 100 * measured,
                options.engines() > 1 ? "; with " + options.engines() + " engines requests also interleave, which LRU's "
                        + "one-at-a-time order does not model" : (model.hits() == hitBlocks ? ": identical" : ": the remainder "
                        + "comes from pinned or in-flight pages, or a Manager that held other data"));
        if (tiered) {
            explanation += String.format(Locale.ROOT, " With the SSD tier on, blocks evicted from DRAM but still on SSD are "
                    + "read back (PENDING, then READY) and count as hits, so the measured hit ratio is compared with LRU at the "
                    + "DRAM plus SSD capacity (%d + %d blocks: %.2f%%) rather than with the DRAM-only model above. With write "
                    + "policy all the tiers are inclusive (a page in DRAM is on SSD too) and the SSD ring reuses its oldest "
                    + "extents first, so DRAM + SSD overstates the distinct capacity; LRU at the SSD capacity alone is %.2f%%. "
                    + "SSD writes dropped under load (a page lost from both tiers once DRAM evicts it) keep the measurement "
                    + "below the bound.", capacityBlocks, options.ssdExtents(), 100 * lruEffective.ratio(),
                    100 * bounds.lruAt(options.ssdExtents()).ratio());
        }
        JsonObject byTier = hitsByTier(options, hitBlocks, references, tiers);
        BenchReport.Builder report = BenchReport.builder(BENCH_NAME)
                .figure("requests", requestCount)
                .figure("seconds", elapsedNanos / 1e9)
                .figure("requests_per_second", requestCount * 1e9 / elapsedNanos)
                .figure("block_references", references)
                .figure("hit_blocks", hitBlocks)
                .figure("hit_ratio", measured)
                .figure("hit_ratio_percent", Math.round(measured * 1000) / 10.0)
                .figure("hits_by_tier", byTier)
                .figure("ready_queries", c.readyQueries.sum())
                .figure("input_tokens", c.inputTokens.sum())
                .figure("hit_tokens", c.hitTokens.sum())
                .figure("token_hit_ratio", c.inputTokens.sum() == 0 ? 0.0 : (double) c.hitTokens.sum() / c.inputTokens.sum())
                .figure("restored_scaled_bytes", c.restoredBytes.sum())
                .figure("published_pages", c.publishedPages.sum())
                .figure("published_scaled_bytes", c.publishedBytes.sum())
                .figure("already_present_pages", c.alreadyPresentPages.sum())
                .figure("verified_bytes", c.verifiedBytes.sum())
                .figure("mismatched_pages", c.mismatchedPages.sum())
                .figure("ssd_write_backlog_waits", c.ssdBacklogWaits.sum())
                .figure("ssd_write_backlog_wait_ms", c.ssdBacklogWaitNanos.sum() / 1e6)
                .figure("pending_polls", c.pendingPolls.sum())
                .figure("query_refusals", c.queryRefusals.sum())
                .figure("publish_refusals", c.publishRefusals.sum())
                .figure("evictions", after.getEvictions() - before.getEvictions())
                .figure("time_to_ready", ttr.toJson())
                .figure("active_leases_at_end", after.getActiveLeases())
                .figure("session_leases_at_end", sessionLeases)
                .figure("manager_semantics_model", new JsonObject().put("hit_blocks", model.hits())
                        .put("hit_ratio", model.hitRatio()).put("resident_behind_gap_blocks", model.residentBehindGap())
                        .put("capacity_blocks", capacityBlocks).put("tiers", "DRAM only"))
                .figure("difference_explained", explanation)
                .baseline("infinite_cache_hit_ratio", bounds.infinite().ratio())
                .baseline("infinite_cache_hit_ratio_percent", bounds.infinite().percentRounded())
                .baseline("infinite_cache_hit_blocks", bounds.infinite().hitBlocks())
                .baseline("unique_blocks", bounds.uniqueBlocks())
                .baseline("lru_at_manager_capacity", lruJson(effectiveCapacity, lruEffective)
                        .put("tiers", tiered ? "DRAM + SSD" : "DRAM"))
                .baseline("lru_at_dram_capacity", lruJson(capacityBlocks, lru))
                .baseline("lru_at_readme_capacities_percent", readme)
                .baseline("lru_curve", lruCurve)
                .ratio("hit_ratio_over_infinite", bounds.infinite().ratio() == 0 ? 0.0 : measured / bounds.infinite().ratio())
                .config("trace", options.trace().toString())
                .config("limit", options.limit())
                .config("speed", options.speed())
                .config("bytes_per_token", options.bytesPerToken())
                .config("block_tokens", options.blockTokens())
                .config("bytes_scale", "1/" + options.bytesScale())
                .config("logical_page_bytes", logicalPage)
                .config("scaled_page_bytes", scaledPage)
                .config("manager", inProcess ? "in-process" : "existing at " + options.dataDir())
                .config("ssd_capacity_bytes", options.ssdCapacityBytes())
                .config("ssd_tier", tiered ? "on: " + options.ssdExtents() + " extents; hits are judged against LRU at the DRAM "
                        + "plus SSD capacity" : "off (DRAM only)")
                .config("pool_bytes", before.getPoolBytesTotal())
                .config("pool_capacity_blocks", capacityBlocks)
                .config("effective_capacity_blocks", effectiveCapacity)
                .config("engines", options.engines())
                .config("verification", String.format(Locale.ROOT, "sampled (%.1f %% of restored bytes): the first %d bytes of "
                        + "every restored page, the whole page for 1 in %d", c.restoredBytes.sum() == 0 ? 0.0
                        : 100.0 * c.verifiedBytes.sum() / c.restoredBytes.sum(), SimulatedEngine.VERIFY_PREFIX_BYTES,
                        options.fullVerifyEvery()))
                .machine(MachineInfo.probe());
        if (tiered) {
            report.baseline("lru_at_dram_plus_ssd_capacity", lruJson(effectiveCapacity, lruEffective))
                    .baseline("lru_at_ssd_capacity", lruJson(options.ssdExtents(), bounds.lruAt(options.ssdExtents())));
            if (lru.ratio() > 0) {
                report.ratio("hit_ratio_over_dram_lru", measured / lru.ratio());
            }
        }
        if (lruEffective.ratio() > 0) {
            report.topLevelRatio("hit_ratio_over_lru", measured / lruEffective.ratio());
        }
        long restoredLogical = c.restoredBytes.sum() / scaledPage * logicalPage;
        report.model("logical_bytes", new JsonObject()
                        .put("restored", restoredLogical)
                        .put("published", c.publishedPages.sum() * logicalPage)
                        .put("ssd_read", tiers == null ? 0 : tiers.ssdPages() * logicalPage)
                        .put("how", "scaled bytes actually moved x bytes_scale (" + options.bytesScale() + "), i.e. pages x "
                                + logicalPage + " logical bytes; nothing of this size was moved"))
                .model("ttft", ttft.toJson())
                .model("ttft_parts", ttftModel.result().toJson())
                .model("ttft_no_cache", ttftNoCache.toJson())
                .model("ttft_p50_over_no_cache", ttftNoCache.p50Nanos() == 0 ? 0.0 : (double) ttft.p50Nanos() / ttftNoCache.p50Nanos())
                .model("ttft_formula", ArrivalModel.describe(ttftModel.settings()).getString("formula"))
                .model("time", ArrivalModel.describe(ttftModel.settings()).getString("time"))
                .model("rates", ttftModel.settings().rates().toJson())
                .model("transfer", ttftModel.transferJson())
                .model("assumptions", ArrivalModel.describe(ttftModel.settings()).getJsonArray("assumptions")
                        .copy().add("no-cache baseline: the same arrivals and engines with no hit"));
        report.check(c.mismatchedPages.sum() == 0, c.mismatchedPages.sum() + " restored pages differ from what was published")
                .check(sessionLeases == 0, sessionLeases + " leases of the replaying engines still active at the end");
        BenchReport built = report.build();
        if (options.out() != null) {
            built.writeTo(options.out(), REPORT_FILE);
            plot(options.out(), bounds, capacityBlocks, tiered ? options.ssdExtents() : 0, measured, model, ttr, ttft,
                    options.trace().getFileName().toString());
            progress.accept("replay: wrote " + options.out().resolve(REPORT_FILE) + " and PNGs");
        }
        if (tiered && tiers != null) {
            progress.accept(String.format(Locale.ROOT,
                    "replay: hits by tier: DRAM %d blocks, SSD %d blocks (%d scaled bytes read back); SSD writes %d committed, %d dropped",
                    byTier.getJsonObject("dram").getLong("hit_blocks"), tiers.ssdPages(), tiers.ssdBytes(),
                    tiers.ssdWritesCommitted(), tiers.ssdWritesDropped()));
        }
        progress.accept(String.format(Locale.ROOT,
                "replay: hit ratio %.2f%% (LRU at %d blocks%s %.2f%%, infinite %.2f%%); time-to-ready p50 %.0f µs p99 %.0f µs; "
                        + "modelled TTFT from arrival p50 %.1f ms p99 %.1f ms (no cache p50 %.1f ms p99 %.1f ms)",
                100 * measured, effectiveCapacity, tiered ? " = DRAM + SSD" : "", 100 * lruEffective.ratio(),
                100 * bounds.infinite().ratio(), ttr.p50Nanos() / 1e3, ttr.p99Nanos() / 1e3, ttft.p50Nanos() / 1e6,
                ttft.p99Nanos() / 1e6, ttftNoCache.p50Nanos() / 1e6, ttftNoCache.p99Nanos() / 1e6));
        return built.toJson();
    }

    private static JsonObject lruJson(long capacityBlocks, CacheBounds.HitRatio ratio) {
        return new JsonObject().put("capacity_blocks", capacityBlocks).put("hit_blocks", ratio.hitBlocks())
                .put("hit_ratio", ratio.ratio()).put("hit_ratio_percent", ratio.percentRounded());
    }

    /**
     * Modelled TTFT from arrival ({@link ArrivalModel}) over the replay's requests in trace order, and the same with no
     * hit. The SSD term is exact per request with one engine on an in-process Manager; with several engines it
     * apportions the run's SSD pages by each request's hit blocks; without the tier's counters it is left out, and
     * {@link #transferJson} says which. The SSD rate is stated or given, never taken from one scaled read.
     */
    record TtftModel(ArrivalModel.Result result, ArrivalModel.Result noCache, ArrivalModel.Settings settings, String ssdTerm) {
        static TtftModel of(Options options, Counters c, TierCounters tiers, boolean inProcess) {
            double ssdRate = options.ssdReadBytesPerSecond() > 0 ? options.ssdReadBytesPerSecond()
                    : AblationReplay.DEFAULT_SSD_READ_BYTES_PER_SECOND;
            String source = options.ssdReadBytesPerSecond() > 0 ? "given (--ssd-read-bytes-per-second)"
                    : "stated: bench ssd's store read rate on this VM, 1,275 MB/s (perf/README, quiet, median of 3)";
            ArrivalModel.Rates rates = new ArrivalModel.Rates(options.prefillTokensPerSecond(), ssdRate, source,
                    AblationReplay.DEFAULT_PEER_READ_BYTES_PER_SECOND, "no peer tier in this replay",
                    options.hostToDeviceBytesPerSecond(),
                    options.hostToDeviceBytesPerSecond() == Options.DEFAULT_H2D_BYTES_PER_SECOND
                            ? "stated: PCIe Gen4 x16 at about 80 % of 32 GB/s (--h2d-bytes-per-second)" : "given (--h2d-bytes-per-second)");
            ArrivalModel.Settings settings = new ArrivalModel.Settings(1, options.engines(), options.speed(),
                    options.blockTokens(), options.logicalPageBytes(), -1, rates);
            long ssdPages = tiers == null ? 0 : tiers.ssdPages();
            long hitBlocks = c.hitBlocks.sum();
            boolean perRequest = c.costs.stream().allMatch(cost -> cost.ssdPages() >= 0);
            String term;
            if (!inProcess) {
                term = "left out: the Manager reached by --data-dir may read pages back from SSD, but its tier counters "
                        + "are not read here";
            } else if (!options.ssd() || ssdPages == 0) {
                term = "no pages were read back from SSD: the SSD term is zero";
            } else if (perRequest) {
                term = "included: each request's own SSD read-backs (tier counter delta around its query, one engine)";
            } else {
                term = "included, apportioned: the run's " + ssdPages + " SSD pages spread over requests by their hit blocks "
                        + "(several engines interleave, so a request's own read-backs cannot be told apart)";
            }
            boolean includeSsd = term.startsWith("included");
            List<RequestCost> ordered = c.costs.stream().sorted(java.util.Comparator.comparingLong(RequestCost::index)).toList();
            List<ArrivalModel.Served> served = new ArrayList<>(ordered.size());
            List<ArrivalModel.Served> none = new ArrayList<>(ordered.size());
            for (RequestCost cost : ordered) {
                long pages = !includeSsd ? 0 : cost.ssdPages() >= 0 ? cost.ssdPages()
                        : Math.round((double) ssdPages * cost.readyBlocks() / Math.max(1, hitBlocks));
                served.add(new ArrivalModel.Served(cost.timestampMs(), cost.inputTokens(), 0, cost.readyBlocks(),
                        Math.min(pages, cost.readyBlocks()), 0, cost.timeToReadyNanos()));
                none.add(new ArrivalModel.Served(cost.timestampMs(), cost.inputTokens(), 0, 0, 0, 0, 0));
            }
            return new TtftModel(ArrivalModel.run(served, settings), ArrivalModel.run(none, settings), settings, term);
        }

        JsonObject transferJson() {
            return new JsonObject().put("host_to_device", "included: every hit page's logical bytes")
                    .put("ssd_read", ssdTerm);
        }
    }

    /**
     * Hits split by the tier that served them. With an in-process Manager the split comes from its tier counters:
     * SSD = pages read back from SSD into the pool; DRAM = hit blocks minus those. A Manager reached by --data-dir has
     * no counters here, so its hits are all reported under DRAM.
     */
    static JsonObject hitsByTier(Options options, long hitBlocks, long references, TierCounters tiers) {
        long ssdHits = options.ssd() && tiers != null ? tiers.ssdPages() : 0;
        long dramHits = hitBlocks - ssdHits;
        JsonObject dram = new JsonObject().put("available", true).put("hit_blocks", dramHits)
                .put("hit_ratio", references == 0 ? 0.0 : (double) dramHits / references);
        JsonObject ssd;
        if (options.ssd() && tiers != null) {
            ssd = new JsonObject().put("available", true).put("hit_blocks", ssdHits)
                    .put("hit_ratio", references == 0 ? 0.0 : (double) ssdHits / references)
                    .put("read_scaled_bytes", tiers.ssdBytes())
                    .put("write_scaled_bytes", tiers.ssdWriteBytes())
                    .put("writes_committed", tiers.ssdWritesCommitted())
                    .put("writes_dropped", tiers.ssdWritesDropped())
                    .put("writes_dropped_by_reason", new JsonObject(new java.util.LinkedHashMap<>(tiers.droppedByReason())))
                    .put("keys_at_end", tiers.ssdKeys())
                    .put("capacity_bytes", options.ssdCapacityBytes());
        } else {
            ssd = new JsonObject().put("available", false).put("hit_blocks", 0).put("reason", options.dataDir() != null
                    ? "existing Manager: its tier counters are not read by the replayer (see its /metrics)"
                    : "DRAM-only run (pass --ssd-capacity=SIZE for the SSD tier)");
        }
        JsonObject out = new JsonObject().put("dram", dram).put("ssd", ssd)
                .put("peer", new JsonObject().put("available", false).put("hit_blocks", 0).put("reason", "no peer tier in this build"));
        if (tiers != null) {
            out.put("manager_tier_counters", tiers.toJson());
        }
        return out;
    }

    /**
     * The hit-ratio plot: the offline LRU curve, the infinite bound, and the Manager's measured point at the capacity
     * it can hit on: its DRAM pool, or DRAM plus SSD with the tier on (where LRU at DRAM alone is marked too).
     */
    private static void plot(Path out, CacheBounds.Bounds bounds, long capacityBlocks, long ssdExtents, double measured,
                             ManagerLruModel model, LatencySummary ttr, LatencySummary ttft, String traceName) throws Exception {
        List<CacheBounds.HitRatio> lru = bounds.lru();
        double[] x = new double[lru.size() + 1];
        double[] y = new double[lru.size() + 1];
        for (int i = 0; i < lru.size(); i++) {
            x[i + 1] = lru.get(i).capacityBlocks();
            y[i + 1] = lru.get(i).ratio();
        }
        double maxX = x[x.length - 1];
        long effective = capacityBlocks + ssdExtents;
        List<Plots.Series> series = new ArrayList<>();
        series.add(Plots.Series.measured("LRU (offline)", x, y));
        series.add(Plots.Series.horizontal(String.format(Locale.ROOT, "infinite cache (%.1f%%)", 100 * bounds.infinite().ratio()),
                bounds.infinite().ratio(), 0, maxX));
        if (ssdExtents > 0) {
            double dramLru = bounds.lruAt(capacityBlocks).ratio();
            series.add(Plots.Series.measured(String.format(Locale.ROOT, "LRU at the %d-block DRAM pool alone (%.2f%%)",
                    capacityBlocks, 100 * dramLru), new double[] {capacityBlocks, capacityBlocks}, new double[] {0, dramLru}));
            // A bar up to the measured point: a lone marker would hide under the LRU curve's marker when they agree.
            series.add(Plots.Series.measured(String.format(Locale.ROOT,
                            "Manager measured: %.2f%% at DRAM + SSD = %d + %d blocks (LRU there %.2f%%)", 100 * measured,
                            capacityBlocks, ssdExtents, 100 * bounds.lruAt(effective).ratio()),
                    new double[] {effective, effective}, new double[] {0, measured}));
        } else {
            series.add(Plots.Series.measured(String.format(Locale.ROOT, "Manager measured: %.2f%% at its %d-block pool (model %.2f%%)",
                            100 * measured, capacityBlocks, 100 * model.hitRatio()),
                    new double[] {capacityBlocks, capacityBlocks}, new double[] {0, measured}));
        }
        Plots.hitRatioVsCapacity(out.resolve(HIT_RATIO_PLOT), "Replay hit ratio vs capacity: " + traceName, series,
                Plots.DEFAULT_WIDTH, Plots.DEFAULT_HEIGHT);
        Plots.latencyCdf(out.resolve(LATENCY_PLOT), "Replay: time-to-ready (measured) and TTFT (modelled): " + traceName,
                List.of(Plots.Series.latencyCdf("time-to-ready (measured)", ttr.cdf()),
                        Plots.Series.latencyCdf("TTFT (modelled, see model.assumptions)", ttft.cdf())),
                Plots.DEFAULT_WIDTH, Plots.DEFAULT_HEIGHT);
    }
}
