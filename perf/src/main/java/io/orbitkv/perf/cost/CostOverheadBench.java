package io.orbitkv.perf.cost;

import com.google.protobuf.ByteString;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.sim.SyntheticKv;
import io.orbitkv.cost.CostProxy;
import io.orbitkv.perf.BenchArgs;
import io.orbitkv.perf.engine.InProcessManager;
import io.orbitkv.perf.engine.SsdWriteBacklog;
import io.orbitkv.perf.engine.TierCounters;
import io.orbitkv.perf.report.BenchReport;
import io.orbitkv.perf.report.Bootstrap;
import io.orbitkv.perf.report.LatencyRecorder;
import io.orbitkv.perf.report.LatencySummary;
import io.orbitkv.protocol.engine.*;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

/**
 * {@code orbitkv bench cost-overhead}: the price of cost observation. One Manager (SSD tier on) runs the same workload
 * in alternating rounds with observation switched off and on at run time (off, on, on, off, ...): each request
 * publishes one new page (the engine's prefill; the Manager copies it to SSD staging and writes it to SSD in the
 * background), queries its prefix plus that page, copies the leased pages out and releases; one request in
 * {@code --requery-every} also re-queries the prefix with the page of a request {@code --requery-distance} earlier,
 * long evicted from DRAM but still on SSD, so the Manager reads it back (PENDING, then READY) and SSD reads are observed
 * too.
 *
 * <p>Design note — what a side's clock covers: a round's clock stops only once the Manager has finished the work the
 * round caused: every SSD write it offered is committed or dropped (the SSD counters account for every page the round
 * sealed) and the cost role's queue is empty ({@link CostProxy#drained}). Otherwise observation work queued behind the
 * clock would be charged to nobody, or to the next round. The bench's own accounting afterwards (registry walks for the
 * checks) is outside the clock, except the wait for an observation reported after its operation's counter.
 *
 * <p>Design note — the checks: off rounds must observe nothing (no operation, shadow decision or dropped update); on
 * rounds must observe exactly what the round did, path by path: one host-ready route per READY answer, one SSD read per
 * page read back, and per committed SSD write its staging copy, the write and the save route, plus one shadow decision
 * per save and per read back. A mismatch fails the run.
 *
 * <p>Reported: per round the paired regressions {@code 1 - on/off} of requests/s and {@code on/off - 1} of the round's
 * p50; their medians and the upper end of a 95 % percentile-bootstrap interval of each median ({@link Bootstrap});
 * and process CPU time per request of each side (the in-process Manager and the engine together), summed over all
 * its rounds because the process CPU clock ticks in 10 ms. The run passes when the upper
 * ends for throughput and p50 are at most {@code --budget} (0.03).
 */
public final class CostOverheadBench {
    private CostOverheadBench() {}

    record Settings(int rounds, int requestsPerRound, int prefixBlocks, long pageBytes, long poolBytes,
                    long ssdCapacityBytes, int requeryEvery, int requeryDistance, int warmupRequests, double budget,
                    int resamples, long seed, boolean sideLog) {}

    /** One side: observation off or on. */
    private static final class Side {
        final String name;
        final boolean observe;
        final LatencyRecorder latency = LatencyRecorder.singleWriter();
        final double[] throughput;
        final double[] roundP50;
        /** Process CPU time and requests summed over the side's rounds (the CPU clock ticks in 10 ms on Linux). */
        long cpuNanos;
        long requests;
        final Map<String, Long> observedByPath = new TreeMap<>();
        long observations;
        long shadowDecisions;
        long droppedUpdates;
        long ssdReads;
        long ssdWritesCommitted;
        long readyAnswers;
        long routeSamples;
        final List<String> mismatches = new ArrayList<>();

        Side(String name, boolean observe, int rounds) {
            this.name = name;
            this.observe = observe;
            this.throughput = new double[rounds];
            this.roundP50 = new double[rounds];
        }
    }

