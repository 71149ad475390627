package io.orbitkv.perf.replay;

import io.orbitkv.perf.engine.SimulatedEngine;
import io.orbitkv.perf.report.BenchReport;
import io.orbitkv.perf.report.MachineInfo;
import io.orbitkv.perf.report.Plots;
import io.orbitkv.perf.trace.MooncakeTrace;
import io.orbitkv.perf.trace.OfflineCaches;
import io.orbitkv.perf.trace.TraceRequest;
import io.orbitkv.protocol.engine.InstanceIdentity;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * {@code orbitkv replay --ablations}: the same requests, DRAM and SSD capacity and engines through each configuration
 * of the Manager, from no cache to everything on, beside the offline bounds at the same capacity; with
 * {@code --managers N} also N Managers against one with N times the capacity. One table: time to first token from
 * arrival ({@link ArrivalModel}, median over {@code --runs}), hits per tier, bytes per medium, the Manager's wait after
 * first use and readiness among the requests that had something to prepare.
 *
 * <p>Each measured configuration runs {@link ReplayCore} on fresh in-process Managers ({@link ManagerFleet}); the
 * configurations run one after another, so they share the machine's load alike only as far as it is steady: the runs
 * alternate configurations (run 1 of all, then run 2 of all, ...).
 */
public final class AblationReplay {
    public static final String BENCH_NAME = "replay-ablations";
    public static final String REPORT_FILE = "replay_ablations.json";
    public static final String TABLE_FILE = "replay_ablations.md";
    public static final String TTFT_PLOT = "replay_ablations_ttft_cdf.png";
    /** The store read rate `bench ssd` measured on this VM (quiet, median of three, perf/README). */
    public static final double DEFAULT_SSD_READ_BYTES_PER_SECOND = 1.275e9;
    /** `bench peer` on this VM with the default TLS transport (perf/README, 2026-12-04). */
    public static final double DEFAULT_PEER_READ_BYTES_PER_SECOND = 0.32e9;
    /** The planning role's outstanding bytes per medium by default; divided by the byte scale in the replay. */
    private static final long OUTSTANDING_PER_MEDIUM_BYTES = 256L << 20;

    /** The switches of one Manager configuration and engine behaviour. */
    record Config(String name, String adds, boolean cache, boolean ssd, boolean reuseAware, boolean boundaryChoice,
                  boolean prefetch, boolean guardedSelection, boolean slackOrder) {}

    static final List<Config> LADDER = List.of(
            new Config("no cache", "recompute every token", false, false, false, false, false, false, false),
            new Config("DRAM only", "the DRAM pool, no SSD", true, false, false, false, false, false, false),
            new Config("DRAM+SSD, write all", "SSD tier writing every page, no planning (LMCache-style)", true, true,
                    false, false, false, false, false),
            new Config("+ reuse-aware writes", "ssd.write-policy=reuse-aware", true, true, true, false, false, false, false),
            new Config("+ boundary choice", "engines declare their prefill rate", true, true, true, true, false, false, false),
            new Config("+ deadline prefetch", "a speculative hint ahead of first use", true, true, true, true, true, false,
                    false),
            new Config("+ guarded selection", "cost.observations + cost.selection", true, true, true, true, true, true,
                    false),
            new Config("everything on", "+ slack-ordered transfers", true, true, true, true, true, true, true));

    public static final int MAX_MANAGERS = 8;

    /**
     * Which rows run: all of them; the planning trio only (without boundary choice, with it, with prefetch too:
     * {@code --hint-lead-ms} alone); the N-Manager rows only.
     */
    public enum Scope { ALL, PREFETCH, MANAGERS }

