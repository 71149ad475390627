package io.orbitkv.planning;

import java.util.ArrayList;
import java.util.List;

/** Timers a test fires by hand (with its ticker). */
final class ManualTimers implements PlanExecutor.Timers {
    private record Armed(long atNanos, Runnable task) {}

    private final ManualTicker ticker;
    private final List<Armed> armed = new ArrayList<>();

    ManualTimers(ManualTicker ticker) {
        this.ticker = ticker;
    }

    @Override
    public void schedule(long delayNanos, Runnable task) {
        armed.add(new Armed(ticker.nanos() + delayNanos, task));
    }

    /** Advances the ticker and runs every timer now due. */
    void advance(long nanos) {
        ticker.advance(nanos);
        List<Armed> due = armed.stream().filter(a -> a.atNanos() <= ticker.nanos()).toList();
        armed.removeAll(due);
        due.forEach(a -> a.task().run());
    }

    int armed() {
        return armed.size();
    }
}
