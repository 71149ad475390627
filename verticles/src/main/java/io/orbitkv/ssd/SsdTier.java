package io.orbitkv.ssd;

import io.orbitkv.codecs.extent.SsdExtentHeader;
import io.orbitkv.common.ConfigException;
import io.orbitkv.common.ConfigValues;
import io.orbitkv.model.SsdWritePolicy;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Map;

/**
 * The SSD role's section of the Manager's configuration ({@code ssd.*}); {@code directory} null = the tier is off.
 * {@code defaultDirectory}: the Manager creates it (inside the data directory); an explicitly configured directory
 * must already exist and be writable. {@link #settings} turns it into the role's {@link SsdSettings}.
 *
 * @param extentPayloadBytes the largest page the tier stores ({@code ssd.extent}, without the extent header)
 */
public record SsdTier(Path directory, boolean defaultDirectory, long capacityBytes, long extentPayloadBytes,
                      SsdWritePolicy writePolicy, int queueDepth, boolean syncWrites,
                      boolean preallocate, boolean writeFromPool, int offerHandoffCapacity,
                      int residencyHandoffCapacity) {

    /** The keys and defaults this section adds to the Manager's configuration. */
    public static final Map<String, String> DEFAULTS = Map.ofEntries(
            Map.entry("ssd.enabled", "true"),
            // Empty: <data-dir>/ssd.
            Map.entry("ssd.dir", ""),
            Map.entry("ssd.capacity", "2GiB"),
            Map.entry("ssd.extent", "2MiB"),
            Map.entry("ssd.write-policy", "all"),
            Map.entry("ssd.queue-depth", "16"),
            Map.entry("ssd.offer-handoff-capacity", Integer.toString(SsdSettings.OFFER_HANDOFF_CAPACITY_DEFAULT)),
            Map.entry("ssd.residency-handoff-capacity",
                    Integer.toString(SsdSettings.RESIDENCY_HANDOFF_CAPACITY_DEFAULT)),
            Map.entry("ssd.sync-writes", "false"),
            Map.entry("ssd.preallocate", "true"),
            Map.entry("ssd.write-from-pool", "false"));

    public boolean enabled() {
        return directory != null;
    }

    /** An empty {@code ssd.dir} means {@code <dataDir>/ssd}. */
    public static SsdTier fromConfig(ConfigValues v, Path dataDir) {
        long extent = v.size("ssd.extent", 4096, 1L << 30);
        if (extent % 4096 != 0) {
            throw new ConfigException("ssd.extent", "must be a multiple of 4KiB, got " + v.string("ssd.extent"));
        }
        long capacity = v.size("ssd.capacity", 0, 1L << 50);
        if (capacity < extent + 4096) {
            throw new ConfigException("ssd.capacity", "must hold at least one extent of " + (extent + 4096)
                    + " bytes, got " + capacity);
        }
        SsdWritePolicy policy = switch (v.string("ssd.write-policy").strip().toLowerCase(Locale.ROOT)) {
            case "all" -> SsdWritePolicy.ALL;
            case "reuse-aware" -> SsdWritePolicy.REUSE_AWARE;
            default -> throw new ConfigException("ssd.write-policy", "must be all or reuse-aware, got '"
                    + v.string("ssd.write-policy") + "'");
        };
        int depth = (int) v.integer("ssd.queue-depth", 1, 4096);
        boolean sync = v.bool("ssd.sync-writes");
        boolean preallocate = v.bool("ssd.preallocate");
        boolean fromPool = v.bool("ssd.write-from-pool");
        int offers = (int) v.integer("ssd.offer-handoff-capacity", 1, 1 << 24);
        int residency = (int) v.integer("ssd.residency-handoff-capacity", 1, 1 << 24);
        if (!v.bool("ssd.enabled")) {
            return new SsdTier(null, false, capacity, extent, policy, depth, sync, preallocate, fromPool, offers,
                    residency);
        }
        String dir = v.string("ssd.dir").strip();
        return new SsdTier(dir.isEmpty() ? dataDir.resolve("ssd") : Path.of(dir), dir.isEmpty(), capacity, extent,
                policy, depth, sync, preallocate, fromPool, offers, residency);
    }

    /** The SSD role's settings for this tier (an extent holds a page of {@code extentPayloadBytes} and its header). */
    public SsdSettings settings() {
        return new SsdSettings().directory(directory).capacityBytes(capacityBytes)
                .extentBytes(extentPayloadBytes + SsdExtentHeader.HEADER_BLOCK_BYTES)
                .writePolicy(writePolicy).queueDepth(queueDepth).syncWrites(syncWrites).preallocate(preallocate)
                .writeFromSource(writeFromPool)
                .offerHandoffCapacity(offerHandoffCapacity).residencyHandoffCapacity(residencyHandoffCapacity);
    }
}