    /** Extra settings of the ablation beyond {@link TraceReplayer.Options}. */
    public record Settings(long hintLeadMs, int managers, int runs, double peerReadBytesPerSecond, Scope scope,
                           boolean scaledRate) {
        /** Engines declare their prefill rate as is (not in the replay's byte scale). */
        public Settings(long hintLeadMs, int managers, int runs, double peerReadBytesPerSecond, Scope scope) {
            this(hintLeadMs, managers, runs, peerReadBytesPerSecond, scope, false);
        }

        public Settings {
            if (hintLeadMs < 0 || managers < 1 || managers > MAX_MANAGERS || runs < 1 || !(peerReadBytesPerSecond > 0)) {
                throw new IllegalArgumentException("--hint-lead-ms >= 0, --managers 1.." + MAX_MANAGERS
                        + ", --runs >= 1, --peer-read-bytes-per-second > 0");
            }
            if (scope == Scope.MANAGERS && managers < 2) {
                throw new IllegalArgumentException("the N-Manager rows need --managers 2.." + MAX_MANAGERS);
            }
        }
    }

    /** One row of the table: its model runs and what the first run measured. */
    private record Row(String name, String kind, String adds, List<ArrivalModel.Result> runs, JsonObject measured) {
        double medianP50Ms() {
            return median(runs.stream().mapToDouble(r -> r.ttft().p50Nanos() / 1e6).toArray());
        }

        double medianP99Ms() {
            return median(runs.stream().mapToDouble(r -> r.ttft().p99Nanos() / 1e6).toArray());
        }
    }

    private AblationReplay() {}

