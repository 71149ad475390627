package io.orbitkv.manager;

import io.orbitkv.cost.CostEstimateKey;
import io.orbitkv.cost.CostPath;
import io.orbitkv.cost.CostProxy;
import io.orbitkv.cost.ObservationOutcome;
import io.orbitkv.cost.ObservationRecord;
import io.orbitkv.cost.ObservedBytes;
import io.orbitkv.cost.RepresentationFamily;
import io.orbitkv.cost.ResourceId;
import io.orbitkv.cost.SizeBucket;
import io.orbitkv.ssd.SsdOperationObserver;

/**
 * Carries the SSD store's finished writes to the cost role (when observing): SSD_WRITE operations, the pool copy into
 * staging (POOL_COPY_OUT), and the complete save route of each write (seal → committed extent) by the path that ran,
 * compared in shadow with the other path: staging copy versus writing straight from the DRAM slot. Shadow never runs
 * the alternative; a path never executed stays unknown.
 */
final class SsdWriteObservations implements SsdOperationObserver {
    private final CostProxy cost;
    private final ResourceId ssdStore;
    private final ResourceId dramPool;

    SsdWriteObservations(CostProxy cost, ResourceId ssdStore, ResourceId dramPool) {
        this.cost = cost;
        this.ssdStore = ssdStore;
        this.dramPool = dramPool;
    }

    private CostEstimateKey saveRoute(boolean direct, long bytes) {
        return CostEstimateKey.route(direct ? CostPath.SSD_SAVE_DIRECT_ROUTE : CostPath.SSD_SAVE_STAGED_ROUTE, ssdStore,
                RepresentationFamily.RAW, SizeBucket.of(bytes), SizeBucket.of(1),
                io.orbitkv.cost.CompletionTarget.saveCompletion(dramPool));
    }

    @Override
    public void onStagingCopy(long payloadBytes, long nanos) {
        if (cost.observationsEnabled()) {
            cost.report(ObservationRecord.of(CostEstimateKey.operation(CostPath.POOL_COPY_OUT, dramPool,
                    RepresentationFamily.RAW, SizeBucket.of(payloadBytes), SizeBucket.of(1)),
                    ObservationOutcome.SUCCEEDED, nanos, ObservedBytes.of(payloadBytes, payloadBytes)));
        }
    }

    private CostEstimateKey key(long bytes) {
        return CostEstimateKey.operation(CostPath.SSD_WRITE, ssdStore, RepresentationFamily.RAW, SizeBucket.of(bytes),
                SizeBucket.of(1));
    }

    @Override
    public void onWriteCommitted(long payloadBytes, long serviceNanos, boolean fromSource, long totalNanos,
                                 boolean otherPathPossible) {
        if (!cost.observationsEnabled()) {
            return;
        }
        cost.report(ObservationRecord.of(key(payloadBytes), ObservationOutcome.SUCCEEDED, serviceNanos,
                ObservedBytes.of(payloadBytes, payloadBytes)));
        CostEstimateKey executed = saveRoute(fromSource, payloadBytes);
        cost.report(ObservationRecord.of(executed, ObservationOutcome.SUCCEEDED, totalNanos,
                ObservedBytes.logicalOnly(payloadBytes)));
        cost.recordShadow(new io.orbitkv.cost.ShadowRequest(executed, java.util.List.of(
                new io.orbitkv.cost.ShadowAlternative(saveRoute(!fromSource, payloadBytes), otherPathPossible))));
    }

    @Override
    public void onWriteFailed(long payloadBytes, boolean noSpace) {
        if (cost.observationsEnabled()) {
            // A failed write never trains an estimate; how much reached the disk is unknown.
            cost.report(ObservationRecord.of(key(payloadBytes), ObservationOutcome.FAILED, 0,
                    new ObservedBytes(java.util.OptionalLong.of(payloadBytes), java.util.OptionalLong.empty())));
        }
    }
}
