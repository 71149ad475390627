package io.orbitkv.planning;

import io.orbitkv.common.Ticker;
import java.util.concurrent.atomic.AtomicLong;

/** A ticker tests step by hand (thread-safe: the cost role reads it on its own loop). */
final class ManualTicker implements Ticker {
    private final AtomicLong nanos = new AtomicLong(1_000_000_000L);

    @Override
    public long nanos() {
        return nanos.get();
    }

    void advance(long deltaNanos) {
        nanos.addAndGet(deltaNanos);
    }
}
