package io.orbitkv.cost;

import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.common.LocalCodec;
import io.orbitkv.common.Ticker;
import io.vertx.core.Future;
import io.vertx.core.VerticleBase;
import io.vertx.core.Vertx;
import io.vertx.core.eventbus.DeliveryOptions;
import io.vertx.core.eventbus.Message;
import io.vertx.core.eventbus.MessageConsumer;
import io.vertx.core.eventbus.MessageConsumerOptions;
import java.util.Objects;
import io.orbitkv.model.cost.ObservationRecord;
import io.orbitkv.model.cost.CostEstimateResult;
import io.orbitkv.model.cost.ShadowRequest;
import io.orbitkv.model.cost.CostMessage;
import io.orbitkv.model.cost.EstimateQuery;

/**
 * The cost role (cost observation): observation intake, bounded estimates, shadow comparisons and cost metrics.
 *
 * <p>Design note — concurrency: the estimator, comparator and lazily created meters are owned by this verticle's event
 * loop; the only state shared with other threads is the {@link CostIntake} slot counter (and thread-safe Micrometer
 * counters for drops and duplicate finishes). Other roles talk to it only through {@link #proxy()}.
 *
 * <p>Design note — bounds: the intake admits at most {@link CostSettings#intakeCapacity()} messages queued or running
 * here; the consumer's own buffer ({@code maxBufferedMessages}) is set to the same figure so the event bus never
 * discards a message the intake admitted. Each handler gives its slot back before doing any work.
 *
 * <p>Design note — off by default: with observations off, {@link #start()} registers nothing and the proxy is a no-op.
 *
 * <p>Usage: {@code var cost = new CostVerticle(CostSettings.fromEnvironment(config), registry);
 * vertx.deployVerticle(cost).onSuccess(id -> otherRole(cost.proxy()))}. The proxy exists from construction; before
 * the deployment completes (and after undeploy) reports are dropped and counted.
 */
public final class CostVerticle extends VerticleBase {

    private static final DeliveryOptions REPLY = new DeliveryOptions().setLocalOnly(true);

    private final CostSettings settings;
    private final CostIntake intake;
    private final CostRole role;
    private final CostProxy proxy;
    private MessageConsumer<CostMessage> consumer;
    private long backstopTimer = -1;

    public CostVerticle(CostSettings settings, MeterRegistry registry) {
        this(settings, registry, Ticker.SYSTEM);
    }

    public CostVerticle(CostSettings settings, MeterRegistry registry, Ticker clock) {
        this.settings = Objects.requireNonNull(settings, "settings");
        CostMetrics metrics = new CostMetrics(registry);
        this.intake = new CostIntake(settings.intakeCapacity());
        this.role = new CostRole(clock, metrics);
        this.proxy = new CostProxy(settings, intake, metrics, clock, role);
    }

    /** The typed proxy other roles use; safe to share across threads. */
    public CostProxy proxy() {
        return proxy;
    }

    /** Registers the local codecs of every cost message and reply type on this Vertx (idempotent). */
    static void registerCodecs(Vertx vertx) {
        LocalCodec.register(vertx, ObservationRecord.class, ShadowRequest.class, EstimateQuery.class,
                ShadowResult.class, CostEstimateResult.Usable.class, CostEstimateResult.Unavailable.class);
    }

    @Override
    public Future<?> start() {
        // The intake opens even when observation starts off, so that it can be switched on at run time; while off
        // nothing is ever sent to it.
        registerCodecs(vertx);
        consumer = vertx.eventBus().consumer(new MessageConsumerOptions()
                .setAddress(CostProxy.ADDRESS)
                .setLocalOnly(true)
                .setMaxBufferedMessages(settings.intakeCapacity()));
        consumer.handler(this::onMessage);
        return consumer.completion().onSuccess(registered -> {
            intake.openDrain(context, message -> {
                switch (message) {
                    case ObservationRecord record -> role.onObservation(record);
                    case ShadowRequest request -> role.onShadow(request);
                    case EstimateQuery query -> { } // always a request/reply; never queued here
                }
            });
            intake.open(vertx.eventBus());
            backstopTimer = vertx.setPeriodic(CostIntake.BACKSTOP_MS, id -> intake.drain());
        });
    }

    @Override
    public Future<?> stop() {
        if (backstopTimer >= 0) {
            vertx.cancelTimer(backstopTimer);
        }
        intake.close();
        return consumer == null ? Future.succeededFuture() : consumer.unregister();
    }

    private void onMessage(Message<CostMessage> message) {
        intake.release();
        intake.drain(); // records reported before this request are handled before it (they may be queued lazily)
        switch (message.body()) {
            case ObservationRecord record -> role.onObservation(record);
            case ShadowRequest request -> message.reply(role.onShadow(request), REPLY);
            case EstimateQuery query -> message.reply(role.onEstimate(query), REPLY);
        }
    }

    /** For tests: runs {@code task} on this verticle's event loop. */
    void runOnCostLoop(Runnable task) {
        context.runOnContext(ignored -> task.run());
    }

    /** For tests: the shared intake. */
    CostIntake intake() {
        return intake;
    }
}
