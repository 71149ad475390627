package io.orbitkv.perf.report;

import org.jfree.chart.ChartUtils;
import org.jfree.chart.JFreeChart;
import org.jfree.chart.axis.LogAxis;
import org.jfree.chart.axis.NumberAxis;
import org.jfree.chart.axis.NumberTickUnitSource;
import org.jfree.chart.plot.PlotOrientation;
import org.jfree.chart.plot.XYPlot;
import org.jfree.chart.renderer.xy.XYLineAndShapeRenderer;
import org.jfree.data.xy.XYSeries;
import org.jfree.data.xy.XYSeriesCollection;

import java.awt.BasicStroke;
import java.awt.Color;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.text.DecimalFormat;
import java.text.NumberFormat;
import java.util.List;

/**
 * PNG plots for bench reports: hit ratio vs capacity, latency CDF, throughput vs concurrency.
 *
 * <p>Design note: rendering is headless (no display on build or GPU hosts). {@code java.awt.headless} is set in this
 * class's static initialiser, before jfreechart touches AWT, unless the launcher already chose a value. Series are
 * plain records so report code does not depend on jfreechart types. Reference lines (bounds, baselines) are drawn
 * dashed and without point markers, so a reader can tell measured curves from the limits they approach.
 */
public final class Plots {

    static {
        if (System.getProperty("java.awt.headless") == null) {
            System.setProperty("java.awt.headless", "true");
        }
    }

    /** Default image size, a 4:3 slide-friendly size. */
    public static final int DEFAULT_WIDTH = 1024;
    public static final int DEFAULT_HEIGHT = 768;

    private static final int MAX_POINTS_WITH_MARKERS = 40;

    private static final BasicStroke SOLID = new BasicStroke(2.0f);
    private static final BasicStroke DASHED = new BasicStroke(
            2.0f, BasicStroke.CAP_BUTT, BasicStroke.JOIN_MITER, 10.0f, new float[] {8.0f, 6.0f}, 0.0f);

    private Plots() {
    }

    /**
     * One named curve. {@code reference} marks a bound or baseline, drawn dashed without markers.
     */
    public record Series(String name, double[] x, double[] y, boolean reference) {
        public Series {
            if (x.length != y.length) {
                throw new IllegalArgumentException("series \"" + name + "\": " + x.length + " x values but "
                        + y.length + " y values");
            }
            x = x.clone();
            y = y.clone();
        }

        public static Series measured(String name, double[] x, double[] y) {
            return new Series(name, x, y, false);
        }

        /** A horizontal reference line at {@code y} spanning {@code [fromX, toX]}, e.g. the infinite-cache bound. */
        public static Series horizontal(String name, double y, double fromX, double toX) {
            return new Series(name, new double[] {fromX, toX}, new double[] {y, y}, true);
        }

        /** A latency CDF as a series: x in microseconds (readable axis), y the cumulative fraction. */
        public static Series latencyCdf(String name, List<LatencySummary.CdfPoint> cdf) {
            double[] x = new double[cdf.size()];
            double[] y = new double[cdf.size()];
            for (int i = 0; i < cdf.size(); i++) {
                x[i] = cdf.get(i).latencyNanos() / 1_000.0;
                y[i] = cdf.get(i).cumulativeFraction();
            }
            return new Series(name, x, y, false);
        }
    }

    /** Hit ratio (0..1, shown in percent) against cache capacity in blocks. */
    public static Path hitRatioVsCapacity(Path png, String title, List<Series> series, int width, int height)
            throws IOException {
        NumberAxis capacity = new NumberAxis("cache capacity (blocks)");
        capacity.setAutoRangeIncludesZero(true);
        NumberAxis hitRatio = new NumberAxis("hit ratio");
        hitRatio.setRange(0.0, 1.0);
        hitRatio.setNumberFormatOverride(NumberFormat.getPercentInstance());
        return write(png, title, series, capacity, hitRatio, width, height);
    }

