package io.orbitkv.admission;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.common.LocalCodec;
import io.orbitkv.common.RoleProxies;
import io.orbitkv.common.Ticker;
import io.orbitkv.cost.CostProxy;
import io.orbitkv.engine.ProducerProxy;
import io.orbitkv.model.cost.ResourceId;
import io.orbitkv.planning.PlanningProxy;
import io.vertx.core.Future;
import io.vertx.core.VerticleBase;
import io.vertx.core.eventbus.EventBus;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

/**
 * The admission role: query tickets and revisions, waiting budgets, byte budgets and tenant shares, and the leases
 * handed to engines. The state and its rules live in {@link DemandAdmission} (read its design note); this verticle
 * wires it to the event bus and the planning role (which plans, and holds the leases through the execution owners),
 * and sweeps expired answers.
 *
 * <p>Concurrency: all state is confined to this verticle's event loop; planning replies arrive on it too. Metric
 * gauges read a snapshot this loop publishes after every command, never the tables.
 */
public final class AdmissionVerticle extends VerticleBase {
    /**
     * Settings of the admission role; sizes in bytes. Build them by name with {@link #builder()}.
     *
     * @param leaseBudgetBytes       the query byte budget (demand leases, all instances)
     * @param instanceBudgetBytes    demand lease bytes one instance may hold
     * @param speculativeBudgetBytes the cap on speculative warming leases
     * @param tenantShares           tenants' shares of {@code leaseBudgetBytes}
     */
    public record Settings(int maxOutstandingPerInstance, int maxOutstanding, long waitBudgetNanos,
                           long replyTtlNanos, long leaseBudgetBytes, long instanceBudgetBytes,
                           long speculativeBudgetBytes, TenantShares tenantShares, int maxAnsweredPerInstance,
                           int maxAnswered) {
        /** Answered-ticket bounds by default: the conf/orbitkv.yaml defaults. */
        public static final int DEFAULT_MAX_ANSWERED_PER_INSTANCE = 1024;
        public static final int DEFAULT_MAX_ANSWERED = 32768;

        /**
         * Settings by name. Only the query byte budget is required; the rest default to conf/orbitkv.yaml's values, the
         * instance budget to the whole query budget, the speculative cap to a tenth of it, tenant shares to equal.
         */
        public static Builder builder() {
            return new Builder();
        }

        /** Named settings of {@link Settings}; see {@link #builder()}. */
        public static final class Builder {
            private int maxOutstandingPerInstance = 256;
            private int maxOutstanding = 8192;
            private long waitBudgetNanos = TimeUnit.SECONDS.toNanos(5);
            private long replyTtlNanos = TimeUnit.SECONDS.toNanos(30);
            private long leaseBudgetBytes = -1;
            private long instanceBudgetBytes = -1;
            private long speculativeBudgetBytes = -1;
            private TenantShares tenantShares = TenantShares.equalShares();
            private int maxAnsweredPerInstance = DEFAULT_MAX_ANSWERED_PER_INSTANCE;
            private int maxAnswered = DEFAULT_MAX_ANSWERED;

            private Builder() {}

            /** PENDING tickets per instance and in total (query.max-outstanding-per-instance, query.max-outstanding). */
            public Builder maxOutstanding(int perInstance, int total) {
                this.maxOutstandingPerInstance = perInstance;
                this.maxOutstanding = total;
                return this;
            }

            /** How long a ticket may stay PENDING (query.wait-budget-ms). */
            public Builder waitBudgetNanos(long nanos) {
                this.waitBudgetNanos = nanos;
                return this;
            }

            /** How long an answer stays pollable (query.reply-ttl-ms). */
            public Builder replyTtlNanos(long nanos) {
                this.replyTtlNanos = nanos;
                return this;
            }

            /** The query byte budget: bytes demand leases of all instances may pin (required). */
            public Builder leaseBudgetBytes(long bytes) {
                this.leaseBudgetBytes = bytes;
                return this;
            }

            /** Demand lease bytes one instance may hold (default: the whole query byte budget). */
            public Builder instanceBudgetBytes(long bytes) {
                this.instanceBudgetBytes = bytes;
                return this;
            }

            /** The cap on speculative warming leases (default: a tenth of the query byte budget). */
            public Builder speculativeBudgetBytes(long bytes) {
                this.speculativeBudgetBytes = bytes;
                return this;
            }

            public Builder tenantShares(TenantShares shares) {
                this.tenantShares = Objects.requireNonNull(shares, "shares");
                return this;
            }

            /** Answered tickets kept per instance and in total (query.max-answered-per-instance, query.max-answered). */
            public Builder maxAnswered(int perInstance, int total) {
                this.maxAnsweredPerInstance = perInstance;
                this.maxAnswered = total;
                return this;
            }

            public Settings build() {
                if (leaseBudgetBytes < 0) {
                    throw new IllegalStateException("the query byte budget (leaseBudgetBytes) is required");
                }
                return new Settings(maxOutstandingPerInstance, maxOutstanding, waitBudgetNanos, replyTtlNanos,
                        leaseBudgetBytes, instanceBudgetBytes < 0 ? leaseBudgetBytes : instanceBudgetBytes,
                        speculativeBudgetBytes < 0 ? leaseBudgetBytes / 10 : speculativeBudgetBytes, tenantShares,
                        maxAnsweredPerInstance, maxAnswered);
            }
        }
    }

