package io.orbitkv.admission;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.admission.AdmissionCommands.Status;
import io.orbitkv.model.plan.PreparationResult;
import java.util.EnumMap;
import java.util.Map;

/** The admission role's counters: answers by outcome, bytes handed to engines, refused speculation, take-overs. */
final class AdmissionMeters {
    private final Map<Status, Counter> queriesByOutcome = new EnumMap<>(Status.class);
    private final Map<PreparationResult.TakeOver, Counter> takeOvers = new EnumMap<>(PreparationResult.TakeOver.class);
    final Counter restoredBytes;
    final Counter speculationRefused;

    AdmissionMeters(MeterRegistry registry) {
        for (Status status : Status.values()) {
            queriesByOutcome.put(status, Counter.builder("orbitkv.queries").tag("outcome", status.name().toLowerCase())
                    .description("Query answers by outcome").register(registry));
        }
        restoredBytes = Counter.builder("orbitkv.restored.bytes").baseUnit("bytes")
                .description("Bytes handed to engines under READY leases").register(registry);
        speculationRefused = Counter.builder("orbitkv.queries.speculation.refused")
                .description("Speculative demands answered MISS because their confidence did not cover their bytes")
                .register(registry);
        for (PreparationResult.TakeOver from : PreparationResult.TakeOver.values()) {
            takeOvers.put(from, Counter.builder("orbitkv.queries.takeovers").tag("from", from.name().toLowerCase())
                    .description("Real demands answered with what their speculative hint prepared, without planning"
                            + " or reading again").register(registry));
        }
    }

    void answered(Status status) {
        queriesByOutcome.get(status).increment();
    }

    void tookOver(PreparationResult.TakeOver from) {
        takeOvers.get(from).increment();
    }
}
