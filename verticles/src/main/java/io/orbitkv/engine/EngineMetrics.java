package io.orbitkv.engine;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.protocol.engine.ErrorReason;
import java.util.EnumMap;
import java.util.Locale;
import java.util.Map;

/** The engine role's counters: refusals by reason (any door), internal errors, sealed bytes, invalidated leases. */
final class EngineMetrics {
    private final Map<ErrorReason, Counter> rejections = new EnumMap<>(ErrorReason.class);
    final Counter publishedBytes;
    final Counter internalErrors;
    final Counter invalidatedLeases;

    EngineMetrics(MeterRegistry registry) {
        for (ErrorReason reason : ErrorReason.values()) {
            if (reason != ErrorReason.UNRECOGNIZED && reason != ErrorReason.ERROR_REASON_UNSPECIFIED) {
                rejections.put(reason, Counter.builder("orbitkv.rejections").tag("reason", reason.name().toLowerCase(Locale.ROOT))
                        .description("Refused engine calls by reason").register(registry));
            }
        }
        publishedBytes = Counter.builder("orbitkv.published.bytes").baseUnit("bytes")
                .description("Bytes sealed into the DRAM pool by engines").register(registry);
        internalErrors = Counter.builder("orbitkv.engine.internal.errors").description("Engine calls failed by a Manager fault")
                .register(registry);
        invalidatedLeases = Counter.builder("orbitkv.leases.invalidated")
                .description("Lease releases answered lease_valid=false: the holder's session ended first").register(registry);
    }

    void rejected(ErrorReason reason) {
        Counter counter = rejections.get(reason);
        if (counter != null) {
            counter.increment();
        }
    }
}
