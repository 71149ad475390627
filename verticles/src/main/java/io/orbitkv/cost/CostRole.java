package io.orbitkv.cost;

import io.orbitkv.common.Ticker;
import java.util.Objects;
import java.util.OptionalLong;
import io.orbitkv.model.cost.CostPath;
import io.orbitkv.model.cost.ObservationOutcome;
import io.orbitkv.model.cost.ObservationRecord;
import io.orbitkv.model.cost.CostEstimate;
import io.orbitkv.model.cost.CostEstimateResult;
import io.orbitkv.model.cost.ShadowRequest;
import io.orbitkv.model.cost.EstimateQuery;
import io.orbitkv.model.cost.SampleKind;
import io.orbitkv.model.cost.CostStage;

/**
 * The cost role's handlers and the state they own: estimator, shadow comparator and the meters they update.
 * Deterministic and free of the event bus so it can be tested directly; {@link CostVerticle} calls it on its event loop.
 *
 * <p>Design note — what is recorded: every observation counts once in {@code operations{path,outcome}}. Its known
 * sub-stages (queue, admission) and its measured sample (service for operations, total for routes) go to
 * {@code stage_seconds}; a timed-out observation has no measured sample. Logical bytes are counted for every sample,
 * physical I/O bytes only for operation samples (the I/O owner's own count): a route's I/O was already counted by the
 * operations inside it. Unknown byte counts go to their own counters. Only successful samples train the estimator.
 */
final class CostRole {

    private final CostEstimator estimator;
    private final ShadowComparator comparator;
    private final CostMetrics metrics;

    CostRole(Ticker clock, CostMetrics metrics) {
        this.metrics = Objects.requireNonNull(metrics, "metrics");
        this.estimator = new CostEstimator(clock);
        this.comparator = new ShadowComparator(estimator);
    }

    void onObservation(ObservationRecord record) {
        // Plain branches, no capturing lambdas: this runs for every observation on the cost loop.
        CostPath path = record.key().path();
        ObservationOutcome outcome = record.outcome();
        metrics.operation(path, outcome);
        if (record.queueNanos().isPresent()) {
            metrics.stage(path, CostStage.QUEUE, outcome, record.queueNanos().getAsLong());
        }
        if (record.admissionNanos().isPresent()) {
            metrics.stage(path, CostStage.ADMISSION, outcome, record.admissionNanos().getAsLong());
        }
        if (record.measuredNanos().isPresent()) {
            metrics.stage(path, record.measuredStage(), outcome, record.measuredNanos().getAsLong());
        }
        OptionalLong logical = record.bytes().logicalBytes();
        if (logical.isPresent()) {
            metrics.logicalBytes(path, logical.getAsLong());
        } else {
            metrics.logicalUnknown(path);
        }
        if (path.sampleKind() == SampleKind.OPERATION) {
            OptionalLong io = record.bytes().ioBytes();
            if (io.isPresent()) {
                metrics.ioBytes(path, io.getAsLong());
            } else {
                metrics.ioUnknown(path);
            }
        }
        CostEstimator.TrainingResult training = estimator.train(record.key(), outcome, record.measuredNanos());
        if (training.training() == CostEstimator.Training.TRAINED) {
            metrics.estimateSample(path);
            if (training.predictionErrorNanos().isPresent()) {
                metrics.predictionError(path, training.predictionErrorNanos().getAsLong());
            }
            if (training.evictedOldest()) {
                metrics.estimateEviction();
            }
            if (training.restartedExpired()) {
                metrics.estimateExpired();
            }
            metrics.estimateEntries(estimator.size());
        }
    }

    ShadowResult onShadow(ShadowRequest request) {
        ShadowResult result = comparator.compare(request);
        metrics.shadowDecision(request.current().path(), result.decision());
        return result;
    }

    CostEstimateResult onEstimate(EstimateQuery query) {
        CostEstimateResult result = estimator.estimate(query.key());
        if (result instanceof CostEstimateResult.Usable(CostEstimate estimate)) {
            metrics.estimateAge(query.key().path(), estimate.ageNanos());
        }
        return result;
    }
}
