package io.orbitkv.perf.replay;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.clusterkit.ClusterCertificates;
import io.orbitkv.clusterkit.LocalEtcd;
import io.orbitkv.perf.engine.InProcessManager;
import io.orbitkv.perf.engine.SimulatedEngine;
import io.orbitkv.perf.engine.TierCounters;
import io.orbitkv.perf.report.BenchReport;
import io.orbitkv.perf.report.MachineInfo;
import io.orbitkv.perf.trace.MooncakeTrace;
import io.orbitkv.perf.trace.TraceRequest;
import io.orbitkv.protocol.engine.InstanceIdentity;
import io.orbitkv.storage.PoolAllocator;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;

/**
 * {@code orbitkv replay --managers N}: the trace's requests spread round-robin over N clustered Managers (request i goes
 * to Manager i mod N), beside the single-Manager run on the same trace and settings ({@link TraceReplayer}).
 *
 * <p>Each Manager runs in this process with the single run's pool (and SSD tier) settings, a real etcd (Debian's
 * {@code etcd-server}) for membership, the clustered event bus for inventory streams and the peer role over mutual
 * TLS for transfers; each has {@code --engines} simulated engines of its own. A request whose prefix another Manager
 * holds is served through the peer DRAM route (PENDING, then READY once the pages are transferred, CRC32C-checked and
 * sealed locally), and every restored page is verified against what was published, whichever Manager published it.
 *
 * <p>Hits by tier: {@code ssd} = pages read back from a Manager's own SSD, {@code peer} = pages a Manager fetched from
 * another Manager for its engines' queries, {@code dram} = the remaining hit pages (resident in the Manager's pool).
 *
 * <p>Design note (ownership): this class owns the etcd process, the Managers and the engines it starts, and closes them
 * all (engines, then Managers, then etcd, then the temporary directory) whether the run succeeds or fails.
 */
public final class ClusterReplay {
    public static final String BENCH_NAME = "replay-managers";
    public static final String REPORT_FILE = "replay-managers.json";
    public static final int MAX_MANAGERS = 8;

    private ClusterReplay() {}

