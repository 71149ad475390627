package io.orbitkv.cost;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;

import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import io.orbitkv.model.cost.CostPath;
import io.orbitkv.model.cost.ObservationOutcome;
import io.orbitkv.model.cost.CostStage;

/**
 * Cost meters on a caller-supplied Micrometer registry, all named {@code orbitkv.cost.*} (Prometheus:
 * {@code orbitkv_cost_*}).
 *
 * <p>Design note — labels: only small enums ({@code path}, {@code outcome}, {@code stage}, {@code decision},
 * {@code message}). Request, state and resource identities (device names, incarnations) never become labels; they live
 * only in estimator keys.
 *
 * <p>Design note — concurrency: meters touched from other threads (dropped intake, duplicate finishes) are created
 * eagerly in the constructor; every other meter is created lazily and cached in plain arrays, which only the cost
 * verticle's event loop reads and writes. Micrometer meters themselves are thread-safe.
 *
 * <p>Prometheus names: {@code orbitkv_cost_operations_total}, {@code orbitkv_cost_stage_seconds} (histogram, buckets
 * 1 µs .. 300 s), {@code orbitkv_cost_logical_bytes_total}, {@code orbitkv_cost_logical_unknown_total},
 * {@code orbitkv_cost_io_bytes_total}, {@code orbitkv_cost_io_unknown_total},
 * {@code orbitkv_cost_prediction_error_seconds}, {@code orbitkv_cost_estimate_samples_total},
 * {@code orbitkv_cost_estimate_age_seconds}, {@code orbitkv_cost_estimate_entries},
 * {@code orbitkv_cost_estimate_evictions_total}, {@code orbitkv_cost_estimate_expired_total},
 * {@code orbitkv_cost_updates_dropped_total}, {@code orbitkv_cost_finish_duplicates_total},
 * {@code orbitkv_cost_shadow_decisions_total}.
 */
final class CostMetrics {

    static final String PREFIX = "orbitkv.cost.";
    static final Duration[] SECONDS_BUCKETS = secondsBuckets();

    private static final CostPath[] PATHS = CostPath.values();
    private static final ObservationOutcome[] OUTCOMES = ObservationOutcome.values();
    private static final CostStage[] STAGES = CostStage.values();
    private static final ShadowDecision[] DECISIONS = ShadowDecision.values();

    private final MeterRegistry registry;
    private final Map<CostMessageKind, Counter> dropped = new EnumMap<>(CostMessageKind.class);
    private final Map<CostPath, Counter> duplicateFinishes = new EnumMap<>(CostPath.class);
    private final AtomicInteger estimateEntries = new AtomicInteger();
    private final Counter estimateEvictions;
    private final Counter estimateExpired;

    private final Counter[][] operations = new Counter[PATHS.length][OUTCOMES.length];
    private final Timer[][][] stages = new Timer[PATHS.length][STAGES.length][OUTCOMES.length];
    private final Counter[] logicalBytes = new Counter[PATHS.length];
    private final Counter[] logicalUnknown = new Counter[PATHS.length];
    private final Counter[] ioBytes = new Counter[PATHS.length];
    private final Counter[] ioUnknown = new Counter[PATHS.length];
    private final Timer[] predictionError = new Timer[PATHS.length];
    private final Counter[] estimateSamples = new Counter[PATHS.length];
    private final Timer[] estimateAge = new Timer[PATHS.length];
    private final Counter[][] shadowDecisions = new Counter[PATHS.length][DECISIONS.length];

    CostMetrics(MeterRegistry registry) {
        this.registry = Objects.requireNonNull(registry, "registry");
        for (CostMessageKind kind : CostMessageKind.values()) {
            dropped.put(kind, Counter.builder(PREFIX + "updates.dropped")
                    .description("Messages dropped because the cost intake was full or closed")
                    .tag("message", kind.label()).register(registry));
        }
        for (CostPath path : PATHS) {
            duplicateFinishes.put(path, Counter.builder(PREFIX + "finish.duplicates")
                    .description("Second and later finish() calls on one in-flight observation (ignored)")
                    .tag("path", path.label()).register(registry));
        }
        Gauge.builder(PREFIX + "estimate.entries", estimateEntries, AtomicInteger::get)
                .description("Entries held by the estimator").register(registry);
        estimateEvictions = Counter.builder(PREFIX + "estimate.evictions")
                .description("Estimator entries evicted at capacity").register(registry);
        estimateExpired = Counter.builder(PREFIX + "estimate.expired")
                .description("Expired estimator entries restarted from zero by a new sample").register(registry);
    }

    /** Any thread. */
    void dropped(CostMessageKind kind) {
        dropped.get(kind).increment();
    }

    /** Any thread. */
    void duplicateFinish(CostPath path) {
        duplicateFinishes.get(path).increment();
    }

