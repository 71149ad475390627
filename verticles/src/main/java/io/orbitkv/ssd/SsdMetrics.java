package io.orbitkv.ssd;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import io.orbitkv.nativeio.uring.IoLane;
import io.orbitkv.nativeio.uring.IoUringFileIo;
import java.util.EnumMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import java.util.function.ToDoubleFunction;

/**
 * The SSD role's meters. Counters and timers are Micrometer's own (thread-safe), incremented on the role thread;
 * gauges read volatile mirrors the store publishes. No key, generation or path ever becomes a label.
 */
final class SsdMetrics {
    final Counter readHits;
    final Counter readBytes;
    final Counter writeBytes;
    final Counter writesCommitted;
    final Counter corruptExtents;
    final Counter overwriteRefused;
    final Counter recoveredExtents;
    final Counter recoveryTornExtents;
    final Counter recoveryCorruptExtents;
    final Counter recoveryDuplicateExtents;
    final Timer readLatency;
    final Timer writeLatency;
    private final Map<SsdDropReason, Counter> dropped = new EnumMap<>(SsdDropReason.class);
    private final Map<SsdFailure, Counter> readMisses = new EnumMap<>(SsdFailure.class);
    private final MeterRegistry registry;

    SsdMetrics(MeterRegistry registry) {
        this.registry = registry;
        readHits = Counter.builder("orbitkv.ssd.read.hits").description("Verified SSD reads").register(registry);
        readBytes = Counter.builder("orbitkv.ssd.read.bytes").baseUnit("bytes")
                .description("Payload bytes read and verified").register(registry);
        writeBytes = Counter.builder("orbitkv.ssd.write.bytes").baseUnit("bytes")
                .description("Payload bytes committed").register(registry);
        writesCommitted = Counter.builder("orbitkv.ssd.writes.committed").description("Extents committed")
                .register(registry);
        corruptExtents = Counter.builder("orbitkv.ssd.extents.corrupt")
                .description("Extents dropped because their payload failed CRC32C on read").register(registry);
        overwriteRefused = Counter.builder("orbitkv.ssd.overwrite.refused")
                .description("Ring positions skipped because a lease pinned the extent").register(registry);
        recoveredExtents = Counter.builder("orbitkv.ssd.extents.recovered")
                .description("Committed extents found by the open-time scan").register(registry);
        recoveryTornExtents = Counter.builder("orbitkv.ssd.recovery.torn")
                .description("Uncommitted (interrupted) extents found by the scan").register(registry);
        recoveryCorruptExtents = Counter.builder("orbitkv.ssd.recovery.corrupt")
                .description("Extent headers failing their checksum or consistency checks at scan").register(registry);
        recoveryDuplicateExtents = Counter.builder("orbitkv.ssd.recovery.duplicates")
                .description("Older generations of a key found by the scan and ignored").register(registry);
        readLatency = Timer.builder("orbitkv.ssd.read.latency").publishPercentileHistogram()
                .description("Lease read: submit to verified completion").register(registry);
        writeLatency = Timer.builder("orbitkv.ssd.write.latency").publishPercentileHistogram()
                .description("Write: leaving the queue to commit").register(registry);
        for (SsdDropReason reason : SsdDropReason.values()) {
            dropped.put(reason, Counter.builder("orbitkv.ssd.writes.dropped").tag("reason", reason.name())
                    .description("Offered writes not committed").register(registry));
        }
        for (SsdFailure failure : SsdFailure.values()) {
            readMisses.put(failure, Counter.builder("orbitkv.ssd.read.misses").tag("reason", failure.name())
                    .description("Lease acquisitions and reads that failed").register(registry));
        }
    }

    void dropped(SsdDropReason reason) {
        dropped.get(reason).increment();
    }

    void readMiss(SsdFailure failure) {
        readMisses.get(failure).increment();
    }

    Map<SsdDropReason, Long> droppedSnapshot() {
        Map<SsdDropReason, Long> snapshot = new EnumMap<>(SsdDropReason.class);
        dropped.forEach((reason, counter) -> snapshot.put(reason, (long) counter.count()));
        return snapshot;
    }

    long readMissesTotal() {
        long total = 0;
        for (Counter counter : readMisses.values()) {
            total += (long) counter.count();
        }
        return total;
    }

    void recordLatency(Timer timer, long nanos) {
        timer.record(nanos, TimeUnit.NANOSECONDS);
    }

    <T> void gauge(String name, String description, T state, ToDoubleFunction<T> value, String... tags) {
        Gauge.builder(name, state, value).tags(Tags.of(tags)).description(description).strongReference(true)
                .register(registry);
    }

    void registerGauges(SsdStore store, Supplier<IoUringFileIo> io) {
        for (IoLane lane : IoLane.values()) {
            gauge("orbitkv.ssd.queue.depth", "I/O requests queued, not yet submitted", store,
                    s -> io.get() == null ? 0 : io.get().queued(lane), "lane", lane.name(), "state", "queued");
            gauge("orbitkv.ssd.queue.depth", "I/O requests in the kernel", store,
                    s -> io.get() == null ? 0 : io.get().inFlight(lane), "lane", lane.name(), "state", "in_flight");
        }
        gauge("orbitkv.ssd.writes.pending", "Offered writes waiting for a staging buffer", store,
                s -> s.pendingWritesGauge());
        gauge("orbitkv.ssd.extents.committed", "Committed extents in the index", store,
                s -> s.committedExtentsGauge());
        gauge("orbitkv.ssd.direct.io", "1 when shards are open with O_DIRECT, 0 after the buffered fallback", store,
                s -> s.directIo() ? 1 : 0);
        gauge("orbitkv.ssd.recovery.seconds", "Duration of the open-time index rebuild", store,
                s -> s.recoverySecondsGauge());
    }
}
