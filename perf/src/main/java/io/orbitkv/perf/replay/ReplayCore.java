package io.orbitkv.perf.replay;

import com.google.protobuf.ByteString;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.perf.engine.InProcessManager;
import io.orbitkv.perf.engine.SimulatedEngine;
import io.orbitkv.perf.engine.SsdWriteBacklog;
import io.orbitkv.perf.engine.TierCounters;
import io.orbitkv.perf.report.LatencyRecorder;
import io.orbitkv.perf.trace.ChainedBlockHashes;
import io.orbitkv.perf.trace.TraceRequest;
import io.orbitkv.protocol.engine.InstanceIdentity;
import io.orbitkv.protocol.engine.QueryStatus;
import io.vertx.core.json.JsonObject;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;

/**
 * One replay of a trace's requests, in trace order, against a {@link ManagerFleet}: request i goes to Manager i mod N,
 * whose one simulated engine does what an engine does (optionally a speculative hint first, then the demand at first
 * use, polling while PENDING; copy the READY pages out and check them; release; publish the pages it had to compute).
 * It records per request what {@link ArrivalModel} needs: the Manager's time from first use to READY (or MISS) and the
 * pages each tier served (the tier counters' delta around the request: exact, because one request runs at a time).
 *
 * <p>Checks: every restored page's first {@value SimulatedEngine#VERIFY_PREFIX_BYTES} bytes, and one page in
 * {@code fullVerifyEvery} whole, are compared with bytes derived from the page's key (a stale page at that position,
 * another request's page, or a skipped fetch mismatches); the share of restored bytes compared is reported as a sample.
 *
 * <p>Harness pauses: with an SSD tier the replay waits while the Manager's SSD writer is more than a quarter of its
 * pool behind ({@link SsdWriteBacklog}), so a loaded machine does not turn the run into one where DRAM evicts pages
 * before they are written. The wait falls between requests, outside every measured time; its count and total time are
 * reported.
 */
final class ReplayCore {

    /**
     * How the engines behave: {@code hintLeadNanos} >= 0 sends each demand first as a speculative hint that long before
     * first use; {@code declaredPrefillRate} > 0 declares the prefill rate on each demand (the Manager may then choose a
     * shorter boundary); {@code ssdBacklog} bounds the SSD writer's backlog as above.
     */
    record Setup(long hintLeadNanos, double declaredPrefillRate, boolean ssdBacklog) {}

    /** What one replay measured. */
    static final class Outcome {
        final List<ArrivalModel.Served> served = new ArrayList<>();
        final LatencyRecorder waitAfterFirstUse = LatencyRecorder.singleWriter();
        long references;
        long hitBlocks;
        long ssdHits;
        long peerHits;
        long restoredScaledBytes;
        long verifiedBytes;
        long mismatchedPages;
        long publishedPages;
        long publishRefusals;
        long queryRefusals;
        long hintRefusals;
        /** Requests whose pages had to move (SSD or peer) or whose demand was PENDING: the only ones readiness can judge. */
        long toPrepare;
        long toPrepareReadyAtFirstUse;
        long toPrepareHitBlocks;
        long pauses;
        long pauseNanos;
        long leasesLeft;
        long ssdWrittenScaledBytes;
        long ssdWritesDropped;
        long peerChecksumMismatches;
        final JsonObject boundaryChoices = new JsonObject();
        private final java.util.Map<Integer, Long> publishedBy = new java.util.HashMap<>();

        void publishedByManager(int m, long pages) {
            publishedBy.merge(m, pages, Long::sum);
        }

        long publishedPagesOf(int m) {
            return publishedBy.getOrDefault(m, 0L);
        }

        long dramHits() {
            return Math.max(0, hitBlocks - ssdHits - peerHits);
        }

        double verifiedShare() {
            return restoredScaledBytes == 0 ? 0.0 : (double) verifiedBytes / restoredScaledBytes;
        }
    }

    private ReplayCore() {}

    static Outcome run(List<TraceRequest> requests, ManagerFleet fleet, Setup setup, InstanceIdentity identity,
                       int blockTokens, int fullVerifyEvery, Consumer<String> progress) throws Exception {
        List<InProcessManager> managers = fleet.managers();
        int n = managers.size();
        List<SimulatedEngine> engines = new ArrayList<>();
        Outcome out = new Outcome();
        try {
            List<TierCounters> before = new ArrayList<>();
            List<SsdWriteBacklog> backlogs = new ArrayList<>();
            List<Meters> meters = new ArrayList<>();
            long[] sealed = new long[n];
            for (InProcessManager manager : managers) {
                engines.add(SimulatedEngine.register(OrbitKvClient.connectUnix(manager.unixSocket(), manager.token()), true,
                        identity, fullVerifyEvery));
                MeterRegistry registry = manager.manager().registry();
                before.add(TierCounters.read(registry));
                meters.add(new Meters(registry));
                backlogs.add(setup.ssdBacklog() ? new SsdWriteBacklog(registry, Math.max(1, fleet.poolBlocks() / 4)) : null);
            }
            for (int i = 0; i < requests.size(); i++) {
                int m = i % n;
                replayOne(requests.get(i), i, m, engines.get(m), meters.get(m), setup, blockTokens, out);
                sealed[m] = out.publishedPagesOf(m);
                if (backlogs.get(m) != null) {
                    long waited = backlogs.get(m).bound(sealed[m]);
                    if (waited > 0) {
                        out.pauses++;
                        out.pauseNanos += waited;
                    }
                }
                if ((i + 1) % 1000 == 0) {
                    progress.accept(String.format(Locale.ROOT, "  %d/%d requests, hit ratio so far %.1f%%", i + 1,
                            requests.size(), 100.0 * out.hitBlocks / Math.max(1, out.references)));
                }
            }
            for (int m = 0; m < n; m++) {
                MeterRegistry registry = managers.get(m).manager().registry();
                TierCounters tiers = TierCounters.read(registry).minus(before.get(m));
                out.ssdWrittenScaledBytes += tiers.ssdWriteBytes();
                out.ssdWritesDropped += tiers.ssdWritesDropped();
                out.leasesLeft += engines.get(m).stats().getSessionLeases();
                out.peerChecksumMismatches += count(registry, "orbitkv_peer_checksum_mismatches_total", null, null);
                for (String reason : List.of("longest", "earlier_first_token", "budget")) {
                    out.boundaryChoices.put(reason, out.boundaryChoices.getLong(reason, 0L)
                            + count(registry, "orbitkv.planning.plans", "reason", reason));
                }
            }
            return out;
        } finally {
            for (SimulatedEngine engine : engines) {
                engine.close();
            }
        }
    }