    public static JsonObject run(BenchArgs a) {
        Settings s = new Settings(
                a.integer("rounds", 160),
                a.integer("requests", 100),
                a.integer("prefix-blocks", 16),
                a.bytes("page-bytes", "64KiB"),
                a.bytes("pool-size", "32MiB"),
                a.bytes("ssd-capacity", "512MiB"),
                a.integer("requery-every", 10),
                a.integer("requery-distance", 1500),
                a.integer("warmup-requests", 2000),
                a.decimal("budget", 0.03),
                a.integer("resamples", 10_000),
                a.longValue("seed", 1),
                a.flag("side-log", false));
        a.requireAllUsed();
        long poolPages = s.poolBytes() / s.pageBytes();
        long ssdExtents = s.ssdCapacityBytes() / (s.pageBytes() + 4096);
        if (s.rounds() < 2 || s.requestsPerRound() < 1 || s.prefixBlocks() < 1 || s.requeryEvery() < 1 || s.resamples() < 1) {
            throw new IllegalArgumentException("--rounds >= 2; --requests, --prefix-blocks, --requery-every, --resamples >= 1");
        }
        if (s.requeryDistance() <= poolPages || s.requeryDistance() >= ssdExtents / 2) {
            throw new IllegalArgumentException("--requery-distance (" + s.requeryDistance() + " requests) must exceed the pool's "
                    + poolPages + " pages (so the page has left DRAM) and stay under half the SSD's " + ssdExtents
                    + " extents (so it is still on SSD)");
        }
        if (s.warmupRequests() < s.requeryDistance()) {
            throw new IllegalArgumentException("--warmup-requests must be at least --requery-distance");
        }
        try {
            return measure(s);
        } catch (RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new IllegalStateException("cost-overhead bench failed: " + e.getMessage(), e);
        }
    }

    private static JsonObject measure(Settings s) throws Exception {
        Map<String, String> settings = Map.of("ssd.enabled", "true", "ssd.capacity", Long.toString(s.ssdCapacityBytes()),
                "ssd.extent", Long.toString(s.pageBytes()), "ssd.write-policy", "all", "cost.observations", "false");
        try (InProcessManager inProcess = InProcessManager.start("orbitkv-bench-cost-", s.poolBytes(), 2L << 20, settings);
             OrbitKvClient client = OrbitKvClient.connectUnix(inProcess.unixSocket(), inProcess.token());
             Arena arena = Arena.ofConfined()) {
            CostProxy cost = inProcess.manager().cost();
            MeterRegistry registry = inProcess.manager().registry();
            InstanceIdentity identity = InstanceIdentity.newBuilder().setModelFingerprint("bench/cost")
                    .setRepresentation(Representation.RAW).setLayout("bench").setGeometry("bench").setPageSizeTokens(16)
                    .setTpSize(1).setPpSize(1)
                    .addGroups(GroupSpec.newBuilder().setGroupId(0).setKind(GroupKind.FULL_ATTENTION).setBytesPerPage(s.pageBytes()))
                    .build();
            try (EngineSession session = client.register(identity, InstanceRole.PREFILL_AND_DECODE).await()) {
                MemorySegment engine = arena.allocate(s.pageBytes(), 4096);
                SyntheticKv.fill(engine, 3, 0, 0);
                Workload workload = new Workload(session, engine, SyntheticKv.chain(77 + s.seed(), s.prefixBlocks()),
                        s.requeryEvery(), s.requeryDistance(), 1_000_000L * s.seed(),
                        new SsdWriteBacklog(registry, Math.max(1, s.poolBytes() / s.pageBytes() / 4)));
                workload.publish(workload.prefix);
                Side off = new Side("off", false, s.rounds());
                Side on = new Side("on", true, s.rounds());
                // Warm-up (not recorded): JIT for both settings, DRAM full and evicting, SSD holding the re-queried pages.
                for (int w = 0; w < s.warmupRequests(); w++) {
                    cost.setObservationsEnabled(w % 200 >= 100);
                    workload.request();
                }
                cost.setObservationsEnabled(false);
                workload.ssdBacklog.drain(workload.sealedPages, Duration.ofSeconds(30));
                cost.drained().await(30, TimeUnit.SECONDS);
                System.err.printf("cost-overhead: warm-up %d requests; pool %d pages, SSD %d extents, re-query distance %d%n",
                        s.warmupRequests(), s.poolBytes() / s.pageBytes(), s.ssdCapacityBytes() / (s.pageBytes() + 4096),
                        s.requeryDistance());
                for (int r = 0; r < s.rounds(); r++) {
                    Side first = r % 2 == 0 ? off : on;
                    Side second = first == off ? on : off;
                    for (Side side : List.of(first, second)) {
                        round(side, r, s, workload, cost, registry);
                    }
                    System.err.printf("cost-overhead round %d/%d: off %.0f req/s, on %.0f req/s%n", r + 1, s.rounds(),
                            off.throughput[r], on.throughput[r]);
                }
                cost.setObservationsEnabled(false);
                StatsReply stats = session.stats().await();
                return report(s, off, on, stats.getActiveLeases());
            }
        }
    }

