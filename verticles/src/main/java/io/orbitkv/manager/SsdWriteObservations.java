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

/** Carries the SSD store's finished writes to the cost role as SSD_WRITE operation samples (when observing). */
final class SsdWriteObservations implements SsdOperationObserver {
    private final CostProxy cost;
    private final ResourceId ssdStore;

    SsdWriteObservations(CostProxy cost, ResourceId ssdStore) {
        this.cost = cost;
        this.ssdStore = ssdStore;
    }

    private CostEstimateKey key(long bytes) {
        return CostEstimateKey.operation(CostPath.SSD_WRITE, ssdStore, RepresentationFamily.RAW, SizeBucket.of(bytes),
                SizeBucket.of(1));
    }

    @Override
    public void onWriteCommitted(long payloadBytes, long serviceNanos) {
        if (cost.observationsEnabled()) {
            cost.report(ObservationRecord.of(key(payloadBytes), ObservationOutcome.SUCCEEDED, serviceNanos,
                    ObservedBytes.of(payloadBytes, payloadBytes)));
        }
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
