package io.orbitkv.cost;

import java.util.concurrent.atomic.AtomicLong;

/** A clock tests step by hand. */
final class ManualClock implements CostClock {

    private final AtomicLong nanos = new AtomicLong(1_000_000_000L);

    @Override
    public long nanoTime() {
        return nanos.get();
    }

    void advanceNanos(long delta) {
        nanos.addAndGet(delta);
    }
}
