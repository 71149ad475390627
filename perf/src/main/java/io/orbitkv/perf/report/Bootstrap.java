package io.orbitkv.perf.report;

import io.vertx.core.json.JsonObject;
import java.util.Arrays;
import java.util.SplittableRandom;

/**
 * Percentile-bootstrap confidence intervals of the median of paired samples (one value per round, e.g. the on/off
 * regression of a round whose two sides ran back to back). Resampling whole rounds keeps each pair together, so the
 * interval reflects how much the rounds disagree, not only how many there are. Seeded: a report's interval can be
 * recomputed from its rounds.
 */
public final class Bootstrap {
    private Bootstrap() {}

    /** A statistic, its interval and how it was obtained. */
    public record Interval(double estimate, double lower, double upper, double confidence, int resamples, long seed) {
        public JsonObject toJson() {
            return new JsonObject().put("median", estimate).put("lower", lower).put("upper", upper)
                    .put("confidence", confidence).put("resamples", resamples).put("seed", seed)
                    .put("method", "percentile bootstrap of the median, resampling rounds with replacement");
        }
    }

    /** The {@code confidence} (e.g. 0.95) percentile-bootstrap interval of the median of {@code values}. */
    public static Interval medianInterval(double[] values, double confidence, int resamples, long seed) {
        if (values.length == 0) {
            throw new IllegalArgumentException("no values to bootstrap");
        }
        if (!(confidence > 0 && confidence < 1) || resamples < 1) {
            throw new IllegalArgumentException("confidence in (0, 1) and at least one resample");
        }
        SplittableRandom random = new SplittableRandom(seed);
        double[] medians = new double[resamples];
        double[] sample = new double[values.length];
        for (int b = 0; b < resamples; b++) {
            for (int i = 0; i < sample.length; i++) {
                sample[i] = values[random.nextInt(values.length)];
            }
            medians[b] = median(sample);
        }
        Arrays.sort(medians);
        double tail = (1 - confidence) / 2;
        return new Interval(median(values), quantile(medians, tail), quantile(medians, 1 - tail), confidence, resamples,
                seed);
    }

    /** The median; sorts a copy. */
    public static double median(double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        int n = sorted.length;
        return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    }

    /** Linear-interpolated quantile of sorted values. */
    static double quantile(double[] sorted, double q) {
        double position = q * (sorted.length - 1);
        int below = (int) Math.floor(position);
        int above = Math.min(below + 1, sorted.length - 1);
        return sorted[below] + (position - below) * (sorted[above] - sorted[below]);
    }
}