    public static JsonObject run(TraceReplayer.Options options, int managers, Consumer<String> progress) throws Exception {
        options.validate();
        if (managers < 2 || managers > MAX_MANAGERS) {
            throw new IllegalArgumentException("--managers must be 1.." + MAX_MANAGERS);
        }
        if (options.dataDir() != null) {
            throw new IllegalArgumentException("--managers starts its own Managers in this process; it does not take --data-dir");
        }
        if (!LocalEtcd.installed()) {
            throw new IllegalArgumentException("--managers needs etcd (/usr/bin/etcd): apt-get install etcd-server");
        }
        Path out = options.out() == null ? null : options.out();
        TraceReplayer.Options single = withOut(options, out == null ? null : out.resolve("single-manager"));
        progress.accept("replay --managers " + managers + ": first the single-Manager run on the same trace");
        JsonObject singleReport = TraceReplayer.run(single, progress);

        List<TraceRequest> requests = new ArrayList<>();
        try (MooncakeTrace trace = MooncakeTrace.open(options.trace())) {
            for (TraceRequest r = trace.next(); r != null && (options.limit() <= 0 || requests.size() < options.limit()); r = trace.next()) {
                requests.add(r);
            }
        }
        progress.accept("replay --managers " + managers + ": " + requests.size() + " requests over " + managers
                + " clustered Managers");
        Path dir = Files.createTempDirectory("orbitkv-replay-cluster-");
        List<InProcessManager> started = new ArrayList<>();
        LocalEtcd etcd = null;
        try {
            ClusterCertificates.create(dir.resolve("certs"), managers, List.of("127.0.0.1", "localhost"), Duration.ofDays(1));
            etcd = LocalEtcd.start(dir);
            long pageBytes = options.scaledPageBytes();
            long slotBytes = PoolAllocator.sizeClassOf(pageBytes);
            long chunk = slotBytes >= (64 << 10) ? slotBytes : 64 << 10;
            long pagesPerChunk = chunk / slotBytes;
            long chunks = (options.poolBlocks() + pagesPerChunk - 1) / pagesPerChunk;
            for (int m = 1; m <= managers; m++) {
                Map<String, String> s = new HashMap<>();
                if (options.ssd()) {
                    s.put("ssd.enabled", "true");
                    s.put("ssd.capacity", Long.toString(options.ssdCapacityBytes()));
                    s.put("ssd.extent", Long.toString(pageBytes));
                    s.put("ssd.write-policy", "all");
                }
                s.put("cluster.enabled", "true");
                s.put("cluster.member-id", "manager-" + m);
                s.put("cluster.etcd-endpoints", etcd.endpoint());
                s.put("cluster.prefix", "/orbitkv-replay");
                s.put("cluster.hazelcast-port", String.valueOf(LocalEtcd.freePort()));
                s.put("cluster.tls.ca", dir.resolve("certs/ca.pem").toString());
                s.put("cluster.tls.cert", dir.resolve("certs/manager-" + m + ".pem").toString());
                s.put("cluster.tls.key", dir.resolve("certs/manager-" + m + ".key").toString());
                s.put("peer.port", String.valueOf(LocalEtcd.freePort()));
                s.put("peer.transfer-port", String.valueOf(LocalEtcd.freePort()));
                started.add(InProcessManager.start("orbitkv-replay-m" + m + "-", chunks * chunk, chunk, s));
            }
            // Members, then inventory: each Manager follows every other's stream (from its first snapshot on) before
            // the first request, so a peer's pages are visible with the stream's lag only, not the cluster's start-up.
            long deadline = System.nanoTime() + Duration.ofSeconds(90).toNanos();
            while (!started.stream().allMatch(p -> p.manager().membershipRole().orElseThrow().members().size() == managers
                    && following(p, started))) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("the " + managers + " Managers did not follow each other's inventory "
                            + "within 90 s");
                }
                Thread.sleep(50);
            }
            return replay(options, requests, started, chunks * pagesPerChunk, singleReport, progress);
        } finally {
            List<Exception> failures = new ArrayList<>();
            for (InProcessManager manager : started.reversed()) {
                try {
                    manager.close();
                } catch (Exception e) {
                    failures.add(e);
                }
            }
            if (etcd != null) {
                etcd.close();
            }
            deleteTree(dir);
            if (!failures.isEmpty()) {
                progress.accept("replay --managers: a Manager failed to stop cleanly: " + failures.getFirst());
            }
        }
    }

    /** Whether {@code on} follows the inventory of every other Manager (its evidence gauge for it exists). */
    private static boolean following(InProcessManager on, List<InProcessManager> all) {
        for (InProcessManager of : all) {
            String member = of.config().cluster().orElseThrow().memberId();
            if (of != on && on.manager().registry().find("orbitkv.cluster.peer.evidence.keys").tag("member", member)
                    .gauge() == null) {
                return false;
            }
        }
        return true;
    }

    private static TraceReplayer.Options withOut(TraceReplayer.Options o, Path out) {
        return new TraceReplayer.Options(o.trace(), out, o.limit(), o.speed(), o.bytesPerToken(), o.blockTokens(),
                o.bytesScale(), o.poolBlocks(), o.dataDir(), o.prefillTokensPerSecond(), o.engines(), o.fullVerifyEvery(),
                o.ssdCapacityBytes(), o.hostToDeviceBytesPerSecond(), o.ssdReadBytesPerSecond());
    }

    /** What one Manager's share of the replay saw. */
    private record Share(InProcessManager manager, TraceReplayer.Counters counters, TierCounters tiersBefore,
                         long peerPagesBefore, long peerMismatchesBefore, List<SimulatedEngine> engines) {}

    private static JsonObject replay(TraceReplayer.Options options, List<TraceRequest> requests,
                                     List<InProcessManager> managers, long capacityBlocks, JsonObject singleReport,
                                     Consumer<String> progress) throws Exception {
        long pageBytes = options.scaledPageBytes();
        InstanceIdentity identity = SimulatedEngine.identity("orbitkv-replay/8b-class",
                String.format(Locale.ROOT, "bytes_per_token=%d;block_tokens=%d;scale=1/%d", options.bytesPerToken(),
                        options.blockTokens(), options.bytesScale()), options.blockTokens(), pageBytes);
        List<Share> shares = new ArrayList<>();
        try {
            for (InProcessManager manager : managers) {
                List<SimulatedEngine> engines = new ArrayList<>();
                shares.add(new Share(manager, new TraceReplayer.Counters(), TierCounters.read(manager.manager().registry()),
                        peerPages(manager), peerMismatches(manager), engines));
                for (int i = 0; i < options.engines(); i++) {
                    engines.add(SimulatedEngine.register(OrbitKvClient.connectUnix(manager.unixSocket(), manager.token()),
                            true, identity, options.fullVerifyEvery()));
                }
            }
            int n = shares.size();
            List<AtomicInteger> next = new ArrayList<>();
            for (int m = 0; m < n; m++) {
                next.add(new AtomicInteger(m));
            }
            List<Throwable> failures = Collections.synchronizedList(new ArrayList<>());
            List<Thread> threads = new ArrayList<>();
            long start = System.nanoTime();
            for (int m = 0; m < n; m++) {
                Share share = shares.get(m);
                AtomicInteger cursor = next.get(m);
                for (SimulatedEngine engine : share.engines()) {
                    threads.add(Thread.ofPlatform().name("replay-engine-m" + (m + 1)).start(() -> {
                        try {
                            // Request i goes to Manager i mod n; this Manager's engines share its requests in order.
                            for (int i = cursor.getAndAdd(n); i < requests.size(); i = cursor.getAndAdd(n)) {
                                TraceReplayer.replayOne(options, requests.get(i), engine, start, share.counters(), null, null);
                            }
                        } catch (Throwable t) {
                            failures.add(t);
                        }
                    }));
                }
            }
            for (Thread thread : threads) {
                thread.join();
            }
            long elapsedNanos = System.nanoTime() - start;
            if (!failures.isEmpty()) {
                throw new IllegalStateException("replay engine failed: " + failures.getFirst(), failures.getFirst());
            }
            progress.accept(String.format(Locale.ROOT, "replay --managers %d: done in %.1f s", n, elapsedNanos / 1e9));
            return report(options, requests.size(), shares, elapsedNanos, capacityBlocks, singleReport);
        } finally {
            for (Share share : shares) {
                for (SimulatedEngine engine : share.engines()) {
                    engine.close();
                }
            }
        }
    }

    private static JsonObject report(TraceReplayer.Options options, int requestCount, List<Share> shares,
                                     long elapsedNanos, long capacityBlocks, JsonObject singleReport) throws Exception {
        long references = 0;
        long hits = 0;
        long ssdHits = 0;
        long peerHits = 0;
        long verified = 0;
        long mismatched = 0;
        long peerMismatches = 0;
        long leases = 0;
        JsonArray perManager = new JsonArray();
        for (Share share : shares) {
            TraceReplayer.Counters c = share.counters();
            TierCounters tiers = TierCounters.read(share.manager().manager().registry()).minus(share.tiersBefore());
            long peer = peerPages(share.manager()) - share.peerPagesBefore();
            long ssd = options.ssd() ? tiers.ssdPages() : 0;
            long sessionLeases = 0;
            for (SimulatedEngine engine : share.engines()) {
                sessionLeases += engine.stats().getSessionLeases();
            }
            references += c.referenceBlocks.sum();
            hits += c.hitBlocks.sum();
            ssdHits += ssd;
            peerHits += peer;
            verified += c.verifiedBytes.sum();
            mismatched += c.mismatchedPages.sum();
            peerMismatches += peerMismatches(share.manager()) - share.peerMismatchesBefore();
            leases += sessionLeases;
            perManager.add(new JsonObject()
                    .put("member", share.manager().config().cluster().orElseThrow().memberId())
                    .put("requests", c.completed.sum())
                    .put("block_references", c.referenceBlocks.sum())
                    .put("hit_blocks", c.hitBlocks.sum())
                    .put("hit_ratio", ratio(c.hitBlocks.sum(), c.referenceBlocks.sum()))
                    .put("hit_blocks_from_peer", peer)
                    .put("hit_blocks_from_ssd", ssd)
                    .put("time_to_ready", c.timeToReady.summary().toJson())
                    .put("published_pages", c.publishedPages.sum())
                    .put("pending_polls", c.pendingPolls.sum()));
        }
        long dramHits = Math.max(0, hits - ssdHits - peerHits);
        JsonObject byTier = new JsonObject()
                .put("dram", tier(dramHits, references))
                .put("ssd", options.ssd() ? tier(ssdHits, references)
                        : new JsonObject().put("available", false).put("hit_blocks", 0).put("reason", "DRAM-only run"))
                .put("peer", tier(peerHits, references));
        JsonObject singleFigures = singleReport.getJsonObject("figures", new JsonObject());
        JsonObject single = new JsonObject()
                .put("hit_ratio", singleFigures.getValue("hit_ratio"))
                .put("hit_blocks", singleFigures.getValue("hit_blocks"))
                .put("block_references", singleFigures.getValue("block_references"))
                .put("hits_by_tier", singleFigures.getValue("hits_by_tier"));
        double measured = ratio(hits, references);
        BenchReport.Builder report = BenchReport.builder(BENCH_NAME)
                .figure("managers", shares.size())
                .figure("requests", requestCount)
                .figure("seconds", elapsedNanos / 1e9)
                .figure("block_references", references)
                .figure("hit_blocks", hits)
                .figure("hit_ratio", measured)
                .figure("hits_by_tier", byTier)
                .figure("verified_bytes", verified)
                .figure("mismatched_pages", mismatched)
                .figure("peer_checksum_mismatches", peerMismatches)
                .figure("session_leases_at_end", leases)
                .figure("per_manager", perManager)
                .baseline("single_manager", single)
                .config("trace", options.trace().toString())
                .config("limit", options.limit())
                .config("spread", "request i to Manager i mod " + shares.size() + "; each Manager has --engines engines")
                .config("pool_capacity_blocks_per_manager", capacityBlocks)
                .config("ssd_capacity_bytes_per_manager", options.ssdCapacityBytes())
                .config("engines_per_manager", options.engines())
                .config("scaled_page_bytes", options.scaledPageBytes())
                .config("cluster", "etcd + clustered event bus + peer role (mutual TLS), all on 127.0.0.1, Managers in "
                        + "this process")
                .machine(MachineInfo.probe());
        Object singleRatio = singleFigures.getValue("hit_ratio");
        if (singleRatio instanceof Number s && s.doubleValue() > 0) {
            report.ratio("hit_ratio_over_single_manager", measured / s.doubleValue());
        }
        report.check(mismatched == 0, mismatched + " restored pages differ from what was published")
                .check(peerMismatches == 0, peerMismatches + " peer pages failed their checksum (never served)")
                .check(leases == 0, leases + " leases of the replaying engines still active at the end");
        BenchReport built = report.build();
        if (options.out() != null) {
            built.writeTo(options.out(), REPORT_FILE);
        }
        return built.toJson();
    }

    private static JsonObject tier(long hitBlocks, long references) {
        return new JsonObject().put("available", true).put("hit_blocks", hitBlocks).put("hit_ratio", ratio(hitBlocks, references));
    }

    private static double ratio(long part, long whole) {
        return whole == 0 ? 0.0 : (double) part / whole;
    }

    private static long peerPages(InProcessManager manager) {
        return counter(manager.manager().registry(), "orbitkv_peer_fetched_pages_total");
    }

    private static long peerMismatches(InProcessManager manager) {
        return counter(manager.manager().registry(), "orbitkv_peer_checksum_mismatches_total");
    }

    private static long counter(MeterRegistry registry, String name) {
        Counter c = registry.find(name).counter();
        return c == null ? 0 : (long) c.count();
    }

    private static void deleteTree(Path dir) {
        try (var paths = Files.walk(dir)) {
            paths.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (java.io.IOException ignored) {
            // Best effort: a temporary directory.
        }
    }
}
