package io.orbitkv.common;

/**
 * The one clock type of the Manager: a monotonic time source in nanoseconds ({@link System#nanoTime()}), injected so
 * tests step time (expiry, ages, budgets) without sleeping. Values are only compared with values from the same clock on
 * the same host, never across hosts.
 */
@FunctionalInterface
public interface Ticker {
    Ticker SYSTEM = System::nanoTime;

    long nanos();
}
