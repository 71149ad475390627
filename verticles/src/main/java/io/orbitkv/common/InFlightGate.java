package io.orbitkv.common;

import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A bound on work in flight, shared by any threads: a slot is taken before the work is queued or started and given
 * back when it ends. The one bound behind the role call path ({@link RoleProxies}), the one-way hand-offs
 * ({@link BoundedHandoff}) and the cost role's intake.
 *
 * <p>Design note: a slot is taken by compare-and-set and never above {@code capacity}, so the count is exact under
 * contention and a refused caller never waits; refusals are counted here, and the caller answers its own typed
 * failure. Whoever took a slot gives it back exactly once.
 */
public final class InFlightGate {
    private final int capacity;
    private final AtomicInteger inFlight = new AtomicInteger();
    private final AtomicLong refused = new AtomicLong();

    public InFlightGate(int capacity) {
        if (capacity < 1) {
            throw new IllegalArgumentException("capacity must be >= 1: " + capacity);
        }
        this.capacity = capacity;
    }

    /** Takes a slot: true, or false (counted) when {@code capacity} are in flight. */
    public boolean tryEnter() {
        for (;;) {
            int current = inFlight.get();
            if (current >= capacity) {
                refused.incrementAndGet();
                return false;
            }
            if (inFlight.compareAndSet(current, current + 1)) {
                return true;
            }
        }
    }

    /** Gives back a slot taken by {@link #tryEnter}. */
    public void exit() {
        inFlight.decrementAndGet();
    }

    public int inFlight() {
        return inFlight.get();
    }

    /** Refusals since creation. */
    public long refused() {
        return refused.get();
    }

    public int capacity() {
        return capacity;
    }
}
