package io.orbitkv.admission;

import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.common.LocalCodec;
import io.orbitkv.common.RoleProxies;
import io.orbitkv.common.Ticker;
import io.orbitkv.planning.PlanningProxy;
import io.vertx.core.Future;
import io.vertx.core.VerticleBase;
import io.vertx.core.eventbus.EventBus;
import java.util.function.Function;

/**
 * The admission role: query tickets and revisions, waiting budgets, byte budgets and tenant shares, and the leases
 * handed to engines. The state and its rules live in {@link DemandAdmission} (read its design note); this verticle
 * wires it to the event bus and the planning role (which plans, and holds the leases through the execution owners),
 * and sweeps expired answers.
 *
 * <p>Concurrency: all state is confined to this verticle's event loop; planning replies arrive on it too.
 */
public final class AdmissionVerticle extends VerticleBase {
    /**
     * Settings of the admission role; sizes in bytes.
     *
     * @param leaseBudgetBytes       the query byte budget (demand leases, all instances)
     * @param instanceBudgetBytes    demand lease bytes one instance may hold
     * @param speculativeBudgetBytes the cap on speculative warming leases
     * @param tenantShares           tenants' shares of {@code leaseBudgetBytes}
     */
    public record Settings(int maxOutstandingPerInstance, int maxOutstanding, long waitBudgetNanos,
                           long replyTtlNanos, long leaseBudgetBytes, long instanceBudgetBytes,
                           long speculativeBudgetBytes, TenantShares tenantShares) {
        /** The earlier shape: no per-instance cap, 10% of the query budget for speculation, equal tenant shares. */
        public Settings(int maxOutstandingPerInstance, int maxOutstanding, long waitBudgetNanos, long replyTtlNanos,
                        long leaseBudgetBytes) {
            this(maxOutstandingPerInstance, maxOutstanding, waitBudgetNanos, replyTtlNanos, leaseBudgetBytes,
                    leaseBudgetBytes, leaseBudgetBytes / 10, TenantShares.equalShares());
        }
    }

    private final Settings settings;
    private final MeterRegistry registry;
    private final Ticker ticker;
    private DemandAdmission admission;
    private long sweepTimer;

    private final io.orbitkv.cost.CostProxy cost;
    private final io.orbitkv.cost.ResourceId dramPool;

    public AdmissionVerticle(Settings settings, MeterRegistry registry, Ticker ticker) {
        this(settings, registry, ticker, null, null);
    }

    /** With cost observation: complete HOST_READY routes are reported to {@code cost} against {@code dramPool}. */
    public AdmissionVerticle(Settings settings, MeterRegistry registry, Ticker ticker, io.orbitkv.cost.CostProxy cost,
                             io.orbitkv.cost.ResourceId dramPool) {
        this.cost = cost;
        this.dramPool = dramPool;
        this.settings = settings;
        this.registry = registry;
        this.ticker = ticker;
    }

    @Override
    public Future<?> start() {
        admission = new DemandAdmission(settings, registry, ticker,
                DemandAdmission.PlanningPort.of(new PlanningProxy(vertx)), cost, dramPool);
        DemandAdmission a = admission;
        Gauge.builder("orbitkv.leases.active", a, DemandAdmission::activeLeases).description("Leases held by engines").register(registry);
        Gauge.builder("orbitkv.leases.bytes", a, DemandAdmission::leasedBytes).baseUnit("bytes")
                .description("Bytes pinned by leases").register(registry);
        Gauge.builder("orbitkv.leases.speculative.bytes", a, v -> v.budgets().speculativeBytes()).baseUnit("bytes")
                .description("Bytes pinned by speculative warming leases").register(registry);
        Gauge.builder("orbitkv.queries.outstanding", a, DemandAdmission::outstanding).description("PENDING tickets").register(registry);
        EventBus bus = vertx.eventBus();
        LocalCodec.register(vertx, AdmissionCommands.MESSAGE_TYPES.toArray(Class<?>[]::new));
        serve(bus, AdmissionProxy.SUBMIT, (AdmissionCommands.Submit c) -> admission.submit(c.instance(), c.plan()));
        serve(bus, AdmissionProxy.POLL, (AdmissionCommands.Poll c) -> admission.poll(c.instance(), c.ticket()));
        serve(bus, AdmissionProxy.CANCEL, (AdmissionCommands.Cancel c) -> admission.cancel(c.instance(), c.ticket()));
        serve(bus, AdmissionProxy.RELEASE, (AdmissionCommands.Release c) -> admission.release(c.instance(), c.leaseId()));
        serve(bus, AdmissionProxy.RELEASE_INSTANCE,
                (AdmissionCommands.ReleaseInstance c) -> admission.releaseInstance(c.instance()));
        serve(bus, AdmissionProxy.STATS,
                (AdmissionCommands.GetStats c) -> Future.succeededFuture(admission.stats(c.instance())));
        sweepTimer = vertx.setPeriodic(1000, id -> admission.sweep());
        return Future.succeededFuture();
    }

    /** Serves one command; recovery-contract failures travel as their typed engine-API reason. */
    private static <C, R> void serve(EventBus bus, String address, Function<C, Future<R>> handler) {
        RoleProxies.<C, R>serve(bus, address, c -> {
            try {
                return handler.apply(c).recover(f -> Future.failedFuture(DemandAdmission.typed(f)));
            } catch (RuntimeException e) {
                return Future.failedFuture(DemandAdmission.typed(e));
            }
        });
    }

    @Override
    public Future<?> stop() {
        vertx.cancelTimer(sweepTimer);
        return Future.succeededFuture();
    }
}