    private static void replayOne(TraceRequest request, int index, int m, SimulatedEngine engine, Meters meters,
                                  Setup setup, int blockTokens, Outcome out) {
        long[] ids = request.hashIds();
        int ready = 0;
        long ssdPages = 0;
        long peerPages = 0;
        long managerNanos = 0;
        List<ByteString> chain = new ArrayList<>(ids.length);
        for (byte[] hash : ChainedBlockHashes.chain(ids)) {
            chain.add(ByteString.copyFrom(hash));
        }
        SimulatedEngine.PageSeeds seeds = position -> ids[position];
        if (ids.length > 0) {
            long ssdBefore = meters.ssdPages();
            long peerBefore = meters.peerPages();
            String requestId = "r" + index;
            long operation = index + 1L;
            long revision = 0;
            if (setup.hintLeadNanos() >= 0) {
                SimulatedEngine.QueryOutcome hint = engine.submitDemand(requestId, revision++, operation, blockTokens, chain,
                        true, TimeUnit.NANOSECONDS.toMicros(setup.hintLeadNanos()), 1.0f, setup.declaredPrefillRate());
                if (hint.refusal() != null) {
                    out.hintRefusals++;
                }
                // The lead is the engine's time before first use; a hint answered at once (resident, or a miss) has
                // nothing left to prepare in it, so the replay skips the idle part.
                long firstUse = System.nanoTime() + setup.hintLeadNanos();
                while (hint.status() == QueryStatus.PENDING && System.nanoTime() < firstUse) {
                    LockSupport.parkNanos(firstUse - System.nanoTime());
                }
            }
            long firstUse = System.nanoTime();
            SimulatedEngine.QueryOutcome real = engine.submitDemand(requestId, revision, operation, blockTokens, chain,
                    false, 0, 0f, setup.declaredPrefillRate());
            SimulatedEngine.QueryOutcome settled = engine.settle(real);
            managerNanos = System.nanoTime() - firstUse;
            out.waitAfterFirstUse.recordNanos(managerNanos);
            if (settled.refusal() != null) {
                out.queryRefusals++;
            }
            ssdPages = meters.ssdPages() - ssdBefore;
            peerPages = meters.peerPages() - peerBefore;
            if (settled.ready()) {
                ready = settled.readyBlocks();
                SimulatedEngine.CopyOutcome copy = engine.copyOut(settled, Integer.MAX_VALUE, seeds);
                out.restoredScaledBytes += copy.bytes();
                out.verifiedBytes += copy.verifiedBytes();
                out.mismatchedPages += copy.mismatchedPages();
                engine.release(settled);
            }
            if (ssdPages + peerPages > 0 || real.status() == QueryStatus.PENDING) {
                out.toPrepare++;
                out.toPrepareHitBlocks += ready;
                // Ready at first use: the demand's first answer was READY (a MISS is never ready).
                if (real.status() == QueryStatus.READY) {
                    out.toPrepareReadyAtFirstUse++;
                }
            }
        }
        out.references += ids.length;
        out.hitBlocks += ready;
        out.ssdHits += Math.min(ready, ssdPages);
        out.peerHits += Math.min(Math.max(0, ready - ssdPages), peerPages);
        out.served.add(new ArrivalModel.Served(request.timestampMs(), request.inputLength(), m, ready,
                Math.min(ready, ssdPages), Math.min(Math.max(0, ready - ssdPages), peerPages), managerNanos));
        SimulatedEngine.PublishOutcome published = engine.publish(chain, ready, seeds);
        if (published.refusal() != null) {
            out.publishRefusals++;
        }
        out.publishedPages += published.sealedPages();
        out.publishedByManager(m, published.sealedPages());
    }

    /**
     * The two counters read around every request, found once: a registry search walks every meter, which on a
     * starved machine cost a visible share of the replay's time.
     */
    private static final class Meters {
        private final MeterRegistry registry;
        private Counter ssdPages;
        private Counter peerPages;

        Meters(MeterRegistry registry) {
            this.registry = registry;
        }

        long ssdPages() {
            if (ssdPages == null) {
                ssdPages = registry.find("orbitkv.tier.reads").tag("tier", "ssd").counter();
            }
            return ssdPages == null ? 0 : (long) ssdPages.count();
        }

        long peerPages() {
            if (peerPages == null) {
                peerPages = registry.find("orbitkv_peer_fetched_pages_total").counter();
            }
            return peerPages == null ? 0 : (long) peerPages.count();
        }
    }

    private static long count(MeterRegistry registry, String name, String tag, String value) {
        Counter c = tag == null ? registry.find(name).counter() : registry.find(name).tag(tag, value).counter();
        return c == null ? 0 : (long) c.count();
    }
}
