package io.orbitkv.common;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.vertx.core.Context;
import io.vertx.core.Vertx;
import io.vertx.core.shareddata.LocalMap;
import io.vertx.core.shareddata.Shareable;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A bounded one-way hand-off of fire-and-forget messages from any thread to one role's context: the SSD write offers
 * (storage → SSD) and the SSD residency changes (SSD → storage).
 *
 * <p>Design note: the event bus queues a message per send on the receiving context without bound, so a slow receiver
 * would grow memory without limit. Here a slot is taken (compare-and-set, never above {@code capacity}) before a
 * message joins a lock-free queue and is given back as the receiver takes it, so at most {@code capacity} messages
 * wait; the first message into an empty queue schedules one drain task on the receiver's context, which takes
 * everything queued. When no slot is free the message is refused: {@link #offer} answers false at once (the sender
 * never waits), the refusal is counted ({@code orbitkv.handoff.refused{handoff}}) and {@link #overflowed} is set, so a
 * receiver that mirrors state (residency) knows it missed something and resyncs. Before the receiver opens or after it
 * closed, offers are refused the same way but not counted (nobody listens: a receiver seeds itself when it opens).
 * Sender and receiver find the same instance by name in the Vertx's local map; the receiver creates it. The same shape
 * as the cost role's intake.
 *
 * @param <T> the message type (records passed by reference; nothing is serialized)
 */
public final class BoundedHandoff<T> implements Shareable {
    private static final Logger LOG = LoggerFactory.getLogger(BoundedHandoff.class);
    private static final String HANDOFFS = "orbitkv.handoffs";

    private final String name;
    private final int capacity;
    private final AtomicInteger queued = new AtomicInteger();
    private final AtomicLong refused = new AtomicLong();
    private final AtomicBoolean drainScheduled = new AtomicBoolean();
    private final AtomicBoolean overflowed = new AtomicBoolean();
    private final ConcurrentLinkedQueue<T> messages = new ConcurrentLinkedQueue<>();
    private volatile Context receiver;
    private volatile Consumer<T> sink;

    private BoundedHandoff(String name, int capacity) {
        this.name = name;
        this.capacity = capacity;
    }

    /**
     * The receiver's side: creates (or finds) the hand-off named {@code name} on this Vertx and registers its meters.
     * Open it with {@link #open} on the receiving context.
     */
    @SuppressWarnings("unchecked")
    public static <T> BoundedHandoff<T> create(Vertx vertx, String name, int capacity, MeterRegistry registry) {
        LocalMap<String, BoundedHandoff<?>> handoffs = vertx.sharedData().getLocalMap(HANDOFFS);
        BoundedHandoff<T> created = new BoundedHandoff<>(name, capacity);
        BoundedHandoff<T> existing = (BoundedHandoff<T>) handoffs.putIfAbsent(name, created);
        BoundedHandoff<T> handoff = existing != null ? existing : created;
        if (registry != null && existing == null) {
            FunctionCounter.builder("orbitkv.handoff.refused", handoff, h -> h.refused.get()).tag("handoff", name)
                    .description("Messages refused because the receiving role's hand-off was full")
                    .register(registry);
            Gauge.builder("orbitkv.handoff.queued", handoff, h -> h.queued.get()).tag("handoff", name)
                    .description("Messages waiting for the receiving role").register(registry);
        }
        return handoff;
    }

    /** The sender's side: the hand-off named {@code name} on this Vertx, or null before its receiver created it. */
    @SuppressWarnings("unchecked")
    public static <T> BoundedHandoff<T> find(Vertx vertx, String name) {
        return (BoundedHandoff<T>) vertx.sharedData().<String, BoundedHandoff<?>>getLocalMap(HANDOFFS).get(name);
    }

    /** Starts delivering to {@code sink} on {@code context} (the caller's, normally). */
    public void open(Context context, Consumer<T> sink) {
        this.sink = sink;
        this.receiver = context;
        if (!messages.isEmpty() && drainScheduled.compareAndSet(false, true)) {
            context.runOnContext(v -> drain());
        }
    }

    /** Stops delivering: later offers are refused; queued messages are dropped when the receiver next drains. */
    public void close() {
        receiver = null;
        sink = null;
    }

    /** Queues {@code message} for the receiver; false (refused, {@link #overflowed} set) when full (counted) or closed. */
    public boolean offer(T message) {
        Context context = receiver;
        if (context == null) {
            overflowed.set(true);
            return false;
        }
        if (!takeSlot()) {
            refused.incrementAndGet();
            overflowed.set(true);
            return false;
        }
        messages.add(message);
        if (drainScheduled.compareAndSet(false, true)) {
            context.runOnContext(v -> drain());
        }
        return true;
    }

    private boolean takeSlot() {
        for (;;) {
            int current = queued.get();
            if (current >= capacity) {
                return false;
            }
            if (queued.compareAndSet(current, current + 1)) {
                return true;
            }
        }
    }

    private void drain() {
        drainScheduled.set(false);
        Consumer<T> target = sink;
        T message;
        while ((message = messages.poll()) != null) {
            queued.decrementAndGet();
            if (target != null) {
                try {
                    target.accept(message);
                } catch (RuntimeException e) {
                    LOG.warn("the receiver of hand-off {} failed on a message", name, e);
                }
            }
        }
    }

    /** Whether a message was refused since the last call; clears the mark (a mirroring receiver then resyncs). */
    public boolean overflowed() {
        return overflowed.getAndSet(false);
    }

    public String name() {
        return name;
    }

    public long refused() {
        return refused.get();
    }

    public int queued() {
        return queued.get();
    }
}
