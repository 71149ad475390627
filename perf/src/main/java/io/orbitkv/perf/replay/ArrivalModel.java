package io.orbitkv.perf.replay;

import io.orbitkv.perf.report.LatencyRecorder;
import io.orbitkv.perf.report.LatencySummary;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * Time to first token from each request's arrival, modelled from what a replay measured per request (its Manager's
 * time to READY and the pages each tier served) plus stated rates. Pure arithmetic; no state beyond one run.
 *
 * <pre>
 *   arrival   = trace timestamp / speed            (speed 0: when an engine of its Manager is free: order kept, no gaps)
 *   start     = max(arrival, the earliest free engine of its Manager)     engines prefill one request at a time
 *   issue     = start, or max(arrival, start - hint lead) with prefetch
 *   ssd_done  = the Manager's SSD:  max(issue, device free) + ssd_pages x logical_page / ssd_rate   (FIFO, one device)
 *   peer_done = the Manager's link: max(issue, link free)   + peer_pages x logical_page / peer_rate
 *   ready     = max(start + manager time to READY (measured), ssd_done, peer_done)
 *   first_token = ready + hit_blocks x logical_page / h2d_rate + (input - hit_tokens) / prefill_rate
 * </pre>
 * The engine is busy from {@code start} to {@code first_token}; decode is left out. The Manager's measured time runs
 * concurrently with the modelled reads (it contains the real reads of the scaled pages, so they are not added twice).
 */
public final class ArrivalModel {

    /** The stated or measured rates, each with where it comes from. */
    public record Rates(double prefillTokensPerSecond, double ssdReadBytesPerSecond, String ssdSource,
                        double peerReadBytesPerSecond, String peerSource, double hostToDeviceBytesPerSecond,
                        String hostToDeviceSource) {
        public Rates {
            if (!(prefillTokensPerSecond > 0 && ssdReadBytesPerSecond > 0 && peerReadBytesPerSecond > 0
                    && hostToDeviceBytesPerSecond > 0)) {
                throw new IllegalArgumentException("every model rate must be > 0");
            }
        }

        JsonObject toJson() {
            return new JsonObject().put("prefill_tokens_per_second", prefillTokensPerSecond)
                    .put("ssd_read_bytes_per_second", ssdReadBytesPerSecond).put("ssd_read_source", ssdSource)
                    .put("peer_read_bytes_per_second", peerReadBytesPerSecond).put("peer_read_source", peerSource)
                    .put("host_to_device_bytes_per_second", hostToDeviceBytesPerSecond)
                    .put("host_to_device_source", hostToDeviceSource);
        }
    }

    /**
     * @param enginesPerManager modelled engines of each Manager
     * @param speed             trace time divided by this; 0 drops the gaps
     * @param hintLeadNanos     how long before its start a request's reads may begin (-1: no prefetch)
     */
    public record Settings(int managers, int enginesPerManager, double speed, int blockTokens, long logicalPageBytes,
                           long hintLeadNanos, Rates rates) {
        public Settings {
            if (managers < 1 || enginesPerManager < 1 || speed < 0 || blockTokens < 1 || logicalPageBytes < 1) {
                throw new IllegalArgumentException("managers, engines, block tokens, page bytes >= 1 and speed >= 0");
            }
        }

        Settings withHintLead(long nanos) {
            return new Settings(managers, enginesPerManager, speed, blockTokens, logicalPageBytes, nanos, rates);
        }

        Settings withManagers(int n, int engines) {
            return new Settings(n, engines, speed, blockTokens, logicalPageBytes, hintLeadNanos, rates);
        }
    }

    /** One request as the replay served it ({@code managerNanos}: first use until READY or MISS, measured). */
    public record Served(long timestampMs, int inputTokens, int manager, int hitBlocks, long ssdPages, long peerPages,
                         long managerNanos) {}

    /** Distributions of the TTFT and its parts over all requests. */
    public record Result(LatencySummary ttft, LatencySummary engineWait, LatencySummary restoreWait,
                         LatencySummary ssdRead, LatencySummary peerRead, LatencySummary hostToDevice,
                         LatencySummary prefill, long requests) {
        public JsonObject toJson() {
            return new JsonObject().put("requests", requests)
                    .put("ttft", ms(ttft)).put("engine_wait", ms(engineWait))
                    .put("restore_wait_after_start", ms(restoreWait)).put("ssd_read_incl_queue", ms(ssdRead))
                    .put("peer_read_incl_queue", ms(peerRead)).put("host_to_device", ms(hostToDevice))
                    .put("prefill", ms(prefill));
        }

        static JsonObject ms(LatencySummary s) {
            return new JsonObject().put("p50_ms", s.p50Nanos() / 1e6).put("p90_ms", s.p90Nanos() / 1e6)
                    .put("p99_ms", s.p99Nanos() / 1e6).put("mean_ms", s.meanNanos() / 1e6);
        }
    }

    private ArrivalModel() {}

