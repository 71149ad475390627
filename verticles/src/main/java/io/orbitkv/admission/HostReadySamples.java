package io.orbitkv.admission;

import io.orbitkv.common.Ticker;
import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.model.cost.CostEstimateKey;
import io.orbitkv.model.cost.CostPath;
import io.orbitkv.cost.CostProxy;
import io.orbitkv.model.cost.ObservationOutcome;
import io.orbitkv.model.cost.ObservationRecord;
import io.orbitkv.model.cost.ObservedBytes;
import io.orbitkv.model.cost.RepresentationFamily;
import io.orbitkv.model.cost.ResourceId;
import io.orbitkv.model.cost.SizeBucket;
import java.util.HashMap;
import java.util.Map;

/**
 * Complete-route samples of host-ready demands: from a ticket's latest revision to its state being host-ready (leased
 * in local DRAM). Admission answers READY, so it alone reports them; a cancelled ticket reports CANCELLED, which never
 * trains an estimate. Confined to the admission role's loop.
 */
final class HostReadySamples {
    private final CostProxy cost;
    private final ResourceId dramPool;
    private final Ticker ticker;
    private final Map<Long, CostEstimateKey> keys = new HashMap<>();

    /** @param cost null: nothing is observed */
    HostReadySamples(CostProxy cost, ResourceId dramPool, Ticker ticker) {
        this.cost = cost;
        this.dramPool = dramPool;
        this.ticker = ticker;
    }

    /** The DRAM pool's incarnation (0 when unknown): engine-restore targets name it. */
    long incarnation() {
        return dramPool == null ? 0 : dramPool.incarnation();
    }

    /** {@code bytes} or {@code pages} negative: unknown. */
    void observe(long revisedNanos, ObservationOutcome outcome, long bytes, long pages) {
        if (cost == null || !cost.observationsEnabled()) {
            return;
        }
        SizeBucket byteBucket = bytes < 0 ? SizeBucket.UNKNOWN : SizeBucket.of(bytes);
        SizeBucket pageBucket = pages < 0 ? SizeBucket.UNKNOWN : SizeBucket.of(pages);
        // Few distinct (bytes, pages) buckets occur: reuse their keys instead of building one per query.
        CostEstimateKey key = keys.computeIfAbsent((long) byteBucket.log2() << 32 | (pageBucket.log2() & 0xffffffffL),
                k -> CostEstimateKey.route(CostPath.HOST_READY_ROUTE, dramPool,
                        RepresentationFamily.RAW, byteBucket, pageBucket, CompletionTarget.hostReady()));
        cost.report(ObservationRecord.of(key, outcome, Math.max(0, ticker.nanos() - revisedNanos),
                bytes < 0 ? ObservedBytes.UNKNOWN : ObservedBytes.logicalOnly(bytes)));
    }
}
