package io.orbitkv.peer;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.orbitkv.common.Ticker;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.zip.CRC32C;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The CRC32C of received pages, computed over the bytes their slots hold: inline on the connection's loop as each read
 * lands ({@code peer.verify-threads} = 0), or a whole page per task on N daemon threads shared by every receive of
 * one transport. The queue is unbounded but holds at most one task per destination of the receives in flight, which
 * the requester's slots already bound. Who may read a slot while a check runs is the receive's business
 * ({@link TcpReceive}); {@link #stop} waits for every queued check, so the pool is unmapped only after no verifier
 * can read it.
 */
final class ReceiveVerifiers {
    private static final Logger LOG = LoggerFactory.getLogger(ReceiveVerifiers.class);

    /** A CRC pass's time and bytes, for the kind of thread that ran it. */
    private record Meters(Timer time, Counter bytes) {
        static Meters of(MeterRegistry registry, String thread) {
            return new Meters(Timer.builder("orbitkv.peer.verify").tag("thread", thread)
                    .description("Time computing received peer pages' CRC32C, by the thread that ran it (event_loop: "
                            + "inline as each read lands, peer.verify-threads=0; verifier: a whole page off the loop)")
                    .register(registry),
                    Counter.builder("orbitkv_peer_verified_bytes_total").tag("thread", thread)
                            .description("Received peer bytes whose CRC32C was computed, by the thread that ran it")
                            .register(registry));
        }

        void record(long nanos, long n) {
            time.record(nanos, TimeUnit.NANOSECONDS);
            bytes.increment(n);
        }
    }

    private final ThreadPoolExecutor pool;
    private final Ticker ticker;
    private final Meters onLoop;
    private final Meters offLoop;
    /** Checks handed to the threads that have not ended yet (queued or running). */
    private final AtomicInteger pending = new AtomicInteger();
    /** Fences waiting for their receive's outstanding checks. */
    final AtomicInteger fencesWaiting = new AtomicInteger();
    /** Test seam: runs on the verifier thread before each page's check (it may block). */
    volatile Runnable beforeVerify = () -> {};

    ReceiveVerifiers(int threads, String name, MeterRegistry registry, Ticker ticker) {
        this.ticker = ticker;
        this.onLoop = Meters.of(registry, "event_loop");
        this.offLoop = Meters.of(registry, "verifier");
        this.pool = threads == 0 ? null : newPool(threads, name);
        Gauge.builder("orbitkv_peer_verify_pending", pending, AtomicInteger::get)
                .description("Received peer pages handed to the verifiers whose check has not ended yet")
                .register(registry);
    }

    private static ThreadPoolExecutor newPool(int threads, String name) {
        AtomicInteger n = new AtomicInteger();
        ThreadPoolExecutor pool = new ThreadPoolExecutor(threads, threads, 30, TimeUnit.SECONDS, new LinkedBlockingQueue<>(),
                task -> {
                    Thread t = new Thread(task, "orbitkv-peer-verify-" + name + "-" + n.incrementAndGet());
                    t.setDaemon(true);
                    return t;
                });
        pool.allowCoreThreadTimeOut(true); // an idle requester holds no verifier thread
        return pool;
    }

    /** Whether checks run inline on the receiving loop (no verifier threads). */
    boolean inline() {
        return pool == null;
    }

    int pending() {
        return pending.get();
    }

    /** Folds {@code region} (bytes that just landed in a slot) into {@code crc}, on the calling thread. */
    void fold(CRC32C crc, MemorySegment region) {
        long t0 = ticker.nanos();
        crc.update(region.asByteBuffer());
        meters().record(ticker.nanos() - t0, region.byteSize());
    }

    /**
     * Hands one whole page to a verifier; {@code done} gets its value (or {@code checked == false}) on the verifier
     * thread. {@code skip} is read just before the check starts. Throws {@link RejectedExecutionException} when closed.
     */
    void check(MemorySegment slot, java.util.function.BooleanSupplier skip, CheckDone done) {
        pending.incrementAndGet();
        try {
            pool.execute(() -> {
                int value = 0;
                boolean checked = false;
                try {
                    beforeVerify.run();
                    if (!skip.getAsBoolean()) {
                        CRC32C crc = new CRC32C();
                        fold(crc, slot);
                        value = (int) crc.getValue();
                        checked = true;
                    }
                } catch (RuntimeException e) {
                    LOG.warn("checking a received page failed: {}", e.toString());
                } finally {
                    pending.decrementAndGet();
                    done.done(value, checked);
                }
            });
        } catch (RejectedExecutionException e) {
            pending.decrementAndGet();
            throw e;
        }
    }

    @FunctionalInterface
    interface CheckDone {
        void done(int value, boolean checked);
    }

    private Meters meters() {
        return Context.isOnEventLoopThread() ? onLoop : offLoop;
    }

    /** Stops the threads: queued checks still run (each skips an abandoned page or ends within one page's CRC). */
    Future<Void> stop(Vertx vertx) {
        if (pool == null) {
            return Future.succeededFuture();
        }
        pool.shutdown();
        return vertx.executeBlocking(() -> {
            if (!pool.awaitTermination(30, TimeUnit.SECONDS)) {
                LOG.warn("the peer verifiers did not stop within 30 s");
            }
            return null;
        });
    }
}
