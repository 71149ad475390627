package io.orbitkv.engine;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.protocol.engine.ErrorReason;
import java.util.EnumMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The event-bus bridge's meters: its refusals by reason (also counted in the engine's door-agnostic
 * {@code orbitkv.rejections}), open connections, requests in the Manager (a leak check: zero when idle), and how often
 * reading was paused because a client did not read its replies.
 */
final class BridgeMetrics {
    private final EngineMetrics engine;
    private final Map<ErrorReason, Counter> rejections = new EnumMap<>(ErrorReason.class);
    final Counter readsPaused;
    final AtomicInteger connections = new AtomicInteger();
    final AtomicLong outstanding = new AtomicLong();

    BridgeMetrics(MeterRegistry registry, EngineMetrics engine) {
        this.engine = engine;
        for (ErrorReason reason : ErrorReason.values()) {
            if (reason != ErrorReason.UNRECOGNIZED && reason != ErrorReason.ERROR_REASON_UNSPECIFIED) {
                rejections.put(reason, Counter.builder("orbitkv.bridge.rejections")
                        .tag("reason", reason.name().toLowerCase(Locale.ROOT))
                        .description("Refusals answered on the event-bus bridge, by reason").register(registry));
            }
        }
        readsPaused = Counter.builder("orbitkv.bridge.reads.paused")
                .description("Times a bridge connection stopped being read because its replies were not being read")
                .register(registry);
        Gauge.builder("orbitkv.bridge.connections", connections, AtomicInteger::get)
                .description("Open event-bus bridge connections").register(registry);
        Gauge.builder("orbitkv.bridge.outstanding", outstanding, AtomicLong::get)
                .description("Bridge requests admitted and not yet answered by their operation").register(registry);
    }

    void rejected(ErrorReason reason) {
        engine.rejected(reason);
        Counter counter = rejections.get(reason);
        if (counter != null) {
            counter.increment();
        }
    }

    void internalError() {
        engine.internalErrors.increment();
    }
}
