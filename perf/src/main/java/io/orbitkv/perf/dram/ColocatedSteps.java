package io.orbitkv.perf.dram;

import io.orbitkv.protocol.colocated.ColocatedFrame;
import io.vertx.core.json.JsonObject;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import jdk.jfr.Configuration;
import jdk.jfr.Recording;
import jdk.jfr.ValueDescriptor;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;

/**
 * {@code bench dram --colocated-steps}: where a co-located call's time goes. A JFR recording over the measured
 * iterations of part (c) enables the two step events (the Manager's {@code io.orbitkv.ColocatedCall} and the engine's
 * {@code io.orbitkv.ColocatedClientCall}) and reports the p50 of each step per call (SubmitQuery, Ping, ReleaseLease).
 * The engine's wait minus the Manager's part is what the kernel and the scheduler add (two messages, the wake-ups).
 * With {@code --colocated-jfr=FILE} the recording also samples stacks every millisecond (the JDK's "profile" settings)
 * and is kept there for {@code jfr print} or JMC. The events cost two clock reads per step when enabled, nothing
 * measurable when not: the figures of a run with the switch and one without are reported apart.
 *
 * <p>Owns one JFR recording and its temporary file; {@link #summary} stops the recording and deletes the file unless it
 * was asked to be kept.
 */
final class ColocatedSteps {
    static final String MANAGER_EVENT = "io.orbitkv.ColocatedCall";
    static final String ENGINE_EVENT = "io.orbitkv.ColocatedClientCall";

    private final Recording recording;
    private final Path keep;

    private ColocatedSteps(Recording recording, Path keep) {
        this.recording = recording;
        this.keep = keep;
    }

    /** Starts recording the step events (and stack samples when {@code keep} is set). */
    static ColocatedSteps start(Path keep) throws IOException, java.text.ParseException {
        Recording recording = keep == null ? new Recording() : new Recording(Configuration.getConfiguration("profile"));
        recording.enable(MANAGER_EVENT);
        recording.enable(ENGINE_EVENT);
        if (keep != null) {
            recording.enable("jdk.ExecutionSample").withPeriod(Duration.ofMillis(1));
        }
        recording.setToDisk(true);
        recording.start();
        return new ColocatedSteps(recording, keep);
    }

    /** Stops the recording and returns the p50 of each step (µs) per call, keyed by method name. */
    JsonObject summary() throws IOException {
        recording.stop();
        Path file = keep != null ? keep : Files.createTempFile("orbitkv-colocated-steps-", ".jfr");
        try {
            recording.dump(file);
            Map<String, Map<String, List<Long>>> byCall = new TreeMap<>();
            for (RecordedEvent event : RecordingFile.readAllEvents(file)) {
                String type = event.getEventType().getName();
                boolean manager = type.equals(MANAGER_EVENT);
                if (!manager && !type.equals(ENGINE_EVENT)) {
                    continue;
                }
                String method = ColocatedFrame.method(event.getInt("opcode"));
                Map<String, List<Long>> steps = byCall.computeIfAbsent(method == null ? "Hello" : method, m -> new TreeMap<>());
                String side = manager ? "manager_" : "engine_";
                long total = 0;
                for (ValueDescriptor field : event.getFields()) {
                    if (field.getName().endsWith("Nanos")) { // the steps, whatever this build's door records
                        long nanos = event.getLong(field.getName());
                        steps.computeIfAbsent(side + field.getName(), s -> new ArrayList<>()).add(nanos);
                        total += nanos;
                    }
                }
                if (manager) {
                    steps.computeIfAbsent("manager_totalNanos", s -> new ArrayList<>()).add(total);
                }
            }
            JsonObject summary = new JsonObject();
            byCall.forEach((method, steps) -> {
                JsonObject call = new JsonObject();
                steps.forEach((step, values) -> call.put(step.replace("Nanos", "_p50_micros"), p50(values) / 1e3));
                call.put("events", steps.values().stream().mapToInt(List::size).max().orElse(0));
                if (steps.containsKey("engine_waitNanos") && steps.containsKey("manager_totalNanos")) {
                    call.put("kernel_and_wakeups_p50_micros",
                            (p50(steps.get("engine_waitNanos")) - p50(steps.get("manager_totalNanos"))) / 1e3);
                }
                summary.put(method, call);
            });
            return summary;
        } finally {
            recording.close();
            if (keep == null) {
                Files.deleteIfExists(file);
            }
        }
    }

    private static double p50(List<Long> values) {
        long[] sorted = values.stream().mapToLong(Long::longValue).toArray();
        Arrays.sort(sorted);
        return sorted.length == 0 ? Double.NaN : sorted[sorted.length / 2];
    }
}
