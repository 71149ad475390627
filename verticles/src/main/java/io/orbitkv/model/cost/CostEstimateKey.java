package io.orbitkv.model.cost;

import java.util.Objects;
import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.model.cost.CostPath;
import io.orbitkv.model.cost.RepresentationFamily;
import io.orbitkv.model.cost.ResourceId;
import io.orbitkv.model.cost.SampleKind;
import io.orbitkv.model.cost.SizeBucket;

/**
 * Statistical identity of an estimate: path, resource (with incarnation), representation family, byte and
 * descriptor/fragment buckets, and completion target. It deliberately holds no request id, state key or generation:
 * those belong to correctness validation, and keying on them would make every sample its own entry.
 *
 * <p>Operation paths end at {@link CompletionTarget.Intent#OPERATION_COMPLETE}; route paths end at a declared target.
 */
public record CostEstimateKey(
        CostPath path,
        ResourceId resource,
        RepresentationFamily representation,
        SizeBucket bytes,
        SizeBucket fragments,
        CompletionTarget target) {

    public CostEstimateKey {
        Objects.requireNonNull(path, "path");
        Objects.requireNonNull(resource, "resource");
        Objects.requireNonNull(representation, "representation");
        Objects.requireNonNull(bytes, "bytes");
        Objects.requireNonNull(fragments, "fragments");
        Objects.requireNonNull(target, "target");
        boolean operationTarget = target.intent() == CompletionTarget.Intent.OPERATION_COMPLETE;
        if ((path.sampleKind() == SampleKind.OPERATION) != operationTarget) {
            throw new IllegalArgumentException(path + " is a " + path.sampleKind() + " path; target " + target.intent()
                    + " does not fit");
        }
    }

    /** Key of an operation sample. */
    public static CostEstimateKey operation(CostPath path, ResourceId resource, RepresentationFamily representation,
                                            SizeBucket bytes, SizeBucket fragments) {
        return new CostEstimateKey(path, resource, representation, bytes, fragments,
                CompletionTarget.operationComplete());
    }

    /** Key of a complete-route sample ending at {@code target}. */
    public static CostEstimateKey route(CostPath path, ResourceId resource, RepresentationFamily representation,
                                        SizeBucket bytes, SizeBucket fragments, CompletionTarget target) {
        return new CostEstimateKey(path, resource, representation, bytes, fragments, target);
    }

    // Plain equals and hashCode: the estimator and the shadow comparator look keys up for every observation; enums
    // compare by identity and shared parts (resource, target, buckets) are usually the same instance.
    @Override
    public boolean equals(Object o) {
        return o == this || o instanceof CostEstimateKey other && other.path == path
                && other.representation == representation && other.bytes.equals(bytes)
                && other.fragments.equals(fragments) && other.resource.equals(resource) && other.target.equals(target);
    }

    @Override
    public int hashCode() {
        int h = path.ordinal();
        h = h * 31 + representation.ordinal();
        h = h * 31 + bytes.hashCode();
        h = h * 31 + fragments.hashCode();
        h = h * 31 + resource.hashCode();
        return h * 31 + target.hashCode();
    }

    public SampleKind sampleKind() {
        return path.sampleKind();
    }
}