    /** The workload's requests; not thread-safe (one engine). */
    private static final class Workload {
        final EngineSession session;
        final MemorySegment engine;
        final List<ByteString> prefix;
        final int requeryEvery;
        final int requeryDistance;
        final long tailSeedBase;
        final SsdWriteBacklog ssdBacklog;
        long next;
        long sealedPages;
        long readyAnswers;

        Workload(EngineSession session, MemorySegment engine, List<ByteString> prefix, int requeryEvery,
                 int requeryDistance, long tailSeedBase, SsdWriteBacklog ssdBacklog) {
            this.ssdBacklog = ssdBacklog;
            this.session = session;
            this.engine = engine;
            this.prefix = prefix;
            this.requeryEvery = requeryEvery;
            this.requeryDistance = requeryDistance;
            this.tailSeedBase = tailSeedBase;
        }

        ByteString tail(long n) {
            return SyntheticKv.chain(tailSeedBase + n, 1).get(0);
        }

        /** Publish a new page, query prefix + page, copy out, release; now and then re-query an evicted page. */
        void request() {
            long n = next++;
            ByteString tail = tail(n);
            publish(List.of(tail));
            boundSsdBacklog();
            queryCopyRelease(tail);
            if (n % requeryEvery == requeryEvery / 2 && n >= requeryDistance) {
                queryCopyRelease(tail(n - requeryDistance));
            }
        }

        /**
         * Keeps the SSD write backlog under a quarter of the pool ({@link SsdWriteBacklog}: otherwise a loaded machine
         * lets DRAM evict pages before the writer copies them and the re-queried pages come back from no tier). Both
         * sides wait alike; checked every 16 requests.
         */
        void boundSsdBacklog() {
            if (next % 16 == 0) {
                ssdBacklog.bound(sealedPages);
            }
        }

        void queryCopyRelease(ByteString tail) {
            List<ByteString> chain = new ArrayList<>(prefix.size() + 1);
            chain.addAll(prefix);
            chain.add(tail);
            QueryReply reply = session.query(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(chain).build())).await();
            if (reply.getStatus() != QueryStatus.READY) {
                throw new IllegalStateException("expected READY for the prefix, got " + reply.getStatus());
            }
            readyAnswers++;
            for (LeasedPage page : reply.getLease().getPagesList()) {
                engine.copyFrom(session.slot(page.getSlot()));
            }
            session.release(reply.getLease().getLeaseId()).await();
        }

