package io.orbitkv.common;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.netty.channel.EventLoop;
import io.netty.util.concurrent.SingleThreadEventExecutor;
import io.vertx.core.Context;
import io.vertx.core.Vertx;
import io.vertx.core.internal.ContextInternal;
import io.vertx.core.shareddata.LocalMap;
import io.vertx.core.shareddata.Shareable;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A bounded one-way hand-off of fire-and-forget messages from any thread to one role's context: the SSD write offers
 * (storage → SSD) and the SSD residency changes (SSD → storage).
 *
 * <p>Design note: the event bus queues a message per send on the receiving context without bound, so a slow receiver
 * would grow memory without limit. Here a slot of an {@link InFlightGate} is taken before a message joins a lock-free
 * queue and is given back as the receiver takes it, so at most {@code capacity} messages wait; the first message into
 * an empty queue schedules one drain task on the receiver's context, which takes everything queued. A receiver that
 * is fed from another thread once per small unit of work (the cost role's observations) asks for lazy wake-ups:
 * such a drain is queued with netty's {@code lazyExecute}, so it runs when the loop next wakes for its own work
 * instead of waking an idle loop per message; that receiver drains on a timer of its own as a backstop and before
 * answering anything ({@link #drainNow}). When no slot is free the message is refused: {@link #offer} answers false at once (the sender
 * never waits), the refusal is counted ({@code orbitkv.handoff.refused{handoff}}) and {@link #overflowed} is set, so a
 * receiver that mirrors state (residency) knows it missed something and resyncs. Before the receiver opens or after it
 * closed, offers are refused the same way but not counted (nobody listens: a receiver seeds itself when it opens).
 * Sender and receiver find the same instance by name in the Vertx's local map; the receiver creates it.
 *
 * @param <T> the message type (records passed by reference; nothing is serialized)
 */
public final class BoundedHandoff<T> implements Shareable {
    private static final Logger LOG = LoggerFactory.getLogger(BoundedHandoff.class);
    private static final String HANDOFFS = "orbitkv.handoffs";

    private final String name;
    private final InFlightGate slots;
    private final boolean lazyWakeup;
    private final AtomicBoolean drainScheduled = new AtomicBoolean();
    private final AtomicBoolean overflowed = new AtomicBoolean();
    private final ConcurrentLinkedQueue<T> messages = new ConcurrentLinkedQueue<>();
    private volatile Context receiver;
    private volatile EventLoop receiverLoop;
    private volatile Consumer<T> sink;
    private final Runnable lazyDrain = () -> {
        Context context = receiver;
        if (context != null) {
            context.runOnContext(v -> drain());
        }
    };

    private BoundedHandoff(String name, InFlightGate slots, boolean lazyWakeup) {
        this.name = name;
        this.slots = slots;
        this.lazyWakeup = lazyWakeup;
    }

    /**
     * A hand-off its owner holds directly (not found by name), taking its slots from {@code slots}, which the owner
     * may share with other work it bounds together; {@code lazyWakeup}: see the design note.
     */
    public static <T> BoundedHandoff<T> owned(String name, InFlightGate slots, boolean lazyWakeup) {
        return new BoundedHandoff<>(name, slots, lazyWakeup);
    }

    /**
     * The receiver's side: creates (or finds) the hand-off named {@code name} on this Vertx and registers its meters.
     * Open it with {@link #open} on the receiving context.
     */
    @SuppressWarnings("unchecked")
    public static <T> BoundedHandoff<T> create(Vertx vertx, String name, int capacity, MeterRegistry registry) {
        LocalMap<String, BoundedHandoff<?>> handoffs = vertx.sharedData().getLocalMap(HANDOFFS);
        BoundedHandoff<T> created = new BoundedHandoff<>(name, new InFlightGate(capacity), false);
        BoundedHandoff<T> existing = (BoundedHandoff<T>) handoffs.putIfAbsent(name, created);
        BoundedHandoff<T> handoff = existing != null ? existing : created;
        if (registry != null && existing == null) {
            FunctionCounter.builder("orbitkv.handoff.refused", handoff, h -> h.slots.refused()).tag("handoff", name)
                    .description("Messages refused because the receiving role's hand-off was full")
                    .register(registry);
            Gauge.builder("orbitkv.handoff.queued", handoff, h -> h.slots.inFlight()).tag("handoff", name)
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
        this.receiverLoop = ((ContextInternal) context).nettyEventLoop();
        this.receiver = context;
        if (!messages.isEmpty() && drainScheduled.compareAndSet(false, true)) {
            context.runOnContext(v -> drain());
        }
    }

    /** Stops delivering: later offers are refused; queued messages are dropped when the receiver next drains. */
    public void close() {
        receiver = null;
        receiverLoop = null;
        sink = null;
    }

    /** Whether a receiver is open. */
    public boolean isOpen() {
        return receiver != null;
    }

    /** The receiver's context while open, else null. */
    public Context receiver() {
        return receiver;
    }

    /** Queues {@code message} for the receiver; false (refused, {@link #overflowed} set) when full (counted) or closed. */
    public boolean offer(T message) {
        Context context = receiver;
        if (context == null) {
            overflowed.set(true);
            return false;
        }
        if (!slots.tryEnter()) {
            overflowed.set(true);
            return false;
        }
        messages.add(message);
        if (drainScheduled.compareAndSet(false, true)) {
            EventLoop loop = receiverLoop;
            if (lazyWakeup && loop != null && !loop.inEventLoop() && loop instanceof SingleThreadEventExecutor executor) {
                executor.lazyExecute(lazyDrain);
            } else {
                context.runOnContext(v -> drain());
            }
        }
        return true;
    }

    /** Delivers everything queued now; on the receiver's context only (its backstop timer, before it answers). */
    public void drainNow() {
        drain();
    }

    private void drain() {
        drainScheduled.set(false);
        Consumer<T> target = sink;
        T message;
        while ((message = messages.poll()) != null) {
            slots.exit();
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
        return slots.refused();
    }

    /** Messages waiting (with a shared gate: everything holding one of its slots). */
    public int queued() {
        return slots.inFlight();
    }
}
