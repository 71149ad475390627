package io.orbitkv.cost;

import io.vertx.core.eventbus.EventBus;

import java.util.concurrent.atomic.AtomicInteger;

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

    private final java.util.concurrent.ConcurrentLinkedQueue<CostMessage> observations =
            new java.util.concurrent.ConcurrentLinkedQueue<>();
    private final java.util.concurrent.atomic.AtomicBoolean drainScheduled = new java.util.concurrent.atomic.AtomicBoolean();
    private volatile io.vertx.core.Context drainContext;
    private volatile java.util.function.Consumer<CostMessage> drainSink;

    /**
     * Queues a message that needs no reply (an observation, or a shadow comparison whose decision is only recorded)
     * for the cost loop; false (dropped) when closed or full. Never blocks.
     */
    boolean offerObservation(CostMessage record) {
        io.vertx.core.Context context = drainContext;
        if (context == null || openBus == null || !takeSlot()) {
            return false;
        }
        observations.add(record);
        if (drainScheduled.compareAndSet(false, true)) {
            context.runOnContext(v -> drain());
        }
        return true;
    }

    private void drain() {
        drainScheduled.set(false);
        java.util.function.Consumer<CostMessage> sink = drainSink;
        CostMessage record;
        while ((record = observations.poll()) != null) {
            release();
            if (sink != null) {
                sink.accept(record);
            }
        }
    }

    /** Where drained observations go; called on the cost loop, in {@code context}. */
    void openDrain(io.vertx.core.Context context, java.util.function.Consumer<CostMessage> sink) {
        this.drainSink = sink;
        this.drainContext = context;
    }

    void release() {
        inFlight.decrementAndGet();
    }

    /** The cost loop's context while the intake is open, else {@code null}. */
    io.vertx.core.Context drainContext() {
        return drainContext;
    }

    void open(EventBus bus) {
        openBus = bus;
    }

    void close() {
        openBus = null;
        drainContext = null;
    }

    int inFlight() {
        return inFlight.get();
    }

    int capacity() {
        return capacity;
    }
}
