package io.orbitkv.perf.report;

import org.HdrHistogram.Histogram;
import org.HdrHistogram.Recorder;
import org.HdrHistogram.SingleWriterRecorder;

/**
 * Records latencies in nanoseconds into an HdrHistogram and summarises them (percentiles, mean, max, CDF points).
 *
 * <p>Design note: writers record into an HdrHistogram {@link Recorder} ({@link #concurrent()}: wait-free for any
 * number of writer threads) or {@link SingleWriterRecorder} ({@link #singleWriter()}: one writer thread, no atomic
 * increments). Readers never touch the live histogram: {@link #summary()} swaps out the interval histogram and folds
 * it into a cumulative one under this object's lock, so a load generator can take progress summaries while workers
 * keep recording without losing or double-counting values. Histograms auto-resize, so there is no highest trackable
 * value to guess; values keep {@value #SIGNIFICANT_DIGITS} significant digits (0.1 % relative error).
 */
public final class LatencyRecorder {

    /** Precision of recorded values: 3 significant decimal digits. */
    public static final int SIGNIFICANT_DIGITS = 3;

    /** CDF resolution: points per halving of the remaining tail (HdrHistogram percentile ticks). */
    private static final int CDF_TICKS_PER_HALF_DISTANCE = 5;

    private final Writer writer;
    private final Histogram cumulative = new Histogram(SIGNIFICANT_DIGITS);
    private Histogram recycled;

    private LatencyRecorder(Writer writer) {
        this.writer = writer;
    }

    /** For recording from any number of threads at once. */
    public static LatencyRecorder concurrent() {
        return over(new Recorder(SIGNIFICANT_DIGITS));
    }

    /** For recording from one thread at a time (summaries may still be taken from another thread). */
    public static LatencyRecorder singleWriter() {
        return over(new SingleWriterRecorder(SIGNIFICANT_DIGITS));
    }

    /** Both HdrHistogram recorders record values and hand out interval histograms the same way. */
    private static <R extends org.HdrHistogram.ValueRecorder & org.HdrHistogram.IntervalHistogramProvider<Histogram>>
    LatencyRecorder over(R recorder) {
        return new LatencyRecorder(new Writer() {
            @Override
            public void record(long value) {
                recorder.recordValue(value);
            }

            @Override
            public void record(long value, long expectedIntervalNanos) {
                recorder.recordValueWithExpectedInterval(value, expectedIntervalNanos);
            }

            @Override
            public Histogram swapInterval(Histogram recycle) {
                return recorder.getIntervalHistogram(recycle);
            }
        });
    }

    /** Records one latency; a negative value is a caller bug (e.g. mixed clocks) and is rejected. */
    public void recordNanos(long latencyNanos) {
        writer.record(requireNonNegative(latencyNanos));
    }

    /**
     * Records one latency of a request that was scheduled every {@code expectedIntervalNanos} (open-loop load): when
     * the latency exceeds the interval, the requests a stalled system would have delayed are back-filled, correcting
     * coordinated omission.
     */
    public void recordNanos(long latencyNanos, long expectedIntervalNanos) {
        writer.record(requireNonNegative(latencyNanos), expectedIntervalNanos);
    }

    /** Records {@code System.nanoTime() - startNanos} and returns it. */
    public long recordSince(long startNanos) {
        long latencyNanos = System.nanoTime() - startNanos;
        recordNanos(latencyNanos);
        return latencyNanos;
    }

    /** Everything recorded since creation or the last {@link #reset()}. */
    public synchronized LatencySummary summary() {
        foldInterval();
        return LatencySummary.of(cumulative, CDF_TICKS_PER_HALF_DISTANCE);
    }

    /** A copy of the cumulative histogram, e.g. to merge several recorders or to log it in HdrHistogram's format. */
    public synchronized Histogram histogramCopy() {
        foldInterval();
        return cumulative.copy();
    }

    /** Forgets everything recorded so far (e.g. after warm-up). */
    public synchronized void reset() {
        foldInterval();
        cumulative.reset();
    }

    private void foldInterval() {
        Histogram interval = writer.swapInterval(recycled);
        cumulative.add(interval);
        recycled = interval;
    }

    private static long requireNonNegative(long latencyNanos) {
        if (latencyNanos < 0) {
            throw new IllegalArgumentException("latency must be >= 0 ns, got " + latencyNanos);
        }
        return latencyNanos;
    }

    /** The two HdrHistogram recorders share no interface; this is the part both offer. */
    private interface Writer {
        void record(long value);

        void record(long value, long expectedIntervalNanos);

        Histogram swapInterval(Histogram recycle);
    }
}
