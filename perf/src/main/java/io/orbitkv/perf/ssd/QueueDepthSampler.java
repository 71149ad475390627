package io.orbitkv.perf.ssd;

import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.vertx.core.json.JsonObject;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * Samples the store's RESTORE-lane gauges ({@code orbitkv.ssd.queue.depth}: requests in the kernel, and queued behind
 * them) while the store reads, to tell whether it keeps the kernel as busy as fio's iodepth: if the mean in-flight
 * depth is the configured one, a remaining gap lies below the submission (kernel, device), not in the store's
 * scheduling.
 *
 * <p>Design note: one daemon thread, started and stopped around each timed store read, sleeping 1 ms between
 * samples (a few hundred samples a second: noise next to the reads it observes). Counters are only read after
 * {@link #stop()} joined the thread.
 */
final class QueueDepthSampler {

    private final MeterRegistry registry;
    private final int configured;
    private volatile boolean running;
    private Thread thread;
    private long samples;
    private long inFlightSum;
    private long samplesAtDepthBelowHalf;
    private long samplesWithEmptyLane;

    QueueDepthSampler(MeterRegistry registry, int configured) {
        this.registry = registry;
        this.configured = configured;
    }

    void start() {
        running = true;
        thread = Thread.ofPlatform().daemon().name("ssdbench-queue-depth").start(this::sample);
    }

    void stop() throws InterruptedException {
        running = false;
        thread.join(TimeUnit.SECONDS.toMillis(10));
    }

    private void sample() {
        Gauge inFlight = registry.find("orbitkv.ssd.queue.depth").tags("lane", "RESTORE", "state", "in_flight").gauge();
        Gauge queued = registry.find("orbitkv.ssd.queue.depth").tags("lane", "RESTORE", "state", "queued").gauge();
        if (inFlight == null || queued == null) {
            return;
        }
        while (running) {
            long depth = Math.round(inFlight.value());
            samples++;
            inFlightSum += depth;
            if (queued.value() == 0) {
                samplesWithEmptyLane++;
            }
            if (depth * 2 < configured) {
                samplesAtDepthBelowHalf++;
            }
            LockSupport.parkNanos(1_000_000);
        }
    }

    /** Mean in-flight depth, and the share of samples below half of {@code configured} or with nothing queued. */
    JsonObject toJson() {
        return new JsonObject().put("configured", configured).put("samples", samples)
                .put("mean_in_flight", samples == 0 ? 0 : (double) inFlightSum / samples)
                .put("share_below_half", samples == 0 ? 0 : (double) samplesAtDepthBelowHalf / samples)
                .put("share_lane_empty", samples == 0 ? 0 : (double) samplesWithEmptyLane / samples);
    }
}
