package io.orbitkv.manager;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.turbo.TurboFilter;
import ch.qos.logback.core.spi.FilterReply;
import org.slf4j.ILoggerFactory;
import org.slf4j.LoggerFactory;
import org.slf4j.Marker;

/**
 * Silences one false alarm at Manager start: "This Gauge has been already registered
 * (MeterId{name='vertx.eventbus.handlers', tags=[]})".
 *
 * <p>Design note — why it appears and why it is harmless: Vert.x's Micrometer metrics (vertx-micrometer-metrics 5.0.x)
 * build a {@code vertx.eventbus.handlers} gauge for every handler registered. The Manager keeps the event-bus address
 * out of metric labels ({@link Manager#VERTX_METRIC_LABELS}: reply addresses are unbounded and name requests), so
 * every handler's gauge has the same id and the second role's consumer registers it again; Micrometer 1.13.9+ logs a
 * WARN for any gauge registered twice and ignores the second one. The value stays right: Vert.x keeps one counter per
 * id in its own map and the first gauge reads that counter, which every later handler updates (the library issue is
 * vertx-micrometer-metrics #259, open). Nothing of ours is registered twice.
 *
 * <p>The filter denies exactly that message for meters named {@code vertx.*} from Micrometer's registry logger, and
 * nothing else: a double registration of an {@code orbitkv_*} meter still warns. It is installed once per JVM when a
 * Manager's Vertx is built; it holds no resources.
 */
final class VertxGaugeReregistration extends TurboFilter {

    static final String REGISTRY_LOGGER = "io.micrometer.core.instrument.MeterRegistry";
    private static final String MARK = "has been already registered (MeterId{name='vertx.";

    private VertxGaugeReregistration() {
    }

    /** Adds the filter to logback's context (idempotent; does nothing when logback is not the SLF4J backend). */
    static synchronized void install() {
        ILoggerFactory factory = LoggerFactory.getILoggerFactory();
        if (!(factory instanceof LoggerContext context)) {
            return;
        }
        for (TurboFilter filter : context.getTurboFilterList()) {
            if (filter instanceof VertxGaugeReregistration) {
                return;
            }
        }
        VertxGaugeReregistration filter = new VertxGaugeReregistration();
        filter.setName("vertx-gauge-reregistration");
        filter.start();
        context.addTurboFilter(filter);
    }

    @Override
    public FilterReply decide(Marker marker, Logger logger, Level level, String format, Object[] params,
                              Throwable t) {
        if (logger != null && REGISTRY_LOGGER.equals(logger.getName()) && format != null && format.contains(MARK)) {
            return FilterReply.DENY;
        }
        return FilterReply.NEUTRAL;
    }
}