    public static JsonObject run(TraceReplayer.Options options, Settings settings, Consumer<String> progress)
            throws Exception {
        options.validate();
        if (options.dataDir() != null) {
            throw new IllegalArgumentException("--ablations starts its own Managers; it does not take --data-dir");
        }
        if (!options.ssd()) {
            throw new IllegalArgumentException("--ablations needs --ssd-capacity (the SSD capacity every SSD row shares)");
        }
        List<TraceRequest> requests = new ArrayList<>();
        try (MooncakeTrace trace = MooncakeTrace.open(options.trace())) {
            for (TraceRequest r = trace.next(); r != null && (options.limit() <= 0 || requests.size() < options.limit());
                 r = trace.next()) {
                requests.add(r);
            }
        }
        double ssdRate = options.ssdReadBytesPerSecond() > 0 ? options.ssdReadBytesPerSecond() : DEFAULT_SSD_READ_BYTES_PER_SECOND;
        ArrivalModel.Rates rates = new ArrivalModel.Rates(options.prefillTokensPerSecond(), ssdRate,
                options.ssdReadBytesPerSecond() > 0 ? "given (--ssd-read-bytes-per-second)"
                        : "stated: bench ssd's store read rate on this VM, 1,275 MB/s (perf/README, quiet, median of 3)",
                settings.peerReadBytesPerSecond(),
                settings.peerReadBytesPerSecond() == DEFAULT_PEER_READ_BYTES_PER_SECOND
                        ? "stated: bench peer on this VM with the default TLS transport, 0.32 GB/s (perf/README)"
                        : "given (--peer-read-bytes-per-second)",
                options.hostToDeviceBytesPerSecond(),
                options.hostToDeviceBytesPerSecond() == TraceReplayer.Options.DEFAULT_H2D_BYTES_PER_SECOND
                        ? "stated: PCIe Gen4 x16 at about 80 % of 32 GB/s" : "given (--h2d-bytes-per-second)");
        long hintLeadNanos = TimeUnit.MILLISECONDS.toNanos(settings.hintLeadMs());
        ArrivalModel.Settings model = new ArrivalModel.Settings(1, options.engines(), options.speed(),
                options.blockTokens(), options.logicalPageBytes(), -1, rates);
        InstanceIdentity identity = SimulatedEngine.identity("orbitkv-replay/8b-class",
                String.format(Locale.ROOT, "bytes_per_token=%d;block_tokens=%d;scale=1/%d", options.bytesPerToken(),
                        options.blockTokens(), options.bytesScale()), options.blockTokens(), options.scaledPageBytes());
        long capacityBlocks = options.poolBlocks() + options.ssdExtents();
        progress.accept(String.format(Locale.ROOT, "replay --ablations: %d requests; DRAM %d blocks + SSD %d blocks; %d "
                        + "engine(s) per Manager at %.0f tokens/s; %s; %d run(s) per configuration",
                requests.size(), options.poolBlocks(), options.ssdExtents(), options.engines(),
                options.prefillTokensPerSecond(), options.speed() > 0 ? "arrivals at trace time / " + options.speed()
                        : "--speed 0: trace order kept, gaps dropped (each request arrives when an engine is free)",
                settings.runs()));

        Map<String, List<ArrivalModel.Result>> results = new LinkedHashMap<>();
        Map<String, JsonObject> measured = new LinkedHashMap<>();
        Map<String, ReplayCore.Outcome> firstOutcome = new HashMap<>();
        List<Measured> plan = new ArrayList<>();
        for (Config c : LADDER) {
            boolean wanted = switch (settings.scope()) {
                case ALL -> c.cache();
                case PREFETCH -> c.name().equals("+ reuse-aware writes") || c.name().equals("+ boundary choice")
                        || c.name().equals("+ deadline prefetch");
                case MANAGERS -> false;
            };
            if (wanted) {
                plan.add(new Measured(c.name(), c.adds(), 1, options.poolBlocks(), options.ssdCapacityBytes(),
                        managerSettings(c, options), false, setup(c, options, hintLeadNanos, settings.scaledRate()),
                        c.prefetch() ? model.withHintLead(hintLeadNanos) : model));
            }
        }
        int n = settings.managers();
        Config all = LADDER.getLast();
        if (n > 1) {
            ArrivalModel.Settings nModel = model.withManagers(n, options.engines()).withHintLead(hintLeadNanos);
            plan.add(new Measured(n + " Managers x P, peering", "clustered, everything on; request i to Manager i mod " + n,
                    n, options.poolBlocks(), options.ssdCapacityBytes(), managerSettings(all, options), true,
                    setup(all, options, hintLeadNanos, settings.scaledRate()), nModel));
            plan.add(new Measured(n + " Managers x P, peering off", "independent Managers, everything on", n,
                    options.poolBlocks(), options.ssdCapacityBytes(), managerSettings(all, options), false,
                    setup(all, options, hintLeadNanos, settings.scaledRate()), nModel));
            TraceReplayer.Options big = withCapacity(options, options.poolBlocks() * n, options.ssdCapacityBytes() * n);
            plan.add(new Measured("1 Manager x " + n + "P", "everything on, " + n + "x the DRAM, SSD and engines", 1,
                    big.poolBlocks(), big.ssdCapacityBytes(), managerSettings(all, big), false,
                    setup(all, options, hintLeadNanos, settings.scaledRate()), model.withManagers(1, n * options.engines()).withHintLead(hintLeadNanos)));
        }
        for (int run = 1; run <= settings.runs(); run++) {
            for (Measured m : plan) {
                progress.accept(String.format(Locale.ROOT, "replay --ablations: run %d/%d: %s", run, settings.runs(), m.name()));
                ReplayCore.Outcome outcome;
                try (ManagerFleet fleet = ManagerFleet.start(m.managers(), options.scaledPageBytes(), m.poolBlocks(),
                        m.settings(), m.clustered())) {
                    outcome = ReplayCore.run(requests, fleet, m.setup(), identity, options.blockTokens(),
                            options.fullVerifyEvery(), progress);
                }
                results.computeIfAbsent(m.name(), k -> new ArrayList<>()).add(ArrivalModel.run(outcome.served, m.model()));
                if (run == 1) {
                    firstOutcome.put(m.name(), outcome);
                    measured.put(m.name(), measuredJson(outcome, options, m));
                } else {
                    mergeChecks(measured.get(m.name()), outcome);
                }
            }
        }

        List<Row> rows = new ArrayList<>();
        if (settings.scope() == Scope.ALL) {
            rows.add(new Row("no cache", "model", LADDER.getFirst().adds(),
                    List.of(ArrivalModel.run(offline(requests, new int[requests.size()], 1), model)),
                    boundJson(requests, new int[requests.size()], 0)));
        }
        for (Measured m : plan) {
            rows.add(new Row(m.name(), "measured", m.adds(), results.get(m.name()), measured.get(m.name())));
            if (m.name().equals(all.name())) {
                rows.addAll(bounds(requests, capacityBlocks, firstOutcome.get(all.name()), model, "P"));
            }
        }
        if (n > 1) {
            int[] lru = OfflineCaches.lru(requests, capacityBlocks * n);
            rows.add(new Row("offline LRU at " + n + "(P+S)", "bound", "LRU at " + capacityBlocks * n + " blocks, every hit ready at arrival",
                    List.of(ArrivalModel.run(offline(requests, lru, 1), model.withManagers(1, n * options.engines()))),
                    boundJson(requests, lru, capacityBlocks * n)));
        }
        return report(options, settings, requests, rows, model, capacityBlocks, progress);
    }