    private final Settings settings;
    private final MeterRegistry registry;
    private final Ticker ticker;
    private DemandAdmission admission;
    private long sweepTimer;

    private final CostProxy cost;
    private final ResourceId dramPool;

    public AdmissionVerticle(Settings settings, MeterRegistry registry, Ticker ticker) {
        this(settings, registry, ticker, null, null);
    }

    /** With cost observation: complete HOST_READY routes are reported to {@code cost} against {@code dramPool}. */
    public AdmissionVerticle(Settings settings, MeterRegistry registry, Ticker ticker, CostProxy cost,
                             ResourceId dramPool) {
        this.cost = cost;
        this.dramPool = dramPool;
        this.settings = settings;
        this.registry = registry;
        this.ticker = ticker;
    }

    @Override
    public Future<?> start() {
        admission = new DemandAdmission(settings, registry, ticker, new PlanningProxy(vertx), cost, dramPool,
                new ProducerProxy(vertx));
        publishGauges();
        Gauge.builder("orbitkv.leases.active", () -> gauges.activeLeases()).description("Leases held by engines")
                .register(registry);
        Gauge.builder("orbitkv.leases.bytes", () -> gauges.leasedBytes()).baseUnit("bytes")
                .description("Bytes pinned by leases").register(registry);
        Gauge.builder("orbitkv.leases.speculative.bytes", () -> gauges.speculativeBytes()).baseUnit("bytes")
                .description("Bytes pinned by speculative warming leases").register(registry);
        Gauge.builder("orbitkv.queries.outstanding", () -> gauges.outstanding()).description("PENDING tickets")
                .register(registry);
        FunctionCounter.builder("orbitkv.queries.answers.evicted", this, v -> v.gauges.answersEvicted())
                .description("Answered queries forgotten before query.reply-ttl-ms to keep the answered bound")
                .register(registry);
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
        sweepTimer = vertx.setPeriodic(1000, id -> {
            admission.sweep();
            publishGauges();
        });
        return Future.succeededFuture();
    }

    /**
     * Serves one command; recovery-contract failures travel as their typed engine-API reason. After each command
     * (and each step of one that waits) the gauges' snapshot is published again.
     */
    private <C, R> void serve(EventBus bus, String address, Function<C, Future<R>> handler) {
        RoleProxies.<C, R>serve(bus, address, c -> {
            Future<R> result;
            try {
                result = handler.apply(c).recover(f -> Future.failedFuture(TicketAnswers.typed(f)));
            } catch (RuntimeException e) {
                result = Future.failedFuture(TicketAnswers.typed(e));
            }
            publishGauges();
            return result.onComplete(ar -> publishGauges());
        });
    }

    /**
     * What the metric gauges read: published on this role's loop, read by the scrape on any thread (the admission
     * tables themselves are loop-confined and never read from elsewhere).
     */
    private record Gauges(int activeLeases, long leasedBytes, long speculativeBytes, long outstanding,
                          long answersEvicted) {}

    private volatile Gauges gauges;

    private void publishGauges() {
        gauges = new Gauges(admission.activeLeases(), admission.leasedBytes(), admission.budgets().speculativeBytes(),
                admission.outstanding(), admission.answersEvicted());
    }

    @Override
    public Future<?> stop() {
        RoleProxies.withdrawAll(context);
        vertx.cancelTimer(sweepTimer);
        return admission == null ? Future.succeededFuture() : admission.shutdown();
    }
}