    /** Runs the model over {@code served}, in trace order. */
    public static Result run(List<Served> served, Settings s) {
        long[][] engineFree = new long[s.managers()][s.enginesPerManager()];
        long[] ssdFree = new long[s.managers()];
        long[] peerFree = new long[s.managers()];
        LatencyRecorder ttft = LatencyRecorder.singleWriter();
        LatencyRecorder engineWait = LatencyRecorder.singleWriter();
        LatencyRecorder restoreWait = LatencyRecorder.singleWriter();
        LatencyRecorder ssdRead = LatencyRecorder.singleWriter();
        LatencyRecorder peerRead = LatencyRecorder.singleWriter();
        LatencyRecorder h2dTime = LatencyRecorder.singleWriter();
        LatencyRecorder prefillTime = LatencyRecorder.singleWriter();
        Rates r = s.rates();
        for (Served q : served) {
            int m = q.manager();
            long[] engines = engineFree[m];
            int engine = 0;
            for (int e = 1; e < engines.length; e++) {
                if (engines[e] < engines[engine]) {
                    engine = e;
                }
            }
            long arrival = s.speed() > 0 ? (long) (q.timestampMs() * 1e6 / s.speed()) : engines[engine];
            long start = Math.max(arrival, engines[engine]);
            long issue = s.hintLeadNanos() >= 0 ? Math.max(arrival, start - s.hintLeadNanos()) : start;
            long ssdDone = issue;
            if (q.ssdPages() > 0) {
                ssdDone = Math.max(issue, ssdFree[m]) + nanos(q.ssdPages() * s.logicalPageBytes(), r.ssdReadBytesPerSecond());
                ssdFree[m] = ssdDone;
                ssdRead.recordNanos(ssdDone - issue);
            }
            long peerDone = issue;
            if (q.peerPages() > 0) {
                peerDone = Math.max(issue, peerFree[m]) + nanos(q.peerPages() * s.logicalPageBytes(), r.peerReadBytesPerSecond());
                peerFree[m] = peerDone;
                peerRead.recordNanos(peerDone - issue);
            }
            long ready = Math.max(start + q.managerNanos(), Math.max(ssdDone, peerDone));
            long hitTokens = Math.min((long) q.hitBlocks() * s.blockTokens(), q.inputTokens());
            long h2d = nanos((long) q.hitBlocks() * s.logicalPageBytes(), r.hostToDeviceBytesPerSecond());
            long prefill = (long) ((q.inputTokens() - hitTokens) * 1e9 / r.prefillTokensPerSecond());
            long firstToken = ready + h2d + prefill;
            engines[engine] = firstToken;
            ttft.recordNanos(firstToken - arrival);
            engineWait.recordNanos(start - arrival);
            restoreWait.recordNanos(ready - start);
            h2dTime.recordNanos(h2d);
            prefillTime.recordNanos(prefill);
        }
        return new Result(ttft.summary(), engineWait.summary(), restoreWait.summary(), ssdRead.summary(),
                peerRead.summary(), h2dTime.summary(), prefillTime.summary(), served.size());
    }

    private static long nanos(long bytes, double bytesPerSecond) {
        return (long) (bytes * 1e9 / bytesPerSecond);
    }

    /** The model's formula and assumptions, for a report's {@code model} section. */
    public static JsonObject describe(Settings s) {
        return new JsonObject()
                .put("formula", "arrival = timestamp / speed; start = max(arrival, earliest free engine of the request's "
                        + "Manager); ready = max(start + measured Manager time to READY, SSD read done, peer read done); "
                        + "first_token = ready + hit pages x logical page / h2d rate + (input - hit tokens) / prefill rate; "
                        + "TTFT = first_token - arrival")
                .put("time", s.speed() > 0 ? String.format(Locale.ROOT, "trace timestamps / %.3g", s.speed())
                        : "--speed 0: the trace's order is kept and its gaps dropped: each request arrives when an engine "
                        + "of its Manager is free, so no request waits for an engine")
                .put("managers", s.managers()).put("engines_per_manager", s.enginesPerManager())
                .put("logical_page_bytes", s.logicalPageBytes())
                .put("prefetch", s.hintLeadNanos() < 0 ? "off: reads start when the engine starts the request"
                        : String.format(Locale.ROOT, "reads may start %.1f ms before the engine starts the request (not "
                        + "before its arrival)", s.hintLeadNanos() / 1e6))
                .put("rates", s.rates().toJson())
                .put("assumptions", new JsonArray(Arrays.asList(
                        "an engine prefills one request at a time, in trace order per Manager, and is free again at the "
                                + "request's first token (decode left out)",
                        "each Manager has one SSD and one peer link; reads queue FIFO behind earlier reads at the stated rate",
                        "the Manager's measured time to READY (on scaled pages) overlaps the modelled reads",
                        "every hit page is copied host-to-device after it is ready, not overlapped with prefill",
                        "hit_tokens = min(hit_blocks x block_tokens, input_length); the rest is recomputed")));
    }
}
