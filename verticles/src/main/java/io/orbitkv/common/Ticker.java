package io.orbitkv.common;

/** Monotonic time source, injected so tests control time. Never compared across hosts. */
@FunctionalInterface
public interface Ticker {
    Ticker SYSTEM = System::nanoTime;

    long nanos();
}