    /** A measured configuration. */
    private record Measured(String name, String adds, int managers, long poolBlocks, long ssdCapacityBytes,
                            Map<String, String> settings, boolean clustered, ReplayCore.Setup setup,
                            ArrivalModel.Settings model) {}

    /**
     * With {@code scaledRate} the engines declare their prefill rate times the byte scale: the Manager estimates its
     * reads on scaled pages, so a rate in the same scale keeps the ratio of read to recompute that logical pages have.
     */
    private static ReplayCore.Setup setup(Config c, TraceReplayer.Options options, long hintLeadNanos, boolean scaledRate) {
        double rate = options.prefillTokensPerSecond() * (scaledRate ? options.bytesScale() : 1);
        return new ReplayCore.Setup(c.prefetch() ? hintLeadNanos : -1, c.boundaryChoice() ? rate : 0, c.ssd());
    }

    /** The Manager settings of a configuration (pool size is the fleet's). */
    static Map<String, String> managerSettings(Config c, TraceReplayer.Options options) {
        Map<String, String> s = new HashMap<>();
        s.put("ssd.enabled", Boolean.toString(c.ssd()));
        if (c.ssd()) {
            s.put("ssd.capacity", Long.toString(options.ssdCapacityBytes()));
            s.put("ssd.extent", Long.toString(options.scaledPageBytes()));
            s.put("ssd.write-policy", c.reuseAware() ? "reuse-aware" : "all");
        }
        s.put("cost.observations", Boolean.toString(c.guardedSelection()));
        s.put("cost.selection", Boolean.toString(c.guardedSelection()));
        s.put("planning.transfers.order", c.slackOrder() ? "slack" : "arrival");
        // Bytes in flight per medium scale with the pages, so as many pages are in flight as with logical pages.
        s.put("planning.transfers.outstanding-per-medium",
                Long.toString(Math.max(options.scaledPageBytes(), OUTSTANDING_PER_MEDIUM_BYTES / options.bytesScale())));
        return s;
    }

    private static TraceReplayer.Options withCapacity(TraceReplayer.Options o, long poolBlocks, long ssdBytes) {
        return new TraceReplayer.Options(o.trace(), o.out(), o.limit(), o.speed(), o.bytesPerToken(), o.blockTokens(),
                o.bytesScale(), poolBlocks, o.dataDir(), o.prefillTokensPerSecond(), o.engines(), o.fullVerifyEvery(),
                ssdBytes, o.hostToDeviceBytesPerSecond(), o.ssdReadBytesPerSecond());
    }

