package io.orbitkv.peer;

import io.orbitkv.nativeio.mooncake.TransferBatch;
import io.orbitkv.nativeio.mooncake.TransferState;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BiConsumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The one thread that polls every Transfer Engine batch of a {@link MooncakePeerTransport} to completion (TE's
 * completion is poll-only).
 *
 * <p>Design note. A batch handed over with {@link #watch} belongs to this thread from then on: it polls it, frees it
 * once every task is terminal and TE agrees (a batch TE still counts busy is polled again), and only then reports the
 * task states to the batch's listener; nothing else frees a watched batch, so a cancelled or timed-out receive's
 * slots stay written-to until that report. Back-off, not a busy spin: after a round without a terminal batch the
 * thread parks 20 µs, doubling up to 1 ms; with nothing to watch it parks until {@link #watch} wakes it. {@link #stop}
 * lets it end once nothing is watched; {@link #drained} completes then, or fails after its bound (a source stopped
 * mid-batch keeps its batch live: the caller must then keep the registered memory mapped).
 */
final class TePoller {
    private static final Logger LOG = LoggerFactory.getLogger(TePoller.class);
    static final long MIN_BACKOFF_NANOS = TimeUnit.MICROSECONDS.toNanos(20);
    static final long MAX_BACKOFF_NANOS = TimeUnit.MILLISECONDS.toNanos(1);

    private record Watched(TransferBatch batch, BiConsumer<List<TransferState>, Throwable> done) {}

    private final ConcurrentLinkedQueue<Watched> incoming = new ConcurrentLinkedQueue<>();
    private final AtomicInteger watched = new AtomicInteger();
    private final Thread thread;
    private final Promise<Void> drained = Promise.promise();
    private volatile boolean stopping;

    TePoller(String name) {
        thread = Thread.ofPlatform().daemon().name("orbitkv-te-poller-" + name).unstarted(this::run);
        thread.start();
    }

    /**
     * Hands {@code batch} (tasks submitted) to the poller; {@code done} runs on the poller thread once the batch is
     * freed, with each task's final state (or with the failure that stopped polling it: the batch then stays live).
     */
    void watch(TransferBatch batch, BiConsumer<List<TransferState>, Throwable> done) {
        watched.incrementAndGet();
        incoming.add(new Watched(batch, done));
        LockSupport.unpark(thread);
    }

    /** Batches handed over and not yet reported. */
    int watching() {
        return watched.get();
    }

    /** Ends the thread once nothing is watched; the answer completes then, or fails after {@code boundMillis}. */
    Future<Void> stop(io.vertx.core.Vertx vertx, long boundMillis) {
        stopping = true;
        LockSupport.unpark(thread);
        Promise<Void> answer = Promise.promise();
        long timer = vertx.setTimer(boundMillis, t -> answer.tryFail(new IllegalStateException(watched.get()
                + " Transfer Engine batch(es) still not terminal after " + boundMillis + " ms")));
        drained.future().onComplete(ar -> {
            vertx.cancelTimer(timer);
            answer.tryComplete();
        });
        return answer.future();
    }

    private void run() {
        List<Watched> active = new ArrayList<>();
        long backoff = MIN_BACKOFF_NANOS;
        while (true) {
            for (Watched w; (w = incoming.poll()) != null; ) {
                active.add(w);
            }
            if (active.isEmpty()) {
                if (stopping) {
                    break;
                }
                LockSupport.park(this);
                backoff = MIN_BACKOFF_NANOS;
                continue;
            }
            boolean ended = false;
            for (Iterator<Watched> it = active.iterator(); it.hasNext(); ) {
                Watched w = it.next();
                List<TransferState> states;
                try {
                    if (!w.batch.pollAll()) {
                        continue;
                    }
                    states = w.batch.states();
                    w.batch.free();
                } catch (IllegalStateException busy) {
                    continue; // terminal, but TE still counts a task busy: polled again next round
                } catch (RuntimeException e) {
                    LOG.warn("polling a Transfer Engine batch failed; it stays live: {}", e.toString());
                    it.remove();
                    report(w, null, e);
                    continue;
                }
                it.remove();
                ended = true;
                report(w, states, null);
            }
            backoff = ended ? MIN_BACKOFF_NANOS : Math.min(backoff * 2, MAX_BACKOFF_NANOS);
            LockSupport.parkNanos(this, backoff);
        }
        drained.complete();
    }

    private void report(Watched w, List<TransferState> states, Throwable failure) {
        watched.decrementAndGet();
        try {
            w.done.accept(states, failure);
        } catch (RuntimeException e) {
            LOG.warn("a Transfer Engine batch listener failed: {}", e.toString());
        }
    }
}
