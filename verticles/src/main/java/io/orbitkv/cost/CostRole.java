package io.orbitkv.cost;

import io.orbitkv.common.Ticker;
import java.util.Objects;

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
        CostPath path = record.key().path();
        ObservationOutcome outcome = record.outcome();
        metrics.operation(path, outcome);
        record.queueNanos().ifPresent(nanos -> metrics.stage(path, CostStage.QUEUE, outcome, nanos));
        record.admissionNanos().ifPresent(nanos -> metrics.stage(path, CostStage.ADMISSION, outcome, nanos));
        record.measuredNanos().ifPresent(nanos -> metrics.stage(path, record.measuredStage(), outcome, nanos));
        record.bytes().logicalBytes().ifPresentOrElse(
                bytes -> metrics.logicalBytes(path, bytes), () -> metrics.logicalUnknown(path));
        if (path.sampleKind() == SampleKind.OPERATION) {
            record.bytes().ioBytes().ifPresentOrElse(
                    bytes -> metrics.ioBytes(path, bytes), () -> metrics.ioUnknown(path));
        }
        CostEstimator.TrainingResult training = estimator.train(record.key(), outcome, record.measuredNanos());
        if (training.training() == CostEstimator.Training.TRAINED) {
            metrics.estimateSample(path);
            training.predictionErrorNanos().ifPresent(nanos -> metrics.predictionError(path, nanos));
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