    /** Offline LRU and Belady at DRAM + SSD capacity, and perfect readiness of everything-on's own hits. */
    private static List<Row> bounds(List<TraceRequest> requests, long capacityBlocks, ReplayCore.Outcome everything,
                                    ArrivalModel.Settings model, String label) {
        int[] lru = OfflineCaches.lru(requests, capacityBlocks);
        int[] belady = OfflineCaches.belady(requests, capacityBlocks);
        int[] perfect = everything.served.stream().mapToInt(ArrivalModel.Served::hitBlocks).toArray();
        return List.of(
                new Row("offline LRU at P+S", "bound", "LRU at " + capacityBlocks + " blocks, every hit ready at arrival",
                        List.of(ArrivalModel.run(offline(requests, lru, 1), model)), boundJson(requests, lru, capacityBlocks)),
                new Row("offline Belady at P+S", "bound", "Belady's MIN at " + capacityBlocks + " blocks, every hit ready at arrival",
                        List.of(ArrivalModel.run(offline(requests, belady, 1), model)), boundJson(requests, belady, capacityBlocks)),
                new Row("perfect readiness", "bound", "everything on's hits, each ready at arrival (no wait, no read time)",
                        List.of(ArrivalModel.run(offline(requests, perfect, 1), model)), boundJson(requests, perfect, capacityBlocks)));
    }

    /** Requests served with {@code hits} blocks each, ready at once: no Manager time, no read. */
    private static List<ArrivalModel.Served> offline(List<TraceRequest> requests, int[] hits, int managers) {
        List<ArrivalModel.Served> served = new ArrayList<>(requests.size());
        for (int i = 0; i < requests.size(); i++) {
            TraceRequest r = requests.get(i);
            served.add(new ArrivalModel.Served(r.timestampMs(), r.inputLength(), i % managers, hits[i], 0, 0, 0));
        }
        return served;
    }

    private static JsonObject boundJson(List<TraceRequest> requests, int[] hits, long capacityBlocks) {
        long references = requests.stream().mapToLong(TraceRequest::blockCount).sum();
        long hit = Arrays.stream(hits).asLongStream().sum();
        return new JsonObject().put("capacity_blocks", capacityBlocks).put("block_references", references)
                .put("hit_blocks", hit).put("hit_ratio", ratio(hit, references));
    }

    private static JsonObject measuredJson(ReplayCore.Outcome o, TraceReplayer.Options options, Measured m) {
        long logical = options.logicalPageBytes();
        long scaled = options.scaledPageBytes();
        return new JsonObject()
                .put("managers", m.managers()).put("pool_blocks_per_manager", m.poolBlocks())
                .put("ssd_capacity_bytes_per_manager", m.setup().ssdBacklog() ? m.ssdCapacityBytes() : 0)
                .put("block_references", o.references).put("hit_blocks", o.hitBlocks)
                .put("hit_ratio", ratio(o.hitBlocks, o.references))
                .put("hit_ratio_by_tier", new JsonObject().put("dram", ratio(o.dramHits(), o.references))
                        .put("ssd", ratio(o.ssdHits, o.references)).put("peer", ratio(o.peerHits, o.references)))
                .put("hit_blocks_by_tier", new JsonObject().put("dram", o.dramHits()).put("ssd", o.ssdHits)
                        .put("peer", o.peerHits))
                .put("logical_bytes", new JsonObject().put("ssd_read", o.ssdHits * logical)
                        .put("peer_read", o.peerHits * logical).put("host_to_device", o.hitBlocks * logical)
                        .put("ssd_written", o.ssdWrittenScaledBytes / scaled * logical))
                .put("wait_after_first_use_us", new JsonObject()
                        .put("p50", o.waitAfterFirstUse.summary().p50Nanos() / 1e3)
                        .put("p99", o.waitAfterFirstUse.summary().p99Nanos() / 1e3)
                        .put("what", "measured: from the demand at first use until READY or MISS (gRPC included)"))
                .put("readiness", new JsonObject().put("requests_with_something_to_prepare", o.toPrepare)
                        .put("ready_at_first_use", o.toPrepareReadyAtFirstUse)
                        .put("ready_at_first_use_fraction", ratio(o.toPrepareReadyAtFirstUse, o.toPrepare))
                        .put("their_hit_blocks", o.toPrepareHitBlocks)
                        .put("what", "among requests whose pages had to move (SSD or peer) or whose demand was PENDING; "
                                + "ready = the demand's first answer was READY (a MISS is never ready)"))
                .put("boundary_choices", o.boundaryChoices)
                .put("hint_refusals", o.hintRefusals).put("query_refusals", o.queryRefusals)
                .put("publish_refusals", o.publishRefusals).put("ssd_writes_dropped", o.ssdWritesDropped)
                .put("harness_pauses", new JsonObject().put("count", o.pauses).put("total_ms", o.pauseNanos / 1e6)
                        .put("what", "waits for the SSD writer between requests; outside every measured time"))
                .put("verified", String.format(Locale.ROOT, "sampled (%.1f %% of restored bytes: the first %d bytes of every "
                                + "page, 1 page in %d whole)", 100 * o.verifiedShare(), SimulatedEngine.VERIFY_PREFIX_BYTES,
                        options.fullVerifyEvery()))
                .put("verified_bytes", o.verifiedBytes).put("restored_scaled_bytes", o.restoredScaledBytes)
                .put("mismatched_pages", o.mismatchedPages).put("peer_checksum_mismatches", o.peerChecksumMismatches)
                .put("session_leases_at_end", o.leasesLeft);
    }