    /**
     * Latency CDFs (series from {@link Series#latencyCdf}): x latency in microseconds on a log scale, y cumulative
     * fraction. Points at zero latency cannot sit on a log axis and are left out; the next point carries their mass.
     */
    public static Path latencyCdf(Path png, String title, List<Series> series, int width, int height)
            throws IOException {
        LogAxis latency = new LogAxis("latency (µs, log scale)");
        latency.setBase(10);
        latency.setSmallestValue(1e-3);
        latency.setStandardTickUnits(NumberAxis.createIntegerTickUnits()); // ticks at whole powers of ten
        latency.setMinorTickMarksVisible(true);
        latency.setNumberFormatOverride(new DecimalFormat("0.###"));
        NumberAxis fraction = new NumberAxis("cumulative fraction");
        fraction.setRange(0.0, 1.0);
        List<Series> positive = series.stream().map(Plots::withoutNonPositiveX).toList();
        return write(png, title, positive, latency, fraction, width, height);
    }

    /** Throughput (e.g. operations/s or GB/s, named by {@code throughputLabel}) against concurrency. */
    public static Path throughputVsConcurrency(Path png, String title, String throughputLabel, List<Series> series,
                                               int width, int height) throws IOException {
        NumberAxis concurrency = new NumberAxis("concurrency");
        concurrency.setStandardTickUnits(NumberAxis.createIntegerTickUnits());
        concurrency.setAutoRangeIncludesZero(false);
        NumberAxis throughput = new NumberAxis(throughputLabel);
        throughput.setAutoRangeIncludesZero(true);
        throughput.setStandardTickUnits(new NumberTickUnitSource());
        return write(png, title, series, concurrency, throughput, width, height);
    }

    private static Path write(Path png, String title, List<Series> series, org.jfree.chart.axis.ValueAxis xAxis,
                              NumberAxis yAxis, int width, int height) throws IOException {
        if (width <= 0 || height <= 0) {
            throw new IllegalArgumentException("image size must be positive, got " + width + "x" + height);
        }
        if (series.isEmpty()) {
            throw new IllegalArgumentException("nothing to plot for \"" + title + "\"");
        }
        XYSeriesCollection dataset = new XYSeriesCollection();
        XYLineAndShapeRenderer renderer = new XYLineAndShapeRenderer(true, true);
        for (int i = 0; i < series.size(); i++) {
            Series s = series.get(i);
            // autoSort=false keeps the caller's order; duplicates allowed because a CDF can repeat an x value.
            XYSeries xy = new XYSeries(s.name(), false, true);
            for (int p = 0; p < s.x().length; p++) {
                xy.add(s.x()[p], s.y()[p]);
            }
            dataset.addSeries(xy);
            renderer.setSeriesStroke(i, s.reference() ? DASHED : SOLID);
            // Markers help read a few measured points; on a dense curve (a CDF) they only blur it.
            renderer.setSeriesShapesVisible(i, !s.reference() && s.x().length <= MAX_POINTS_WITH_MARKERS);
        }
        XYPlot plot = new XYPlot(dataset, xAxis, yAxis, renderer);
        plot.setOrientation(PlotOrientation.VERTICAL);
        plot.setBackgroundPaint(Color.WHITE);
        plot.setDomainGridlinePaint(Color.LIGHT_GRAY);
        plot.setRangeGridlinePaint(Color.LIGHT_GRAY);
        JFreeChart chart = new JFreeChart(title, JFreeChart.DEFAULT_TITLE_FONT, plot, true);
        chart.setBackgroundPaint(Color.WHITE);
        Path parent = png.toAbsolutePath().getParent();
        if (parent != null) {
            Files.createDirectories(parent);
        }
        ChartUtils.saveChartAsPNG(png.toFile(), chart, width, height);
        return png;
    }

    private static Series withoutNonPositiveX(Series series) {
        int kept = 0;
        for (double x : series.x()) {
            if (x > 0) {
                kept++;
            }
        }
        double[] x = new double[kept];
        double[] y = new double[kept];
        int next = 0;
        for (int i = 0; i < series.x().length; i++) {
            if (series.x()[i] > 0) {
                x[next] = series.x()[i];
                y[next++] = series.y()[i];
            }
        }
        return new Series(series.name(), x, y, series.reference());
    }
}
