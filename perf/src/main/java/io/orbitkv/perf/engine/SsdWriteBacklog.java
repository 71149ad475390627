package io.orbitkv.perf.engine;

import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;

/**
 * The SSD write backlog of one in-process Manager, as a workload sees it: pages the workload sealed since it began
 * minus pages whose SSD write has reached a terminal outcome since then (committed or dropped, read from the Manager's
 * {@code orbitkv.ssd.writes.*} meters). Only a workload whose Manager serves no one else may use it.
 *
 * <p>Why a bound: the SSD role copies a page from its DRAM slot when the write leaves its queue. On a loaded machine the
 * writer can fall a whole pool behind a workload that publishes as fast as it can; DRAM then evicts pages before they
 * are copied (dropped as {@code SOURCE_EVICTED}), and a run meant to measure SSD read-backs reads back nothing. With
 * {@link #bound} the workload waits while more than {@code maxBacklog} pages are unsettled; a machine whose writer keeps
 * up never waits. {@link #waits} counts the waits so a report can say whether it happened.
 */
public final class SsdWriteBacklog {
    private final MeterRegistry registry;
    private final long maxBacklog;
    private final long settledAtStart;
    private final LongAdder waits = new LongAdder();
    private final LongAdder waitedNanos = new LongAdder();
    /** A lower bound of {@link #settled}: written by whichever workload thread read it last. */
    private volatile long lastSettled;

    /** {@code maxBacklog} >= 1: unsettled pages tolerated before {@link #bound} waits. */
    public SsdWriteBacklog(MeterRegistry registry, long maxBacklog) {
        if (maxBacklog < 1) {
            throw new IllegalArgumentException("maxBacklog must be at least 1, got " + maxBacklog);
        }
        this.registry = registry;
        this.maxBacklog = maxBacklog;
        this.settledAtStart = settled();
    }

    /** SSD writes with a terminal outcome (committed or dropped) since this backlog was created. */
    public long settled() {
        TierCounters t = TierCounters.read(registry);
        return t.ssdWritesCommitted() + t.ssdWritesDropped() - settledAtStart;
    }

    /**
     * With {@code sealed} pages sealed since this backlog was created: when more than {@code maxBacklog} are unsettled,
     * waits until at most half of that are (at most 30 s, then fails), and returns how long it waited (0: no wait).
     */
    public long bound(long sealed) {
        // Settled only grows, so while the last figure read keeps the backlog within bound the meters need no reading
        // (reading them walks the registry, which a replay would otherwise do after every request).
        if (sealed - lastSettled <= maxBacklog) {
            return 0;
        }
        lastSettled = settled();
        if (sealed - lastSettled > maxBacklog) {
            long began = System.nanoTime();
            waits.increment();
            drain(sealed - maxBacklog / 2, Duration.ofSeconds(30));
            long waited = System.nanoTime() - began;
            lastSettled = settled();
            waitedNanos.add(waited);
            return waited;
        }
        return 0;
    }

    /** Nanoseconds {@link #bound} spent waiting, all waits together. */
    public long waitedNanos() {
        return waitedNanos.sum();
    }

    /** Waits until {@code target} of the pages sealed since creation are settled; fails after {@code timeout}. */
    public void drain(long target, Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            long settled = settled();
            if (settled >= target) {
                return;
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("SSD writes did not drain: " + settled + " of " + target
                        + " sealed pages have a terminal outcome after " + timeout.toSeconds() + " s");
            }
            LockSupport.parkNanos(20_000);
        }
    }

    /** How many times {@link #bound} waited. */
    public long waits() {
        return waits.sum();
    }
}