    /** Later runs add their failures to the first run's figures so a check sees every run. */
    private static void mergeChecks(JsonObject first, ReplayCore.Outcome o) {
        first.put("mismatched_pages", first.getLong("mismatched_pages") + o.mismatchedPages)
                .put("peer_checksum_mismatches", first.getLong("peer_checksum_mismatches") + o.peerChecksumMismatches)
                .put("session_leases_at_end", first.getLong("session_leases_at_end") + o.leasesLeft);
    }

    private static JsonObject report(TraceReplayer.Options options, Settings settings, List<TraceRequest> requests,
                                     List<Row> rows, ArrivalModel.Settings model, long capacityBlocks,
                                     Consumer<String> progress) throws Exception {
        JsonArray table = new JsonArray();
        long mismatched = 0;
        long peerMismatches = 0;
        long leases = 0;
        for (Row row : rows) {
            JsonArray runs = new JsonArray();
            row.runs().forEach(r -> runs.add(r.toJson()));
            table.add(new JsonObject().put("configuration", row.name()).put("kind", row.kind()).put("adds", row.adds())
                    .put("ttft_p50_ms", row.medianP50Ms()).put("ttft_p99_ms", row.medianP99Ms())
                    .put("ttft_runs", runs).put("figures", row.measured()));
            if (row.kind().equals("measured")) {
                mismatched += row.measured().getLong("mismatched_pages");
                peerMismatches += row.measured().getLong("peer_checksum_mismatches");
                leases += row.measured().getLong("session_leases_at_end");
            }
        }
        String text = table(rows, settings);
        BenchReport.Builder report = BenchReport.builder(BENCH_NAME)
                .figure("rows", table)
                .config("trace", options.trace().toString())
                .config("requests", requests.size())
                .config("limit", options.limit())
                .config("runs_per_configuration", settings.runs())
                .config("pool_blocks", options.poolBlocks())
                .config("ssd_capacity_bytes", options.ssdCapacityBytes())
                .config("ssd_extents", options.ssdExtents())
                .config("capacity_blocks_dram_plus_ssd", capacityBlocks)
                .config("engines_per_manager", options.engines())
                .config("hint_lead_ms", settings.hintLeadMs())
                .config("declared_prefill_rate", settings.scaledRate() ? "prefill rate x bytes scale (the Manager's "
                        + "estimates are of scaled pages)" : "prefill rate as given")
                .config("managers", settings.managers())
                .config("bytes_scale", "1/" + options.bytesScale())
                .config("ttft", "median over the runs of each run's p50 and p99")
                .model("arrival", ArrivalModel.describe(model))
                .machine(MachineInfo.probe())
                .check(mismatched == 0, mismatched + " restored pages differed from the bytes derived from their keys")
                .check(peerMismatches == 0, peerMismatches + " peer pages failed their checksum")
                .check(leases == 0, leases + " leases of the replaying engines were left at the end");
        BenchReport built = report.build();
        progress.accept(text);
        if (options.out() != null) {
            built.writeTo(options.out(), REPORT_FILE);
            Files.createDirectories(options.out());
            Files.writeString(options.out().resolve(TABLE_FILE), text);
            List<Plots.Series> series = new ArrayList<>();
            for (Row row : rows) {
                series.add(Plots.Series.latencyCdf(row.name(), row.runs().getFirst().ttft().cdf()));
            }
            Plots.latencyCdf(options.out().resolve(TTFT_PLOT), "Time to first token from arrival (modelled; first run): "
                    + options.trace().getFileName(), series, Plots.DEFAULT_WIDTH, Plots.DEFAULT_HEIGHT);
            progress.accept("replay --ablations: wrote " + options.out().resolve(REPORT_FILE) + ", " + TABLE_FILE + " and " + TTFT_PLOT);
        }
        return built.toJson();
    }

