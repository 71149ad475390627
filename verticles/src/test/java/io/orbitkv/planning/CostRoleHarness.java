package io.orbitkv.planning;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.model.cost.CostEstimateKey;
import io.orbitkv.cost.CostSettings;
import io.orbitkv.cost.CostVerticle;
import io.orbitkv.model.cost.ObservationOutcome;
import io.orbitkv.model.cost.ObservationRecord;
import io.orbitkv.model.cost.ObservedBytes;
import io.orbitkv.model.cost.RepresentationFamily;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import io.orbitkv.model.plan.DemandView;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.model.plan.DemandEvidence;
import io.orbitkv.model.plan.PeerOwner;

/**
 * The real cost role on a real Vertx with a hand-stepped ticker, and a planning role reading its estimates through
 * the cost proxy. Estimates are trained by reporting observations, exactly as execution owners do.
 */
final class CostRoleHarness implements AutoCloseable {
    static final long WAIT_S = 10;

    final ManualTicker ticker = new ManualTicker();
    final Vertx vertx;
    /** Whether plans run on the cost role's own event-loop thread (estimates answered in place) or off it (fetched). */
    final boolean onCostLoop;
    final SimpleMeterRegistry costRegistry = new SimpleMeterRegistry();
    final SimpleMeterRegistry planningRegistry = new SimpleMeterRegistry();
    final CostVerticle cost;

    CostRoleHarness(boolean selection) throws Exception {
        this(selection, false);
    }

    /** {@code onCostLoop}: one event loop, and plans made on it, as in a Manager. */
    CostRoleHarness(boolean selection, boolean onCostLoop) throws Exception {
        this.onCostLoop = onCostLoop;
        vertx = onCostLoop ? Vertx.vertx(new VertxOptions().setEventLoopPoolSize(1)) : Vertx.vertx();
        cost = new CostVerticle(new CostSettings(true, selection, 256), costRegistry, ticker::nanos);
        join(vertx.deployVerticle(cost));
    }

    static <T> T join(Future<T> future) throws Exception {
        return future.toCompletionStage().toCompletableFuture().get(WAIT_S, TimeUnit.SECONDS);
    }

    /** Reports {@code samples} successful complete-route observations of {@code nanos} each. */
    void train(CostEstimateKey key, long nanos, int samples) {
        for (int i = 0; i < samples; i++) {
            cost.proxy().report(ObservationRecord.of(key, ObservationOutcome.SUCCEEDED, nanos,
                    ObservedBytes.logicalOnly(1)));
        }
    }

    /** The key the planner uses for a batch of {@code pages} registered pages along {@code route}. */
    static CostEstimateKey key(RouteTemplate route, Optional<PeerOwner> owner, int pages, CompletionTarget target) {
        return route.costKey(Fixtures.RESOURCES, owner, Optional.of(RepresentationFamily.RAW),
                pages * Fixtures.PAGE_BYTES, pages, target).orElseThrow();
    }

    /** Plans only: no execution owners (one executor, so its gauges register once). */
    private final PlanExecutor executor = new PlanExecutor(Map.of(),
            TransferScheduler.Settings.uniform(1 << 30, 0.5, 64), ticker, planningRegistry, (delay, task) -> {
                throw new AssertionError("planning alone never arms a transfer timer");
            });

    PlanningRole role(RouteCapabilities capabilities, DemandEvidence evidence) {
        return new PlanningRole(capabilities, owner -> owner.equals(Fixtures.PEER_A) || owner.equals(Fixtures.PEER_B),
                Fixtures.RESOURCES, demand -> Future.succeededFuture(evidence), EstimateSource.of(cost.proxy()),
                executor, ticker, planningRegistry);
    }

    /** Plans {@code demand} with {@code role} on the cost loop or off it, as this harness was made. */
    Future<Planner.Result> plan(PlanningRole role, DemandView demand) {
        if (!onCostLoop) {
            return role.plan(demand);
        }
        Promise<Planner.Result> planned = Promise.promise();
        vertx.getOrCreateContext().runOnContext(ignored -> role.plan(demand).onComplete(planned));
        return planned.future();
    }

    double costCount(String name, String... tags) {
        var counter = costRegistry.find(name).tags(tags).counter();
        return counter == null ? 0 : counter.count();
    }

    double planningCount(String name, String... tags) {
        var counter = planningRegistry.find(name).tags(tags).counter();
        return counter == null ? 0 : counter.count();
    }

    @Override
    public void close() throws Exception {
        join(vertx.close());
    }
}
