package io.orbitkv.ssd;

import java.util.Map;

/**
 * A snapshot of the SSD role. Counters are since open; {@code recoverySeconds} is the duration of the open-time scan.
 */
public record SsdStats(boolean directIo, int extentCount, long extentBytes, int committedExtents, int pinnedExtents,
                       int activeLeases, int pendingWrites, int writesInFlight, int readsInFlight,
                       long writesCommitted, long bytesWritten, long readHits, long bytesRead,
                       Map<SsdDropReason, Long> writesDropped, long readMisses, long corruptExtents,
                       long overwriteRefused, long recoveredExtents, long recoveryTornExtents,
                       long recoveryCorruptExtents, long recoveryDuplicateExtents, double recoverySeconds,
                       long nativeBytes) {

    public long dropped(SsdDropReason reason) {
        return writesDropped.getOrDefault(reason, 0L);
    }
}
