package io.orbitkv.events;

import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.util.List;

/** Messages the events role accepts and answers. Local records only (see {@link io.orbitkv.common.LocalCodec}). */
public final class EventsCommands {
    private EventsCommands() {}

    public record GetSummary() {}

    /**
     * An estimate of the time until a prefix of {@code blocks} blocks is ready in local DRAM, from the cost role's
     * observations: {@code predictedNanos} and {@code errorNanos} (its EWMA error) over {@code samples}; when there is
     * none, {@code unknownReason} says why and the figures are absent (null in JSON), never zero.
     */
    public record TimeToReady(int blocks, Long predictedNanos, Long errorNanos, Long samples, String unknownReason) {
        JsonObject toJson() {
            JsonObject json = new JsonObject().put("blocks", blocks).put("predicted_ms", millis(predictedNanos))
                    .put("error_ms", millis(errorNanos)).put("samples", samples);
            return unknownReason == null ? json : json.put("unknown_reason", unknownReason);
        }

        private static Double millis(Long nanos) {
            return nanos == null ? null : nanos / 1e6;
        }
    }

    /** One namespace's figures: resident blocks and bytes per tier, and time to ready per tier and prefix length. */
    public record NamespaceSummary(String namespace, long dramBlocks, long dramBytes, long ssdBlocks, long ssdBytes,
                                   List<TimeToReady> dramReady, List<TimeToReady> ssdReady) {
        JsonObject toJson() {
            return new JsonObject().put("namespace", namespace)
                    .put("blocks", JsonObject.of("dram", dramBlocks, "ssd", ssdBlocks))
                    .put("bytes", JsonObject.of("dram", dramBytes, "ssd", ssdBytes))
                    .put("time_to_ready", JsonObject.of("dram", array(dramReady), "ssd", array(ssdReady)));
        }

        private static JsonArray array(List<TimeToReady> estimates) {
            JsonArray array = new JsonArray();
            estimates.forEach(e -> array.add(e.toJson()));
            return array;
        }
    }

    /**
     * SSD read bandwidth: {@code inUse} measured over the last {@code windowMillis}; {@code capacity} as configured
     * (null: not known, and then {@code free} is not known either).
     */
    public record SsdRead(long inUseBytesPerSecond, long windowMillis, Long capacityBytesPerSecond,
                          Long freeBytesPerSecond) {
        JsonObject toJson() {
            return new JsonObject().put("in_use_bytes_per_second", inUseBytesPerSecond).put("window_ms", windowMillis)
                    .put("capacity_bytes_per_second", capacityBytesPerSecond)
                    .put("free_bytes_per_second", freeBytesPerSecond);
        }
    }

    /**
     * The router summary: when it was taken (wall clock), the Manager incarnation and the last residency sequence it
     * includes, SSD read bandwidth (null without the SSD tier), and at most the configured number of namespaces
     * (the most resident blocks first; {@code namespacesOmitted} says how many more there are). Nothing in it names a
     * request, a session or a key.
     */
    public record RouterSummary(long atMillis, long incarnation, long residencySequence, SsdRead ssdRead,
                                List<NamespaceSummary> namespaces, int namespacesOmitted) {
        public JsonObject toJson() {
            JsonArray list = new JsonArray();
            namespaces.forEach(n -> list.add(n.toJson()));
            return new JsonObject().put("at_ms", atMillis).put("incarnation", Long.toHexString(incarnation))
                    .put("residency_sequence", residencySequence)
                    .put("ssd_read", ssdRead == null ? null : ssdRead.toJson())
                    .put("namespaces", list).put("namespaces_omitted", namespacesOmitted);
        }
    }

    static final List<Class<?>> MESSAGE_TYPES = List.of(GetSummary.class, RouterSummary.class);
}
