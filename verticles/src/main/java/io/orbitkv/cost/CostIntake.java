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
        if (bus == null) {
            return null;
        }
        for (;;) {
            int current = inFlight.get();
            if (current >= capacity) {
                return null;
            }
            if (inFlight.compareAndSet(current, current + 1)) {
                return bus;
            }
        }
    }

    void release() {
        inFlight.decrementAndGet();
    }

    void open(EventBus bus) {
        openBus = bus;
    }

    void close() {
        openBus = null;
    }

    int inFlight() {
        return inFlight.get();
    }

    int capacity() {
        return capacity;
    }
}
