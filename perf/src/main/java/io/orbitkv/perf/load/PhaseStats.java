package io.orbitkv.perf.load;

import io.orbitkv.perf.report.LatencyRecorder;
import io.orbitkv.perf.report.LatencySummary;
import io.orbitkv.protocol.engine.ErrorReason;
import io.vertx.core.json.JsonObject;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/** Counters and latency recorders of one load phase, shared by its worker threads. */
final class PhaseStats {
    final LongAdder requests = new LongAdder();
    final LongAdder referenceBlocks = new LongAdder();
    final LongAdder sharedBlocks = new LongAdder();
    final LongAdder hitBlocks = new LongAdder();
    final LongAdder readyQueries = new LongAdder();
    final LongAdder missQueries = new LongAdder();
    final LongAdder pendingPolls = new LongAdder();
    final LongAdder cancelledAfterSubmit = new LongAdder();
    final LongAdder cancelledAfterReady = new LongAdder();
    final LongAdder cancelFailures = new LongAdder();
    final LongAdder restoredPages = new LongAdder();
    final LongAdder restoredBytes = new LongAdder();
    final LongAdder verifiedBytes = new LongAdder();
    final LongAdder mismatchedPages = new LongAdder();
    final LongAdder publishedPages = new LongAdder();
    final LongAdder publishedBytes = new LongAdder();
    final LongAdder alreadyPresentPages = new LongAdder();
    final LongAdder droppedArrivals = new LongAdder();
    final Map<ErrorReason, LongAdder> queryRefusals = new ConcurrentHashMap<>();
    final Map<ErrorReason, LongAdder> publishRefusals = new ConcurrentHashMap<>();
    /** Arrival (scheduled, open loop; or start, closed loop) to READY/MISS: includes any wait in the generator's queue. */
    final LatencyRecorder timeToReady = LatencyRecorder.concurrent();
    /** Submit to READY/MISS: the query RPCs alone, comparable with the no-op ping. */
    final LatencyRecorder queryRpc = LatencyRecorder.concurrent();
    /** Arrival to done: query, copy-out, release and publish of the computed pages. */
    final LatencyRecorder request = LatencyRecorder.concurrent();
    /** No-op Pings the engines sent between their requests inside this phase, on their own connections. */
    final LatencyRecorder ping = LatencyRecorder.concurrent();
    volatile long elapsedNanos;

    void refusedQuery(ErrorReason reason) {
        queryRefusals.computeIfAbsent(reason, r -> new LongAdder()).increment();
    }

    void refusedPublish(ErrorReason reason) {
        publishRefusals.computeIfAbsent(reason, r -> new LongAdder()).increment();
    }

    double requestsPerSecond() {
        return elapsedNanos == 0 ? 0 : requests.sum() * 1e9 / elapsedNanos;
    }

    double restoredBytesPerSecond() {
        return elapsedNanos == 0 ? 0 : restoredBytes.sum() * 1e9 / elapsedNanos;
    }

    double bytesPerSecond() {
        return elapsedNanos == 0 ? 0 : (restoredBytes.sum() + publishedBytes.sum()) * 1e9 / elapsedNanos;
    }

    JsonObject toJson() {
        long references = referenceBlocks.sum();
        long shared = sharedBlocks.sum();
        double seconds = elapsedNanos / 1e9;
        LatencySummary rpc = queryRpc.summary();
        LatencySummary pingSummary = ping.summary();
        JsonObject json = new JsonObject()
                .put("requests", requests.sum())
                .put("seconds", seconds)
                .put("requests_per_second", requestsPerSecond())
                .put("bytes_per_second", bytesPerSecond())
                .put("restored_bytes_per_second", seconds == 0 ? 0.0 : restoredBytes.sum() / seconds)
                .put("published_bytes_per_second", seconds == 0 ? 0.0 : publishedBytes.sum() / seconds)
                .put("reference_blocks", references)
                .put("shared_prefix_blocks", shared)
                .put("hit_blocks", hitBlocks.sum())
                .put("hit_ratio", references == 0 ? 0.0 : (double) hitBlocks.sum() / references)
                .put("shared_prefix_hit_ratio", shared == 0 ? 0.0 : (double) hitBlocks.sum() / shared)
                .put("ready_queries", readyQueries.sum())
                .put("miss_queries", missQueries.sum())
                .put("pending_polls", pendingPolls.sum())
                .put("cancelled_after_submit", cancelledAfterSubmit.sum())
                .put("cancelled_after_ready", cancelledAfterReady.sum())
                .put("cancel_failures", cancelFailures.sum())
                .put("restored_pages", restoredPages.sum())
                .put("restored_bytes", restoredBytes.sum())
                .put("verified_bytes", verifiedBytes.sum())
                .put("mismatched_pages", mismatchedPages.sum())
                .put("published_pages", publishedPages.sum())
                .put("published_bytes", publishedBytes.sum())
                .put("already_present_pages", alreadyPresentPages.sum())
                .put("dropped_arrivals", droppedArrivals.sum())
                .put("query_refusals", counts(queryRefusals))
                .put("publish_refusals", counts(publishRefusals))
                .put("time_to_ready", timeToReady.summary().toJson())
                .put("query_rpc", rpc.toJson())
                .put("request_latency", request.summary().toJson())
                .put("noop_ping", pingSummary.toJson());
        if (pingSummary.count() > 0 && pingSummary.p50Nanos() > 0 && rpc.count() > 0) {
            json.put("query_rpc_p50_over_ping_p50", (double) rpc.p50Nanos() / pingSummary.p50Nanos());
        }
        return json;
    }

    private static JsonObject counts(Map<ErrorReason, LongAdder> refusals) {
        JsonObject json = new JsonObject();
        refusals.forEach((reason, count) -> json.put(reason.name(), count.sum()));
        return json;
    }
}
