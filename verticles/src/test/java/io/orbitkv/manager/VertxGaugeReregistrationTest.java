package io.orbitkv.manager;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import ch.qos.logback.core.spi.FilterReply;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.vertx.core.Vertx;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

/**
 * The "vertx.eventbus.handlers already registered" WARN at Manager start: Vert.x registers its per-handler gauge once
 * per handler under one id (the Manager keeps addresses out of labels). The filter silences exactly that message; the
 * gauge still counts every handler; a double registration of one of our meters is still logged.
 */
class VertxGaugeReregistrationTest {

    @Test
    void aManagerVertxRegisteringSeveralHandlersLogsNoDoubleRegistrationAndCountsThemAll() throws Exception {
        LoggerContext context = (LoggerContext) LoggerFactory.getILoggerFactory();
        Logger registryLogger = context.getLogger(VertxGaugeReregistration.REGISTRY_LOGGER);
        Level before = registryLogger.getLevel();
        ListAppender<ILoggingEvent> seen = new ListAppender<>();
        seen.start();
        registryLogger.addAppender(seen);
        // DEBUG too: Micrometer logs the first double registration in a JVM at WARN and later ones at DEBUG.
        registryLogger.setLevel(Level.DEBUG);
        PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        Vertx vertx = Manager.newVertx(1, registry, "gauge-reregistration-test");
        try {
            for (int i = 0; i < 3; i++) {
                vertx.eventBus().consumer("test.handler." + i, message -> { }).completion()
                        .toCompletionStage().toCompletableFuture().get(10, TimeUnit.SECONDS);
            }
            assertThat(seen.list).extracting(ILoggingEvent::getFormattedMessage)
                    .noneMatch(message -> message.contains("vertx.eventbus.handlers"));
            Gauge handlers = registry.find("vertx.eventbus.handlers").gauge();
            assertThat(handlers).isNotNull();
            assertThat(handlers.value()).isGreaterThanOrEqualTo(3);

            // Our own meters are not covered: their double registration still reaches the log.
            Gauge.builder("orbitkv.test.twice", () -> 1).register(registry);
            Gauge.builder("orbitkv.test.twice", () -> 2).register(registry);
            assertThat(seen.list).extracting(ILoggingEvent::getFormattedMessage)
                    .anyMatch(message -> message.contains("orbitkv.test.twice"));
        } finally {
            registryLogger.detachAppender(seen);
            registryLogger.setLevel(before);
            vertx.close().toCompletionStage().toCompletableFuture().get(10, TimeUnit.SECONDS);
        }
    }

    @Test
    void theFilterMatchesOnlyVertxMetersFromMicrometersRegistryLogger() {
        VertxGaugeReregistration.install();
        VertxGaugeReregistration filter = (VertxGaugeReregistration) ((LoggerContext) LoggerFactory.getILoggerFactory())
                .getTurboFilterList().stream().filter(f -> f instanceof VertxGaugeReregistration).findFirst()
                .orElseThrow();
        LoggerContext context = (LoggerContext) LoggerFactory.getILoggerFactory();
        Logger registryLogger = context.getLogger(VertxGaugeReregistration.REGISTRY_LOGGER);
        String vertxMessage = "This Gauge has been already registered (MeterId{name='vertx.eventbus.handlers', "
                + "tags=[]}), the registration will be ignored.";
        String ours = "This Gauge has been already registered (MeterId{name='orbitkv.pool.free', tags=[]}), the "
                + "registration will be ignored.";
        assertThat(filter.decide(null, registryLogger, Level.WARN, vertxMessage, null, null)).isEqualTo(FilterReply.DENY);
        assertThat(filter.decide(null, registryLogger, Level.WARN, ours, null, null)).isEqualTo(FilterReply.NEUTRAL);
        assertThat(filter.decide(null, context.getLogger("io.orbitkv.other"), Level.WARN, vertxMessage, null, null))
                .isEqualTo(FilterReply.NEUTRAL);
        VertxGaugeReregistration.install();
        assertThat(context.getTurboFilterList().stream().filter(f -> f instanceof VertxGaugeReregistration))
                .hasSize(1);
    }
}
