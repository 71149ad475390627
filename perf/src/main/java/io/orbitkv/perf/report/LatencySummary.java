package io.orbitkv.perf.report;

import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import org.HdrHistogram.AbstractHistogram;
import org.HdrHistogram.HistogramIterationValue;

import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;

/**
 * An immutable summary of recorded latencies, in nanoseconds. Percentile values are the highest value equivalent to
 * the recorded bucket (HdrHistogram's convention), so they never understate a latency.
 *
 * @param cdf points of the cumulative distribution, increasing in both coordinates, ending at fraction 1.0; empty
 *            when nothing was recorded
 */
public record LatencySummary(long count, double meanNanos, long minNanos, long maxNanos,
                             long p50Nanos, long p90Nanos, long p99Nanos, long p999Nanos, List<CdfPoint> cdf) {

    /** One point of a latency CDF: the fraction of recorded values at or below {@code latencyNanos}. */
    public record CdfPoint(long latencyNanos, double cumulativeFraction) {
    }

    /** Ratio between consecutive log-spaced CDF points: 8 points per doubling of latency. */
    private static final double CDF_LOG_STEP = Math.pow(2, 1.0 / 8);

    public LatencySummary {
        cdf = List.copyOf(cdf);
    }

    /** Summarises {@code histogram}; {@code ticksPerHalfDistance} sets how densely the CDF tail is sampled. */
    public static LatencySummary of(AbstractHistogram histogram, int ticksPerHalfDistance) {
        long count = histogram.getTotalCount();
        if (count == 0) {
            return new LatencySummary(0, 0.0, 0, 0, 0, 0, 0, 0, List.of());
        }
        return new LatencySummary(count, histogram.getMean(), histogram.getMinValue(), histogram.getMaxValue(),
                histogram.getValueAtPercentile(50.0), histogram.getValueAtPercentile(90.0),
                histogram.getValueAtPercentile(99.0), histogram.getValueAtPercentile(99.9),
                cdf(histogram, ticksPerHalfDistance));
    }

    /**
     * CDF points at the values where the percentile ticks land (dense in the tail, where p99.9 lives) and at
     * log-spaced values between min and max (so the body is not drawn as one straight segment on a log axis). Each
     * point's fraction is the exact share of recorded values at or below its value, so the points are consistent
     * with each other whichever iteration produced them.
     */
    private static List<CdfPoint> cdf(AbstractHistogram histogram, int ticksPerHalfDistance) {
        TreeSet<Long> values = new TreeSet<>();
        for (HistogramIterationValue step : histogram.percentiles(ticksPerHalfDistance)) {
            values.add(histogram.highestEquivalentValue(step.getValueIteratedTo()));
        }
        long min = histogram.getMinValue();
        long max = histogram.getMaxValue();
        for (double value = Math.max(1, min); value < max; value *= CDF_LOG_STEP) {
            values.add(histogram.highestEquivalentValue((long) value));
        }
        values.add(max);
        List<CdfPoint> points = new ArrayList<>(values.size());
        double lastFraction = -1;
        for (long value : values) {
            double fraction = Math.min(1.0, histogram.getPercentileAtOrBelowValue(value) / 100.0);
            // Values in one histogram bucket share a fraction; keep the first so the CDF is strictly increasing.
            if (fraction > lastFraction) {
                points.add(new CdfPoint(value, fraction));
                lastFraction = fraction;
            }
        }
        return points;
    }

    /** Scalar figures only; the CDF is left out because it is plotted, not compared. */
    public JsonObject toJson() {
        return new JsonObject()
                .put("count", count)
                .put("mean_ns", meanNanos)
                .put("min_ns", minNanos)
                .put("p50_ns", p50Nanos)
                .put("p90_ns", p90Nanos)
                .put("p99_ns", p99Nanos)
                .put("p999_ns", p999Nanos)
                .put("max_ns", maxNanos);
    }

    /** {@link #toJson()} plus the CDF as {@code [[latency_ns, fraction], ...]}. */
    public JsonObject toJsonWithCdf() {
        JsonArray points = new JsonArray();
        for (CdfPoint point : cdf) {
            points.add(new JsonArray().add(point.latencyNanos()).add(point.cumulativeFraction()));
        }
        return toJson().put("cdf", points);
    }
}