        void publish(List<ByteString> hashes) {
            AllocatePublishReply allocated = session.allocate(hashes.stream()
                    .map(h -> PageKey.newBuilder().setGroupId(0).setBlockHash(h).build()).toList()).await();
            boolean any = false;
            for (PublishSlot slot : allocated.getSlotsList()) {
                if (slot.getStatus() == SlotStatus.ALLOCATED) {
                    session.slot(slot.getSlot()).copyFrom(engine);
                    any = true;
                }
            }
            if (any) {
                sealedPages += session.seal(allocated.getPublishId(), List.of()).await().getSealedPages();
            }
        }
    }

    /** One side of one round: its clock runs until the round's SSD writes and observations are all done. */
    private static void round(Side side, int r, Settings s, Workload workload, CostProxy cost, MeterRegistry registry)
            throws Exception {
        cost.setObservationsEnabled(side.observe);
        ObservationCounts before = ObservationCounts.read(registry);
        TierCounters tiersBefore = TierCounters.read(registry);
        long readyBefore = workload.readyAnswers;
        double routeSamplesBefore = routeSamples(registry);
        long[] latencies = new long[s.requestsPerRound()];
        // Every page sealed before this round has settled (the previous round, or the warm-up, waited for it).
        SettledWrites settled = new SettledWrites(registry);
        long sealedBefore = workload.sealedPages;
        long cpuStart = processCpuNanos();
        long startMillis = System.currentTimeMillis();
        long start = System.nanoTime();
        for (int i = 0; i < latencies.length; i++) {
            long t0 = System.nanoTime();
            workload.request();
            latencies[i] = System.nanoTime() - t0;
        }
        settled.await(workload.sealedPages - sealedBefore, Duration.ofSeconds(30));
        cost.drained().await(30, TimeUnit.SECONDS);
        // The Manager's work for the round is done: the bench's own accounting below (registry walks) is outside
        // the clock, unless an observation is still missing, whose wait then counts (see below).
        long end = System.nanoTime();
        long cpuEnd = processCpuNanos();
        long endMillis = System.currentTimeMillis();
        Expected expected = Expected.of(TierCounters.read(registry).minus(tiersBefore), workload.readyAnswers - readyBefore,
                (long) (routeSamples(registry) - routeSamplesBefore), side.observe);
        ObservationCounts observed = ObservationCounts.read(registry).minus(before);
        // An observation may be reported a moment after the counter that announced its operation: wait for it.
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (side.observe && observed.total() + observed.dropped() < expected.total() && System.nanoTime() < deadline) {
            cost.drained().await(30, TimeUnit.SECONDS);
            observed = ObservationCounts.read(registry).minus(before);
            end = System.nanoTime();
            cpuEnd = processCpuNanos();
            endMillis = System.currentTimeMillis();
        }
        long elapsed = end - start;
        long cpu = cpuEnd - cpuStart;
        if (s.sideLog()) {
            // Wall-clock window of the side's clock, to split a profile (JFR, perf) of the run into its two sides.
            System.err.printf("cost-overhead side %s round %d window %d %d%n", side.name, r + 1, startMillis, endMillis);
        }
        side.throughput[r] = latencies.length * 1e9 / elapsed;
        side.cpuNanos += cpu;
        side.requests += latencies.length;
        for (long latency : latencies) {
            side.latency.recordNanos(latency);
        }
        Arrays.sort(latencies);
        side.roundP50[r] = latencies[latencies.length / 2];
        side.observations += observed.operations();
        side.shadowDecisions += observed.shadows();
        side.droppedUpdates += observed.dropped();
        side.ssdReads += expected.ssdReads();
        side.ssdWritesCommitted += expected.ssdWrites();
        side.readyAnswers += expected.readyAnswers();
        side.routeSamples += expected.routeSamples();
        observed.byPath().forEach((path, n) -> side.observedByPath.merge(path, n, Long::sum));
        String mismatch = expected.mismatch(observed);
        if (mismatch != null && side.mismatches.size() < 5) {
            side.mismatches.add("round " + (r + 1) + " (" + side.name + "): " + mismatch);
        }
    }

    /**
     * Waits, inside a side's clock, until the SSD writes of the pages a round sealed have a terminal outcome (committed
     * or dropped). It polls meters it looked up once (the dropped ones again every {@value #RESCAN_POLLS} polls, since
     * a new drop reason registers a new counter): walking the registry on every poll, as a workload's backlog bound
     * does, took a good part of a core from the 2-core machine's Manager while it finished the very writes the clock
     * waits for, and more of it on the side whose writes finish later.
     */
    static final class SettledWrites {
        static final int RESCAN_POLLS = 64;
        private final MeterRegistry registry;
        private final double atStart;
        private List<Counter> counters;

        SettledWrites(MeterRegistry registry) {
            this.registry = registry;
            this.counters = lookUp();
            this.atStart = settled();
        }

        /**
         * The committed counter and every dropped counter registered now. One registered later (a drop reason seen
         * for the first time) counts only drops after it registered, all of them this round's: every page sealed
         * before the round had settled, so it held none then.
         */
        private List<Counter> lookUp() {
            List<Counter> found = new ArrayList<>(registry.find("orbitkv.ssd.writes.committed").counters());
            found.addAll(registry.find("orbitkv.ssd.writes.dropped").counters());
            return List.copyOf(found);
        }

        private double settled() {
            double sum = 0;
            for (Counter c : counters) {
                sum += c.count();
            }
            return sum;
        }

        /** Until {@code pages} more writes settled than at construction; fails after {@code timeout}. */
        void await(long pages, Duration timeout) {
            long deadline = System.nanoTime() + timeout.toNanos();
            for (int poll = 1; settled() - atStart < pages; poll++) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("SSD writes did not settle: " + (long) (settled() - atStart)
                            + " of " + pages + " pages sealed in the round after " + timeout.toSeconds() + " s");
                }
                if (poll % RESCAN_POLLS == 0) {
                    counters = lookUp();
                }
                java.util.concurrent.locks.LockSupport.parkNanos(20_000);
            }
        }
    }

    private static long processCpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime();
    }

    /** The cost role's counters: operations by path (every outcome), shadow decisions, dropped updates. */
    record ObservationCounts(Map<String, Long> byPath, long shadows, long dropped) {
        static ObservationCounts read(MeterRegistry registry) {
            Map<String, Long> byPath = new TreeMap<>();
            for (Counter c : registry.find("orbitkv.cost.operations").counters()) {
                byPath.merge(c.getId().getTag("path"), (long) c.count(), Long::sum);
            }
            return new ObservationCounts(byPath, sum(registry, "orbitkv.cost.shadow.decisions"),
                    sum(registry, "orbitkv.cost.updates.dropped"));
        }

        private static long sum(MeterRegistry registry, String name) {
            return registry.find(name).counters().stream().mapToLong(c -> (long) c.count()).sum();
        }

        long operations() {
            return byPath.values().stream().mapToLong(Long::longValue).sum();
        }

        long total() {
            return operations() + shadows;
        }

        long path(String path) {
            return byPath.getOrDefault(path, 0L);
        }

        ObservationCounts minus(ObservationCounts earlier) {
            Map<String, Long> delta = new TreeMap<>();
            byPath.forEach((path, n) -> {
                long d = n - earlier.byPath.getOrDefault(path, 0L);
                if (d != 0) {
                    delta.put(path, d);
                }
            });
            return new ObservationCounts(delta, shadows - earlier.shadows, dropped - earlier.dropped);
        }
    }

    /**
     * The complete-route samples the planning role reported for the SSD batches of the plans it executed (a plan reading
     * pages back from SSD reports one under the route's own host-ready key, see PlanningRole).
     */
    static double routeSamples(MeterRegistry registry) {
        io.micrometer.core.instrument.Counter counter = registry.find("orbitkv.planning.route.samples").counter();
        return counter == null ? 0 : counter.count();
    }

    /**
     * What a round must have observed, from what it did (counted by the engine, the tier counters and the planning
     * role's route samples).
     */
    record Expected(boolean observing, long readyAnswers, long ssdReads, long ssdWrites, long routeSamples) {
        static Expected of(TierCounters tiers, long readyAnswers, long routeSamples, boolean observing) {
            return new Expected(observing, readyAnswers, tiers.ssdPages(), tiers.ssdWritesCommitted(), routeSamples);
        }

        long operations() {
            return observing ? readyAnswers + routeSamples + ssdReads + 3 * ssdWrites : 0;
        }

        long shadows() {
            return observing ? ssdReads + ssdWrites : 0;
        }

        long total() {
            return operations() + shadows();
        }

        /** Why {@code observed} is not what this round must have observed, or null. */
        String mismatch(ObservationCounts observed) {
            if (!observing) {
                return observed.total() == 0 && observed.dropped() == 0 ? null
                        : "observation was off but " + observed.total() + " observations and " + observed.dropped()
                        + " dropped updates were counted " + observed.byPath();
            }
            if (observed.dropped() > 0) {
                return observed.dropped() + " observations were dropped (intake full): the overhead would be understated";
            }
            long ssdReadsObserved = observed.path("ssd_read") + observed.path("ssd_read_bounced");
            long savesObserved = observed.path("ssd_save_staged_route") + observed.path("ssd_save_direct_route");
            boolean exact = observed.path("host_ready_route") == readyAnswers + routeSamples && ssdReadsObserved == ssdReads
                    && observed.path("ssd_write") == ssdWrites && observed.path("pool_copy_out") == ssdWrites
                    && savesObserved == ssdWrites && observed.shadows() == shadows()
                    && observed.operations() == operations();
            return exact ? null : String.format(java.util.Locale.ROOT,
                    "expected host_ready_route=%d ssd_read=%d ssd_write=pool_copy_out=ssd_save_route=%d shadows=%d, observed %s shadows=%d",
                    readyAnswers + routeSamples, ssdReads, ssdWrites, shadows(), observed.byPath(), observed.shadows());
        }
    }

    private static JsonObject report(Settings s, Side off, Side on, long activeLeases) {
        int rounds = s.rounds();
        double[] throughputRegression = new double[rounds];
        double[] p50Regression = new double[rounds];
        for (int r = 0; r < rounds; r++) {
            throughputRegression[r] = 1.0 - on.throughput[r] / off.throughput[r];
            p50Regression[r] = on.roundP50[r] / off.roundP50[r] - 1.0;
        }
        Bootstrap.Interval tput = Bootstrap.medianInterval(throughputRegression, 0.95, s.resamples(), s.seed());
        Bootstrap.Interval p50 = Bootstrap.medianInterval(p50Regression, 0.95, s.resamples(), s.seed() + 1);
        double onCpu = (double) on.cpuNanos / on.requests;
        double offCpu = (double) off.cpuNanos / off.requests;
        LatencySummary offLat = off.latency.summary();
        LatencySummary onLat = on.latency.summary();
        BenchReport.Builder report = BenchReport.builder("cost-overhead")
                .figure("observations_on_requests_per_second_median", Bootstrap.median(on.throughput))
                .figure("observations_on_latency", onLat.toJson())
                .figure("observations_on_cpu_nanos_per_request", onCpu)
                .figure("observations_on_rounds_requests_per_second", array(on.throughput))
                .figure("observations_on_counted", sideCounts(on))
                .figure("observations_off_counted", sideCounts(off))
                .figure("throughput_regression_interval", tput.toJson())
                .figure("p50_regression_interval", p50.toJson())
                .figure("active_leases_at_end", activeLeases)
                .baseline("observations_off_requests_per_second_median", Bootstrap.median(off.throughput))
                .baseline("observations_off_latency", offLat.toJson())
                .baseline("observations_off_cpu_nanos_per_request", offCpu)
                .baseline("observations_off_rounds_requests_per_second", array(off.throughput))
                .topLevelRatio("throughput_regression", tput.estimate())
                .topLevelRatio("throughput_regression_upper95", tput.upper())
                .topLevelRatio("p50_regression", p50.estimate())
                .topLevelRatio("p50_regression_upper95", p50.upper())
                .ratio("cpu_per_request_regression", onCpu / offCpu - 1.0)
                .ratio("throughput_regression_of_medians", 1.0 - Bootstrap.median(on.throughput) / Bootstrap.median(off.throughput))
                .ratio("p50_regression_all_samples", (double) onLat.p50Nanos() / offLat.p50Nanos() - 1.0)
                .config("rounds", rounds).config("requests_per_round", s.requestsPerRound())
                .config("prefix_blocks", s.prefixBlocks()).config("page_bytes", s.pageBytes())
                .config("pool_bytes", s.poolBytes()).config("ssd_capacity_bytes", s.ssdCapacityBytes())
                .config("requery_every", s.requeryEvery()).config("requery_distance_requests", s.requeryDistance())
                .config("warmup_requests", s.warmupRequests()).config("budget", s.budget())
                .config("workload", "publish one new page, query prefix+page, copy out, release; every " + s.requeryEvery()
                        + "th request also re-queries the prefix with the page of the request " + s.requeryDistance()
                        + " earlier (evicted from DRAM, read back from SSD); alternating off/on rounds (off,on,on,off,...)")
                .config("clock", "each side's clock stops after its SSD writes are all committed or dropped and the cost "
                        + "role's queue is empty (CostProxy.drained)")
                .config("cpu_time", "process CPU time (engine thread and in-process Manager together), summed over each "
                        + "side's rounds, per request: the process CPU clock ticks in 10 ms, too coarse for one round")
                .config("pass_rule", "upper end of the 95 % bootstrap interval of the median paired regression, for "
                        + "throughput and for p50, at most the budget");
        report.check(tput.upper() <= s.budget(), String.format(java.util.Locale.ROOT,
                        "throughput regression: the 95 %% interval reaches %.4f, above the %.2f budget (median %.4f)",
                        tput.upper(), s.budget(), tput.estimate()))
                .check(p50.upper() <= s.budget(), String.format(java.util.Locale.ROOT,
                        "p50 regression: the 95 %% interval reaches %.4f, above the %.2f budget (median %.4f)",
                        p50.upper(), s.budget(), p50.estimate()))
                .check(on.ssdReads > 0, "no SSD read was observed: the re-queried pages never came back from SSD")
                .check(activeLeases == 0, activeLeases + " leases still active at the end");
        for (String mismatch : off.mismatches) {
            report.failure(mismatch);
        }
        for (String mismatch : on.mismatches) {
            report.failure(mismatch);
        }
        return report.build().toJson();
    }

    private static JsonObject sideCounts(Side side) {
        return new JsonObject().put("operations", side.observations).put("shadow_decisions", side.shadowDecisions)
                .put("dropped_updates", side.droppedUpdates).put("operations_by_path", new JsonObject(new java.util.LinkedHashMap<String, Object>(side.observedByPath)))
                .put("ready_answers", side.readyAnswers).put("planning_route_samples", side.routeSamples)
                .put("ssd_reads", side.ssdReads)
                .put("ssd_writes_committed", side.ssdWritesCommitted).put("mismatched_rounds", new JsonArray(side.mismatches));
    }

    private static JsonArray array(double[] values) {
        return new JsonArray(Arrays.stream(values).boxed().toList());
    }
}
