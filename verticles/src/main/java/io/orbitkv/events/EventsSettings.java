package io.orbitkv.events;

import io.orbitkv.common.ConfigException;
import io.orbitkv.common.ConfigValues;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The {@code events.*} section: KV events (off unless {@code events.endpoint} is set) and router summaries (off unless
 * {@code events.summary.enabled} is true or events are on). Endpoints are ZeroMQ addresses the Manager binds.
 *
 * @param endpoint                 the PUB address, e.g. {@code tcp://127.0.0.1:5557}; null = no events
 * @param replayEndpoint           the ROUTER address for replays; null = no replay
 * @param intervalMs               how often the residency stream is read
 * @param maxChangesPerRead        residency changes read at most per look
 * @param queueCapacity            encoded batches waiting for the publisher thread at most
 * @param replayBatches            batches kept for replay at most
 * @param replayBytes              bytes of batches kept for replay at most
 * @param hwm                      the PUB socket's send high-water mark (messages per subscriber)
 * @param heartbeatMs              an empty batch after this long without one, so a subscriber notices a lost last
 *                                 batch or a restart; 0 = none
 * @param maxKeys                  keys announced per medium at most
 * @param summary                  whether the router summary is served (it also is whenever events are on)
 * @param summaryPrefixBlocks      the prefix lengths (blocks) the summary estimates time to ready for
 * @param summaryMaxNamespaces     namespaces in one summary at most (the most resident blocks first)
 * @param summaryMinIntervalMs     a summary is recomputed at most this often; callers in between get the last one
 * @param ssdReadCapacityBytesPerSecond the SSD's read bandwidth as the operator measured it; -1 = not known
 */
public record EventsSettings(String endpoint, String replayEndpoint, long intervalMs, int maxChangesPerRead,
                             int queueCapacity, int replayBatches, long replayBytes, int hwm, long heartbeatMs,
                             int maxKeys,
                             boolean summary, List<Integer> summaryPrefixBlocks, int summaryMaxNamespaces,
                             long summaryMinIntervalMs, long ssdReadCapacityBytesPerSecond) {

    /** The keys and defaults this section adds to the Manager's configuration. */
    public static final Map<String, String> DEFAULTS = Map.ofEntries(
            Map.entry("events.endpoint", ""),
            Map.entry("events.replay-endpoint", ""),
            Map.entry("events.interval-ms", "20"),
            Map.entry("events.max-batch", "1024"),
            Map.entry("events.queue-capacity", "1024"),
            Map.entry("events.replay-buffer-batches", "10000"),
            Map.entry("events.replay-buffer-bytes", "64MiB"),
            Map.entry("events.hwm", "100000"),
            Map.entry("events.heartbeat-ms", "1000"),
            Map.entry("events.max-keys", "262144"),
            Map.entry("events.summary.enabled", "false"),
            Map.entry("events.summary.prefix-blocks", "1,16,64,256"),
            Map.entry("events.summary.max-namespaces", "64"),
            Map.entry("events.summary.min-interval-ms", "1000"),
            Map.entry("events.summary.ssd-read-capacity", ""));

    public EventsSettings {
        summaryPrefixBlocks = List.copyOf(summaryPrefixBlocks);
    }

    /** Whether the events role runs at all. */
    public boolean enabled() {
        return endpoint != null || summary;
    }

    public boolean publishes() {
        return endpoint != null;
    }

    /** Events and summaries on, with the other settings at their defaults (tests). */
    public static EventsSettings publishingTo(String endpoint, String replayEndpoint) {
        return new EventsSettings(endpoint, replayEndpoint, 20, 1024, 1024, 10_000, 64L << 20, 100_000, 1000, 262_144,
                true,
                List.of(1, 16, 64, 256), 64, 0, -1);
    }

    public static EventsSettings fromConfig(ConfigValues v) {
        String endpoint = endpoint(v, "events.endpoint");
        String replay = endpoint(v, "events.replay-endpoint");
        if (replay != null && endpoint == null) {
            throw new ConfigException("events.replay-endpoint", "needs events.endpoint (replays serve the PUB stream)");
        }
        List<Integer> prefixes = new ArrayList<>();
        for (String part : v.string("events.summary.prefix-blocks").split(",")) {
            if (part.isBlank()) {
                continue;
            }
            try {
                int blocks = Integer.parseInt(part.strip());
                if (blocks < 1 || blocks > 1 << 20) {
                    throw new NumberFormatException();
                }
                prefixes.add(blocks);
            } catch (NumberFormatException e) {
                throw new ConfigException("events.summary.prefix-blocks",
                        "must be comma-separated block counts (1 to 1048576), got '"
                                + v.string("events.summary.prefix-blocks") + "'");
            }
        }
        if (prefixes.size() > 16) {
            throw new ConfigException("events.summary.prefix-blocks", "at most 16 prefix lengths");
        }
        long capacity = v.isBlank("events.summary.ssd-read-capacity") ? -1
                : v.size("events.summary.ssd-read-capacity", 1, 1L << 50);
        return new EventsSettings(endpoint, replay, v.integer("events.interval-ms", 1, 60_000),
                (int) v.integer("events.max-batch", 1, 1 << 20), (int) v.integer("events.queue-capacity", 1, 1 << 20),
                (int) v.integer("events.replay-buffer-batches", 0, 1 << 24),
                v.size("events.replay-buffer-bytes", 0, 1L << 40), (int) v.integer("events.hwm", 0, 1 << 24),
                v.integer("events.heartbeat-ms", 0, 3_600_000),
                (int) v.integer("events.max-keys", 1, 1 << 26), v.bool("events.summary.enabled"), prefixes,
                (int) v.integer("events.summary.max-namespaces", 1, 4096),
                v.integer("events.summary.min-interval-ms", 0, 3_600_000), capacity);
    }

    private static String endpoint(ConfigValues v, String key) {
        String text = v.string(key).strip();
        if (text.isEmpty()) {
            return null;
        }
        if (!text.startsWith("tcp://") && !text.startsWith("ipc://") && !text.startsWith("inproc://")) {
            throw new ConfigException(key, "must be a ZeroMQ address to bind (tcp://host:port, ipc://path), got '"
                    + text + "'");
        }
        return text;
    }
}
