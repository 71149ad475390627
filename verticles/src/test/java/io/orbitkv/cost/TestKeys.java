package io.orbitkv.cost;

import java.util.OptionalLong;
import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.model.cost.CostEstimateKey;
import io.orbitkv.model.cost.CostPath;
import io.orbitkv.model.cost.ObservationOutcome;
import io.orbitkv.model.cost.ObservationRecord;
import io.orbitkv.model.cost.ObservedBytes;
import io.orbitkv.model.cost.RepresentationFamily;
import io.orbitkv.model.cost.ResourceId;
import io.orbitkv.model.cost.ResourceKind;
import io.orbitkv.model.cost.SizeBucket;

/** Keys and records shared by the cost tests. Identities are distinctive so scrape tests can look for leaks. */
final class TestKeys {

    static final long STORE_INCARNATION = 987_654_321L;
    static final ResourceId STORE = new ResourceId(ResourceKind.SSD_STORE, "ssd-store-0", STORE_INCARNATION);
    static final ResourceId GPU0 = new ResourceId(ResourceKind.GPU_DEVICE, "gpu-device-0", 11L);
    static final ResourceId GPU1 = new ResourceId(ResourceKind.GPU_DEVICE, "gpu-device-1", 11L);

    private TestKeys() {
    }

    static CostEstimateKey ssdRead(long bytes) {
        return CostEstimateKey.operation(CostPath.SSD_READ, STORE, RepresentationFamily.RAW,
                SizeBucket.of(bytes), SizeBucket.of(1));
    }

    static CostEstimateKey ssdRead(int index, long bytes) {
        return CostEstimateKey.operation(CostPath.SSD_READ,
                new ResourceId(ResourceKind.SSD_STORE, "store-" + index, 1L), RepresentationFamily.RAW,
                SizeBucket.of(bytes), SizeBucket.of(1));
    }

    static CostEstimateKey restore(CostPath path, ResourceId gpu) {
        return restore(path, gpu, SizeBucket.of(1L << 20));
    }

    static CostEstimateKey restore(CostPath path, ResourceId gpu, SizeBucket bytes) {
        return CostEstimateKey.route(path, STORE, RepresentationFamily.RAW, bytes, SizeBucket.of(16),
                CompletionTarget.engineRestore(gpu));
    }

    static ObservationRecord succeeded(CostEstimateKey key, long nanos) {
        return ObservationRecord.of(key, ObservationOutcome.SUCCEEDED, nanos, ObservedBytes.of(4096, 4096));
    }

    static ObservationRecord outcome(CostEstimateKey key, ObservationOutcome outcome, long nanos) {
        return new ObservationRecord(key, outcome, OptionalLong.empty(), OptionalLong.empty(), OptionalLong.of(nanos),
                ObservedBytes.UNKNOWN);
    }
}
