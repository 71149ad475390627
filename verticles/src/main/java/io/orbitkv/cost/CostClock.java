package io.orbitkv.cost;

/**
 * Monotonic time source for the cost role, in nanoseconds. Injected so tests can step time (expiry, ages) without
 * sleeping. Values are only compared with values from the same clock on the same host.
 */
@FunctionalInterface
public interface CostClock {

    /** The host's monotonic clock ({@link System#nanoTime()}). */
    CostClock SYSTEM = System::nanoTime;

    long nanoTime();
}