    void operation(CostPath path, ObservationOutcome outcome) {
        Counter counter = operations[path.ordinal()][outcome.ordinal()];
        if (counter == null) {
            counter = Counter.builder(PREFIX + "operations")
                    .description("Observed operations and routes by terminal outcome")
                    .tag("path", path.label()).tag("outcome", outcome.label()).register(registry);
            operations[path.ordinal()][outcome.ordinal()] = counter;
        }
        counter.increment();
    }

    void stage(CostPath path, CostStage stage, ObservationOutcome outcome, long nanos) {
        Timer timer = stages[path.ordinal()][stage.ordinal()][outcome.ordinal()];
        if (timer == null) {
            timer = secondsTimer("stage", "Host-clock stage durations; stages overlap and are never summed")
                    .tag("path", path.label()).tag("stage", stage.label()).tag("outcome", outcome.label())
                    .register(registry);
            stages[path.ordinal()][stage.ordinal()][outcome.ordinal()] = timer;
        }
        timer.record(nanos, TimeUnit.NANOSECONDS);
    }

    void logicalBytes(CostPath path, long bytes) {
        counter(logicalBytes, path, "logical.bytes", "Known attempted logical bytes", "bytes").increment(bytes);
    }

    void logicalUnknown(CostPath path) {
        counter(logicalUnknown, path, "logical.unknown", "Observations whose logical bytes are unknown", null)
                .increment();
    }

    void ioBytes(CostPath path, long bytes) {
        counter(ioBytes, path, "io.bytes", "Physical I/O bytes known at the I/O owner", "bytes").increment(bytes);
    }

    void ioUnknown(CostPath path) {
        counter(ioUnknown, path, "io.unknown", "Operation observations whose physical I/O bytes are unknown", null)
                .increment();
    }

    void predictionError(CostPath path, long nanos) {
        Timer timer = predictionError[path.ordinal()];
        if (timer == null) {
            timer = secondsTimer("prediction.error", "|sample - prior usable estimate| of successful samples")
                    .tag("path", path.label()).register(registry);
            predictionError[path.ordinal()] = timer;
        }
        timer.record(nanos, TimeUnit.NANOSECONDS);
    }

    void estimateSample(CostPath path) {
        counter(estimateSamples, path, "estimate.samples", "Successful samples that trained an estimate", null)
                .increment();
    }

    void estimateAge(CostPath path, long nanos) {
        Timer timer = estimateAge[path.ordinal()];
        if (timer == null) {
            timer = secondsTimer("estimate.age", "Age of usable estimates when read")
                    .tag("path", path.label()).register(registry);
            estimateAge[path.ordinal()] = timer;
        }
        timer.record(nanos, TimeUnit.NANOSECONDS);
    }

    void estimateEviction() {
        estimateEvictions.increment();
    }

    void estimateExpired() {
        estimateExpired.increment();
    }

    void estimateEntries(int entries) {
        estimateEntries.set(entries);
    }

    void shadowDecision(CostPath currentPath, ShadowDecision decision) {
        Counter counter = shadowDecisions[currentPath.ordinal()][decision.ordinal()];
        if (counter == null) {
            counter = Counter.builder(PREFIX + "shadow.decisions")
                    .description("Shadow comparisons by decision; shadow never changes execution")
                    .tag("path", currentPath.label()).tag("decision", decision.label()).register(registry);
            shadowDecisions[currentPath.ordinal()][decision.ordinal()] = counter;
        }
        counter.increment();
    }

    private Counter counter(Counter[] cache, CostPath path, String name, String description, String baseUnit) {
        Counter counter = cache[path.ordinal()];
        if (counter == null) {
            Counter.Builder builder = Counter.builder(PREFIX + name).description(description).tag("path", path.label());
            if (baseUnit != null) {
                builder.baseUnit(baseUnit);
            }
            counter = builder.register(registry);
            cache[path.ordinal()] = counter;
        }
        return counter;
    }

    private static Timer.Builder secondsTimer(String name, String description) {
        return Timer.builder(PREFIX + name).description(description)
                .serviceLevelObjectives(SECONDS_BUCKETS)
                .minimumExpectedValue(SECONDS_BUCKETS[0])
                .maximumExpectedValue(SECONDS_BUCKETS[SECONDS_BUCKETS.length - 1]);
    }

    /** 1, 2.5, 5 per decade from 1 µs, capped with a final 300 s bucket. */
    private static Duration[] secondsBuckets() {
        long maxNanos = TimeUnit.SECONDS.toNanos(300);
        List<Duration> buckets = new ArrayList<>();
        for (long decade = TimeUnit.MICROSECONDS.toNanos(1); decade <= maxNanos; decade *= 10) {
            for (long nanos : new long[] {decade, decade * 5 / 2, decade * 5}) {
                if (nanos < maxNanos) {
                    buckets.add(Duration.ofNanos(nanos));
                }
            }
        }
        buckets.add(Duration.ofNanos(maxNanos));
        return buckets.toArray(Duration[]::new);
    }
}
