package io.orbitkv.manager;

import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.model.cost.CostEstimateKey;
import io.orbitkv.model.cost.CostPath;
import io.orbitkv.cost.CostProxy;
import io.orbitkv.model.cost.ObservationOutcome;
import io.orbitkv.model.cost.ObservationRecord;
import io.orbitkv.model.cost.ObservedBytes;
import io.orbitkv.model.cost.RepresentationFamily;
import io.orbitkv.model.cost.ResourceId;
import io.orbitkv.model.cost.ShadowAlternative;
import io.orbitkv.model.cost.ShadowRequest;
import io.orbitkv.model.cost.SizeBucket;
import io.orbitkv.ssd.SsdOperationObserver;
import java.util.List;
import java.util.OptionalLong;

/**
 * Carries the SSD store's finished writes to the cost role (when observing): SSD_WRITE operations, the pool copy into
 * staging (POOL_COPY_OUT), and the complete save route of each write (seal → committed extent) by the path that ran,
 * compared in shadow with the other path: staging copy versus writing straight from the DRAM slot. Shadow never runs
 * the alternative; a path never executed stays unknown.
 *
 * <p>Design note: called on the SSD role's thread for every write, so the keys (immutable; one set per byte-size
 * bucket, of which a store sees one or two) are built once and reused instead of per write. The cache is written
 * only by that one thread; a racing second writer would only build an equal set.
 */
final class SsdWriteObservations implements SsdOperationObserver {
    private final CostProxy cost;
    private final ResourceId ssdStore;
    private final ResourceId dramPool;
    /** By {@link SizeBucket#log2()} of the payload bytes (0..64). */
    private final Keys[] keysByBucket = new Keys[Long.SIZE + 1];

    /** Every key a write of one size bucket reports, and its two possible shadow comparisons. */
    private record Keys(CostEstimateKey copyOut, CostEstimateKey write, CostEstimateKey stagedRoute,
                        CostEstimateKey directRoute, ShadowRequest stagedRan, ShadowRequest stagedRanOtherImpossible,
                        ShadowRequest directRan, ShadowRequest directRanOtherImpossible) {

        static Keys of(ResourceId ssdStore, ResourceId dramPool, SizeBucket bytes) {
            SizeBucket one = SizeBucket.of(1);
            CompletionTarget saved = CompletionTarget.saveCompletion(dramPool);
            CostEstimateKey staged = CostEstimateKey.route(CostPath.SSD_SAVE_STAGED_ROUTE, ssdStore,
                    RepresentationFamily.RAW, bytes, one, saved);
            CostEstimateKey direct = CostEstimateKey.route(CostPath.SSD_SAVE_DIRECT_ROUTE, ssdStore,
                    RepresentationFamily.RAW, bytes, one, saved);
            return new Keys(
                    CostEstimateKey.operation(CostPath.POOL_COPY_OUT, dramPool, RepresentationFamily.RAW, bytes, one),
                    CostEstimateKey.operation(CostPath.SSD_WRITE, ssdStore, RepresentationFamily.RAW, bytes, one),
                    staged, direct,
                    new ShadowRequest(staged, List.of(new ShadowAlternative(direct, true))),
                    new ShadowRequest(staged, List.of(new ShadowAlternative(direct, false))),
                    new ShadowRequest(direct, List.of(new ShadowAlternative(staged, true))),
                    new ShadowRequest(direct, List.of(new ShadowAlternative(staged, false))));
        }
    }

    SsdWriteObservations(CostProxy cost, ResourceId ssdStore, ResourceId dramPool) {
        this.cost = cost;
        this.ssdStore = ssdStore;
        this.dramPool = dramPool;
    }

    private Keys keys(long bytes) {
        SizeBucket bucket = SizeBucket.of(bytes);
        Keys keys = keysByBucket[bucket.log2()];
        if (keys == null) {
            keys = Keys.of(ssdStore, dramPool, bucket);
            keysByBucket[bucket.log2()] = keys;
        }
        return keys;
    }

    @Override
    public void onStagingCopy(long payloadBytes, long nanos) {
        if (cost.observationsEnabled()) {
            cost.report(ObservationRecord.of(keys(payloadBytes).copyOut(), ObservationOutcome.SUCCEEDED, nanos,
                    ObservedBytes.of(payloadBytes, payloadBytes)));
        }
    }

    @Override
    public void onWriteCommitted(long payloadBytes, long serviceNanos, boolean fromSource, long totalNanos,
                                 boolean otherPathPossible) {
        if (!cost.observationsEnabled()) {
            return;
        }
        Keys keys = keys(payloadBytes);
        cost.report(ObservationRecord.of(keys.write(), ObservationOutcome.SUCCEEDED, serviceNanos,
                ObservedBytes.of(payloadBytes, payloadBytes)));
        cost.report(ObservationRecord.of(fromSource ? keys.directRoute() : keys.stagedRoute(),
                ObservationOutcome.SUCCEEDED, totalNanos, ObservedBytes.logicalOnly(payloadBytes)));
        cost.recordShadow(fromSource
                ? (otherPathPossible ? keys.directRan() : keys.directRanOtherImpossible())
                : (otherPathPossible ? keys.stagedRan() : keys.stagedRanOtherImpossible()));
    }

    @Override
    public void onWriteFailed(long payloadBytes, boolean noSpace) {
        if (cost.observationsEnabled()) {
            // A failed write never trains an estimate; how much reached the disk is unknown.
            cost.report(ObservationRecord.of(keys(payloadBytes).write(), ObservationOutcome.FAILED, 0,
                    new ObservedBytes(OptionalLong.of(payloadBytes), OptionalLong.empty())));
        }
    }
}
