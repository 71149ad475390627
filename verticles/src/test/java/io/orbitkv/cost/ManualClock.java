package io.orbitkv.cost;

import io.orbitkv.common.Ticker;
import java.util.concurrent.atomic.AtomicLong;

/** A clock tests step by hand. */
final class ManualClock implements Ticker {

    private final AtomicLong nanos = new AtomicLong(1_000_000_000L);

    @Override
    public long nanos() {
        return nanos.get();
    }

    void advanceNanos(long delta) {
        nanos.addAndGet(delta);
    }
}
