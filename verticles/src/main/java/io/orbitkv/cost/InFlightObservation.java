package io.orbitkv.cost;

import java.util.OptionalLong;
import java.util.concurrent.atomic.AtomicBoolean;
import io.orbitkv.model.cost.CostEstimateKey;
import io.orbitkv.model.cost.ObservationOutcome;
import io.orbitkv.model.cost.ObservationRecord;
import io.orbitkv.model.cost.ObservedBytes;
import io.orbitkv.model.cost.SampleKind;

/**
 * An observation in progress, held by the owner of the work's completion (the I/O loop, copy worker, transfer owner),
 * never by the requesting caller: a caller that is cancelled or goes away does not end it. The owner finishes it
 * exactly once, at terminal completion; if it drains work it will never complete, it finishes with
 * {@link ObservationOutcome#ABANDONED}. Later finish calls are ignored and counted. There is deliberately no
 * cancel or close method.
 *
 * <p>Timing (all from the cost clock, on the owner's host): the handle starts when created —
 * at enqueue for a route, at enqueue or submission for an operation. For an operation, {@link #markSubmitted()}
 * ends the queue stage and starts service; without it, service runs from creation. {@link #markAdmitted()} ends the
 * admission stage (creation to admission). At finish, the measured sample is service time for an operation and
 * creation-to-finish total for a route; a timed-out finish records no duration.
 *
 * <p>Thread safety: marks and finish may come from any thread; the first finish wins.
 */
final class InFlightObservation {

    private static final long UNSET = Long.MIN_VALUE;

    /** Returned while observations are off: every method is a no-op. */
    static final InFlightObservation DISABLED = new InFlightObservation(null, null, 0);

    private final CostProxy proxy;
    private final CostEstimateKey key;
    private final long startNanos;
    private final AtomicBoolean finished = new AtomicBoolean();
    private volatile long submittedNanos = UNSET;
    private volatile long admittedNanos = UNSET;

    InFlightObservation(CostProxy proxy, CostEstimateKey key, long startNanos) {
        this.proxy = proxy;
        this.key = key;
        this.startNanos = startNanos;
    }

    /** The key, or {@code null} for the disabled handle. */
    public CostEstimateKey key() {
        return key;
    }

    /** Operation left its queue and was submitted; first call wins. */
    public void markSubmitted() {
        if (proxy != null && submittedNanos == UNSET) {
            submittedNanos = proxy.clock().nanos();
        }
    }

    /** Admission (credits, leases, device permit) was granted; first call wins. */
    public void markAdmitted() {
        if (proxy != null && admittedNanos == UNSET) {
            admittedNanos = proxy.clock().nanos();
        }
    }

    /**
     * Ends the observation and reports it. Only the completion owner calls this.
     *
     * @return {@code true} if this call finished it; {@code false} if it was already finished (ignored, counted) or
     *         observations are off
     */
    public boolean finish(ObservationOutcome outcome, ObservedBytes bytes) {
        if (proxy == null) {
            return false;
        }
        if (!finished.compareAndSet(false, true)) {
            proxy.duplicateFinish(key.path());
            return false;
        }
        long end = proxy.clock().nanos();
        long submitted = submittedNanos;
        long admitted = admittedNanos;
        OptionalLong queue = OptionalLong.empty();
        long measuredFrom = startNanos;
        if (key.sampleKind() == SampleKind.OPERATION && submitted != UNSET) {
            queue = OptionalLong.of(Math.max(0, submitted - startNanos));
            measuredFrom = submitted;
        }
        OptionalLong admission = admitted == UNSET ? OptionalLong.empty()
                : OptionalLong.of(Math.max(0, admitted - startNanos));
        OptionalLong measured = OptionalLong.of(Math.max(0, end - measuredFrom));
        proxy.report(new ObservationRecord(key, outcome, queue, admission, measured, bytes));
        return true;
    }

    public boolean isFinished() {
        return finished.get();
    }
}
