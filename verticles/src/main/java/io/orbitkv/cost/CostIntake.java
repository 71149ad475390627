package io.orbitkv.cost;

import io.orbitkv.common.BoundedHandoff;
import io.orbitkv.common.InFlightGate;
import io.vertx.core.Context;
import io.vertx.core.eventbus.EventBus;
import java.util.function.Consumer;
import io.orbitkv.model.cost.CostMessage;

/**
 * The bounded intake of the cost role: the only state shared between reporting threads and the cost event loop.
 *
 * <p>Design note: one {@link InFlightGate} bounds everything waiting for or running on the cost loop: requests sent on
 * the event bus (a slot is taken before the send and given back as the handler starts) and fire-and-forget messages
 * (observations, recorded shadows), which skip the bus and travel a {@link BoundedHandoff} taking its slots from the
 * same gate. When no slot is free the message is dropped and counted by the caller; reporting threads never wait.
 * The hand-off wakes the cost loop lazily from other threads (the SSD role's io_uring thread reports every write):
 * a periodic backstop ({@link #BACKSTOP_MS}) bounds how long records wait on an idle loop, and every request the role
 * handles, and {@code drained()}, drains first, so an estimate asked after a report still sees it. The event bus is
 * published only once the consumer is registered, so nothing is sent to an address without a handler (which would
 * leak a slot).
 */
final class CostIntake {

    /** At most this long between a record reported from another thread and its handling on an idle cost loop. */
    static final long BACKSTOP_MS = 50;

    private final InFlightGate slots;
    private final BoundedHandoff<CostMessage> observations;
    private volatile EventBus openBus;

    CostIntake(int capacity) {
        this.slots = new InFlightGate(capacity);
        this.observations = BoundedHandoff.owned("cost", slots, true);
    }

    /** The bus to send on if a slot was taken, or {@code null} when closed or full. */
    EventBus tryAcquire() {
        EventBus bus = openBus;
        if (bus == null || !slots.tryEnter()) {
            return null;
        }
        return bus;
    }

    /**
     * Queues a message that needs no reply (an observation, or a shadow comparison whose decision is only recorded)
     * for the cost loop; false (dropped) when closed or full. Never blocks.
     */
    boolean offerObservation(CostMessage record) {
        return openBus != null && observations.offer(record);
    }

    /** Handles everything queued now; on the cost loop only (the backstop, before a request, drained()). */
    void drain() {
        observations.drainNow();
    }

    /** Where queued messages go; called on the cost loop, in {@code context}. */
    void openDrain(Context context, Consumer<CostMessage> sink) {
        observations.open(context, sink);
    }

    /** Gives back the slot of a request the handler started on. */
    void release() {
        slots.exit();
    }

    /** The cost loop's context while the intake is open, else {@code null}. */
    Context drainContext() {
        return observations.receiver();
    }

    void open(EventBus bus) {
        openBus = bus;
    }

    void close() {
        openBus = null;
        observations.close();
    }

    int inFlight() {
        return slots.inFlight();
    }

    int capacity() {
        return slots.capacity();
    }
}
