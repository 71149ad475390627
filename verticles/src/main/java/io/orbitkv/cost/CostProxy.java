package io.orbitkv.cost;

import io.orbitkv.common.Ticker;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.eventbus.DeliveryOptions;
import io.vertx.core.eventbus.EventBus;
import io.vertx.core.eventbus.Message;
import io.vertx.core.internal.ContextInternal;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;
import io.orbitkv.model.cost.CostEstimateKey;
import io.orbitkv.model.cost.CostPath;
import io.orbitkv.model.cost.ObservationRecord;
import io.orbitkv.model.cost.CostEstimateResult;
import io.orbitkv.model.cost.ShadowRequest;
import io.orbitkv.model.cost.CostMessage;
import io.orbitkv.model.cost.EstimateQuery;

/**
 * Typed entry point to the cost role; callers never see its address. Obtain it from {@link CostVerticle#proxy()}.
 *
 * <p>Design note: every method returns without waiting. Observations are fire-and-forget through the bounded
 * {@link CostIntake}; when the role is busy the update is dropped and counted in
 * {@code orbitkv_cost_updates_dropped_total}. Shadow and estimate requests answer {@link ShadowDecision#UNKNOWN} /
 * {@link CostEstimateResult.Reason#BUSY} in that case and never fail: cost is advisory and must not change execution.
 * With observations off every method is a no-op fast path that touches no counter. An estimate asked on the cost
 * role's own event-loop thread (one event loop: the planning role asks from it) is answered in place, after the queued
 * observations are handled, as {@code RoleProxies} calls a role on its own thread: no bus round trip, no timer.
 */
public final class CostProxy {

    static final String ADDRESS = "orbitkv.cost";
    static final long REQUEST_TIMEOUT_MS = 5_000;

    private static final DeliveryOptions SEND = new DeliveryOptions().setLocalOnly(true);
    private static final DeliveryOptions REQUEST =
            new DeliveryOptions().setLocalOnly(true).setSendTimeout(REQUEST_TIMEOUT_MS);

    private final CostSettings settings;
    private final CostIntake intake;
    private final CostMetrics metrics;
    private final Ticker clock;
    /** The role's handlers, called in place only on the cost loop's own thread. */
    private final CostRole role;

    /**
     * Whether observations are taken now: starts as configured; {@link #setObservationsEnabled} flips it at run time
     * (the overhead benchmark alternates it on one Manager). Off, every method is a no-op fast path.
     */
    private volatile boolean observing;

    /** Turns observation and shadow on or off from now on; selection stays as configured (and needs observation). */
    public void setObservationsEnabled(boolean enabled) {
        this.observing = enabled;
    }

    CostProxy(CostSettings settings, CostIntake intake, CostMetrics metrics, Ticker clock, CostRole role) {
        this.role = Objects.requireNonNull(role, "role");
        this.observing = settings.observationsEnabled();
        this.settings = Objects.requireNonNull(settings, "settings");
        this.intake = Objects.requireNonNull(intake, "intake");
        this.metrics = Objects.requireNonNull(metrics, "metrics");
        this.clock = Objects.requireNonNull(clock, "clock");
    }

    /** Whether observations and shadow comparisons are on. */
    public boolean observationsEnabled() {
        return observing;
    }

    /** Whether the guarded cost-based selection may be used (implies observations). */
    public boolean selectionEnabled() {
        return observing && settings.selectionEnabled();
    }

    /** The clock observations are timed with. */
    public Ticker clock() {
        return clock;
    }

    /** Reports a terminal observation; never blocks; dropped and counted when the role is busy. */
    public void report(ObservationRecord record) {
        if (!observing) {
            return;
        }
        if (!intake.offerObservation(record)) {
            metrics.dropped(CostMessageKind.OBSERVATION);
        }
    }

    /**
     * Starts timing work whose completion the calling owner will report (see {@link InFlightObservation}); the time
     * origin is now.
     */
    public InFlightObservation start(CostEstimateKey key) {
        if (!observing) {
            return InFlightObservation.DISABLED;
        }
        return new InFlightObservation(this, Objects.requireNonNull(key, "key"), clock.nanos());
    }

    /**
     * Like {@link #shadow} when the caller does not need the result: the decision is only recorded (metrics), and
     * the request travels the observation queue instead of a request/reply. Never blocks; dropped and counted when
     * the role is busy.
     */
    public void recordShadow(ShadowRequest request) {
        if (!observing) {
            return;
        }
        if (!intake.offerObservation(request)) {
            metrics.dropped(CostMessageKind.SHADOW);
        }
    }