    /** The table as Markdown. */
    static String table(List<Row> rows, Settings settings) {
        StringBuilder t = new StringBuilder();
        t.append("| configuration | TTFT p50 ms | TTFT p99 ms | hit % (DRAM / SSD / peer) | GB read SSD / peer | GB h2d | "
                + "GB SSD written | wait after first use p50 / p99 µs | ready at first use (of requests to prepare; their hit blocks) |\n");
        t.append("|---|---|---|---|---|---|---|---|---|\n");
        for (Row row : rows) {
            JsonObject f = row.measured();
            String hits;
            String read = "-";
            String h2d = "-";
            String written = "-";
            String wait = "-";
            String ready = "-";
            if (row.kind().equals("measured")) {
                JsonObject byTier = f.getJsonObject("hit_ratio_by_tier");
                hits = String.format(Locale.ROOT, "%.2f (%.2f / %.2f / %.2f)", 100 * f.getDouble("hit_ratio"),
                        100 * byTier.getDouble("dram"), 100 * byTier.getDouble("ssd"), 100 * byTier.getDouble("peer"));
                JsonObject bytes = f.getJsonObject("logical_bytes");
                read = String.format(Locale.ROOT, "%.0f / %.0f", bytes.getLong("ssd_read") / 1e9, bytes.getLong("peer_read") / 1e9);
                h2d = String.format(Locale.ROOT, "%.0f", bytes.getLong("host_to_device") / 1e9);
                written = String.format(Locale.ROOT, "%.0f", bytes.getLong("ssd_written") / 1e9);
                JsonObject w = f.getJsonObject("wait_after_first_use_us");
                wait = String.format(Locale.ROOT, "%.0f / %.0f", w.getDouble("p50"), w.getDouble("p99"));
                JsonObject r = f.getJsonObject("readiness");
                ready = String.format(Locale.ROOT, "%d of %d; %d", r.getLong("ready_at_first_use"),
                        r.getLong("requests_with_something_to_prepare"), r.getLong("their_hit_blocks"));
            } else {
                hits = String.format(Locale.ROOT, "%.2f (offline)", 100 * f.getDouble("hit_ratio"));
            }
            t.append(String.format(Locale.ROOT, "| %s | %.0f | %.0f | %s | %s | %s | %s | %s | %s |\n", row.name(),
                    row.medianP50Ms(), row.medianP99Ms(), hits, read, h2d, written, wait, ready));
        }
        t.append(String.format(Locale.ROOT, "TTFT: median of %d run(s) of each measured row; bounds and no cache are computed "
                + "once. Bytes are logical (64 MiB pages).%n", settings.runs()));
        return t.toString();
    }

    static double median(double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        int n = sorted.length;
        return n == 0 ? 0 : n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    }

    private static double ratio(long part, long whole) {
        return whole == 0 ? 0.0 : (double) part / whole;
    }
}
