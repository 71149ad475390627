package io.orbitkv.cost;

import io.netty.channel.EventLoop;
import io.netty.util.concurrent.SingleThreadEventExecutor;
import io.vertx.core.Context;
import io.vertx.core.eventbus.EventBus;
import io.vertx.core.internal.ContextInternal;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;

/**
 * The bounded intake of the cost role: the only state shared between reporting threads and the cost event loop.
 *
 * <p>Design note: a slot is taken (compare-and-set, never above capacity) before a message is sent and given back as
 * the cost loop starts handling it, so the count is the number of messages queued or running on the cost loop. When
 * no slot is free the message is dropped and counted; reporting threads never wait. The event bus is published only
 * once the consumer is registered, so nothing is sent to an address without a handler (which would leak a slot).
 */
final class CostIntake {

    private final int capacity;
    private final AtomicInteger inFlight = new AtomicInteger();
    private volatile EventBus openBus;

    CostIntake(int capacity) {
        this.capacity = capacity;
    }

    /** The bus to send on if a slot was taken, or {@code null} when closed or full. */
    EventBus tryAcquire() {
        EventBus bus = openBus;
        if (bus == null || !takeSlot()) {
            return null;
        }
        return bus;
    }

    private boolean takeSlot() {
        for (;;) {
            int current = inFlight.get();
            if (current >= capacity) {
                return false;
            }
            if (inFlight.compareAndSet(current, current + 1)) {
                return true;
            }
        }
    }

    // ---- the observation fast path: a lock-free queue drained in batches on the cost loop ----
    //
    // Design note: an observation needs no reply, so it skips the event bus (a message object, a codec lookup and a
    // task per record) and joins a queue; the first record into an empty batch schedules one drain task on the cost
    // context, which takes everything queued. Slots bound the queue exactly as they bound event-bus messages.
    //
    // Design note — no wake-up per batch from other threads: a record reported on the cost loop's own thread (the
    // admission and planning roles share it in a one-loop Manager) schedules its drain as an ordinary task, which
    // costs no wake-up. A record reported from another thread (the SSD role's io_uring thread reports every write)
    // used to wake the cost loop once per batch, that is once per SSD write: an eventfd write plus a context switch
    // of an otherwise idle loop, which cost more than handling the records. Such a drain is now queued lazily
    // (netty's lazyExecute): it runs the next time the loop wakes for its own work, in order with the tasks queued
    // after it. A periodic backstop ({@link #BACKSTOP_MS}) bounds how long records wait on an idle loop, and every
    // request/reply handled by the role, and drained(), drains first, so an estimate or shadow asked after a report
    // still sees it. Nothing is dropped or reordered: only the moment of handling moves.

    /** At most this long between a record reported from another thread and its handling on an idle cost loop. */
    static final long BACKSTOP_MS = 50;

    private final ConcurrentLinkedQueue<CostMessage> observations = new ConcurrentLinkedQueue<>();
    private final AtomicBoolean drainScheduled = new AtomicBoolean();
    private volatile Context drainContext;
    private volatile EventLoop drainLoop;
    private volatile Consumer<CostMessage> drainSink;
    private final Runnable lazyDrain = () -> {
        Context context = drainContext;
        if (context != null) {
            context.runOnContext(ignored -> drain());
        }
    };

    /**
     * Queues a message that needs no reply (an observation, or a shadow comparison whose decision is only recorded)
     * for the cost loop; false (dropped) when closed or full. Never blocks.
     */
    boolean offerObservation(CostMessage record) {
        Context context = drainContext;
        EventLoop loop = drainLoop;
        if (context == null || loop == null || openBus == null || !takeSlot()) {
            return false;
        }
        observations.add(record);
        if (drainScheduled.compareAndSet(false, true)) {
            if (loop.inEventLoop()) {
                context.runOnContext(ignored -> drain());
            } else if (loop instanceof SingleThreadEventExecutor executor) {
                executor.lazyExecute(lazyDrain);
            } else {
                loop.execute(lazyDrain);
            }
        }
        return true;
    }

    /** Handles everything queued now; on the cost loop only (the drain task, the backstop, before a request). */
    void drain() {
        drainScheduled.set(false);
        Consumer<CostMessage> sink = drainSink;
        CostMessage record;
        while ((record = observations.poll()) != null) {
            release();
            if (sink != null) {
                sink.accept(record);
            }
        }
    }

    /** Where drained observations go; called on the cost loop, in {@code context}. */
    void openDrain(Context context, Consumer<CostMessage> sink) {
        this.drainSink = sink;
        this.drainLoop = ((ContextInternal) context).nettyEventLoop();
        this.drainContext = context;
    }

    void release() {
        inFlight.decrementAndGet();
    }

    /** The cost loop's context while the intake is open, else {@code null}. */
    Context drainContext() {
        return drainContext;
    }

    void open(EventBus bus) {
        openBus = bus;
    }

    void close() {
        openBus = null;
        drainContext = null;
        drainLoop = null;
    }

    int inFlight() {
        return inFlight.get();
    }

    int capacity() {
        return capacity;
    }
}