    /** Compares the executing path with its alternatives; records the decision; never changes execution. */
    public Future<ShadowResult> shadow(ShadowRequest request) {
        if (!observing) {
            return Future.succeededFuture(ShadowResult.UNKNOWN_NOT_RECORDED);
        }
        EventBus bus = intake.tryAcquire();
        if (bus == null) {
            metrics.dropped(CostMessageKind.SHADOW);
            return Future.succeededFuture(ShadowResult.UNKNOWN_NOT_RECORDED);
        }
        return bus.<ShadowResult>request(ADDRESS, request, REQUEST)
                .map(Message::body)
                .otherwise(ShadowResult.UNKNOWN_NOT_RECORDED);
    }

    /** The current estimate for {@code key}, or the reason there is none. */
    public Future<CostEstimateResult> estimate(CostEstimateKey key) {
        if (!observing) {
            return Future.succeededFuture(new CostEstimateResult.Unavailable(CostEstimateResult.Reason.DISABLED, 0));
        }
        Context loop = intake.drainContext();
        if (loop != null && ((ContextInternal) loop).nettyEventLoop().inEventLoop()) {
            intake.drain(); // what was reported before this question is handled before it, as on the bus path
            return Future.succeededFuture(role.onEstimate(new EstimateQuery(key)));
        }
        CostEstimateResult busy = new CostEstimateResult.Unavailable(CostEstimateResult.Reason.BUSY, 0);
        EventBus bus = intake.tryAcquire();
        if (bus == null) {
            metrics.dropped(CostMessageKind.ESTIMATE);
            return Future.succeededFuture(busy);
        }
        return bus.<CostEstimateResult>request(ADDRESS, new EstimateQuery(key), REQUEST)
                .map(Message::body)
                .otherwise(busy);
    }

    /**
     * Estimates answered synchronously for one decision made now on the cost role's own event-loop thread, or
     * {@code null} when observation is off or the caller is on another thread (then ask {@link #estimate}). The
     * first question handles what was reported before it, as {@link #estimate} does; each distinct key is looked up
     * once (one estimate read, as one request per key would be) and keeps its answer for the decision. Use it only
     * in the call that obtained it: a later event-loop turn must ask again.
     */
    public Function<CostEstimateKey, CostEstimateResult> estimatesInPlace() {
        if (!observing) {
            return null;
        }
        Context loop = intake.drainContext();
        if (loop == null || !((ContextInternal) loop).nettyEventLoop().inEventLoop()) {
            return null;
        }
        return new InPlaceEstimates();
    }

    /** See {@link #estimatesInPlace}: the intake drained at the first question, answers kept per key. */
    private final class InPlaceEstimates implements Function<CostEstimateKey, CostEstimateResult> {
        private Map<CostEstimateKey, CostEstimateResult> answered;

        @Override
        public CostEstimateResult apply(CostEstimateKey key) {
            if (answered == null) {
                intake.drain();
                answered = new HashMap<>(8);
            }
            CostEstimateResult answer = answered.get(key);
            if (answer == null) {
                answer = role.onEstimate(new EstimateQuery(key));
                answered.put(key, answer);
            }
            return answer;
        }
    }

    /**
     * Completes once the cost role has nothing queued or running: every observation reported before this call has
     * been handled by the role, or dropped and counted. Benchmarks use it so that a clock never stops while
     * observation work is still queued. It checks on the cost loop itself, after whatever is already queued there,
     * and re-checks behind newly queued work until the intake is empty; with the role closed it completes at once.
     */
    public Future<Void> drained() {
        Context context = intake.drainContext();
        if (context == null) {
            return Future.succeededFuture();
        }
        Promise<Void> drained = Promise.promise();
        context.runOnContext(ignored -> completeWhenDrained(context, drained));
        return drained.future();
    }

    private void completeWhenDrained(Context context, Promise<Void> drained) {
        if (intake.drainContext() != null) {
            intake.drain(); // on the cost loop: what was queued lazily is handled now
        }
        if (intake.inFlight() == 0 || intake.drainContext() == null) {
            drained.complete();
        } else {
            context.runOnContext(ignored -> completeWhenDrained(context, drained));
        }
    }

    void duplicateFinish(CostPath path) {
        metrics.duplicateFinish(path);
    }

    private void offer(CostMessage message, CostMessageKind kind) {
        EventBus bus = intake.tryAcquire();
        if (bus == null) {
            metrics.dropped(kind);
            return;
        }
        try {
            bus.send(ADDRESS, message, SEND);
        } catch (RuntimeException sendFailure) {
            intake.release();
            metrics.dropped(kind);
        }
    }
}
