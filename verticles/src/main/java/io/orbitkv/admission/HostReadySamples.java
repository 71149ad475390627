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

/**
 * Complete-route samples of host-ready demands: from a ticket's latest revision to its state being host-ready (leased
 * in local DRAM). Admission answers READY, so it alone reports them; a cancelled ticket reports CANCELLED, which never
 * trains an estimate. Confined to the admission role's loop.
 */
final class HostReadySamples {
    /** Size buckets of a count: unknown (-1) and 0..64. */
    private static final int BUCKETS = Long.SIZE + 2;

    private final CostProxy cost;
    private final ResourceId dramPool;
    private final Ticker ticker;
    /** Keys by (byte bucket, page bucket) (see {@link #slot}): built once, reused per answer. */
    private final CostEstimateKey[] keys = new CostEstimateKey[BUCKETS * BUCKETS];

    /** @param cost null: nothing is observed */
    HostReadySamples(CostProxy cost, ResourceId dramPool, Ticker ticker) {
        this.cost = cost;
        this.dramPool = dramPool;
        this.ticker = ticker;
    }

    private static int slot(SizeBucket bytes, SizeBucket pages) {
        return (bytes.log2() + 1) * BUCKETS + pages.log2() + 1;
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
        int slot = slot(byteBucket, pageBucket);
        CostEstimateKey key = keys[slot];
        if (key == null) {
            key = CostEstimateKey.route(CostPath.HOST_READY_ROUTE, dramPool, RepresentationFamily.RAW, byteBucket,
                    pageBucket, CompletionTarget.hostReady());
            keys[slot] = key;
        }
        cost.report(ObservationRecord.of(key, outcome, Math.max(0, ticker.nanos() - revisedNanos),
                bytes < 0 ? ObservedBytes.UNKNOWN : ObservedBytes.logicalOnly(bytes)));
    }
}
