package io.orbitkv.planning;

import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.common.LocalCodec;
import io.orbitkv.common.RoleProxies;
import io.orbitkv.common.Ticker;
import io.orbitkv.cost.CostProxy;
import io.orbitkv.restore.RestoreCommands;
import io.orbitkv.restore.RestoreProxy;
import io.orbitkv.model.StateKey;
import io.orbitkv.storage.StorageProxy;
import io.vertx.core.Future;
import io.vertx.core.VerticleBase;
import io.vertx.core.eventbus.EventBus;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.function.UnaryOperator;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.ExactPin;
import io.orbitkv.model.KeyEvidence;
import io.orbitkv.model.KeyGeneration;
import io.orbitkv.model.plan.EngineDestination;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.model.plan.EvidenceSource;
import io.orbitkv.model.plan.MembershipView;
import io.orbitkv.model.plan.ExecutionOwner;
import io.orbitkv.model.plan.LocalReplicaPort;
import io.orbitkv.model.plan.RouteResources;
import io.orbitkv.model.plan.Restored;

/**
 * The planning role: discovery → replica sets → eligible routes → boundary → immutable plan ({@link Planner}), and
 * its execution: one {@link DemandPreparation} per demand admission asks for through {@link PlanningProxy} (plan,
 * admit, execute with per-medium transfer queues ({@link PlanExecutor}), replan, re-check, device copy, take-over).
 * It asks storage (local DRAM and SSD evidence, pins, SSD reads into pool slots) through the storage role's proxy and
 * the cost role for estimates. Read {@link DemandPreparation}'s design note for who owns what and {@link LocalOwners}
 * for the local leases.
 *
 * <p>Concurrency: all state is confined to this verticle's event loop; storage and cost replies arrive on it.
 * Stopping (after admission, before storage) withdraws the handlers, drains running executions and releases what they
 * prepared; a crash ends every lease with the process (they are in-process state of the storage role).
 */
public final class PlanningVerticle extends VerticleBase {

    /**
     * @param capabilities what this Manager can execute (routes and engine restore)
     * @param transfers    per-medium outstanding-byte bounds, speculative share and queue bound
     * @param resources    this Manager's cost resource identities (DRAM pool, SSD store)
     */
    public record Settings(RouteCapabilities capabilities, TransferScheduler.Settings transfers,
                           RouteResources resources) {
        /**
         * The transfer queues' defaults: at most 256 MiB outstanding per medium (a few io_uring queue depths of 2 MiB
         * pages), a quarter of it for speculative reads, 1024 waiting transfers per medium, each class in arrival
         * order (slack ordering showed no gain in the trace ablation: perf/README "Mechanism verdicts").
         */
        public static final TransferScheduler.Settings DEFAULT_TRANSFERS =
                TransferScheduler.Settings.uniform(256L << 20, 0.25, 1024).withSlackOrder(false);

        public Settings {
            Objects.requireNonNull(capabilities, "capabilities");
            Objects.requireNonNull(transfers, "transfers");
            Objects.requireNonNull(resources, "resources");
        }

        /** What a single Manager runs: local DRAM and, with the SSD tier, host materialization from local SSD. */
        public static Settings localOnly(boolean ssdEnabled, RouteResources resources) {
            return new Settings(RouteCapabilities.localOnly(ssdEnabled), DEFAULT_TRANSFERS, resources);
        }

        /**
         * The same settings with Manager-executed restores: the restore role runs beside planning, so plans may end at
         * the engine-restore target, their device copy executed by the restore role.
         */
        public Settings withRestoreRole() {
            return new Settings(capabilities.withEngineRestore(Optional.empty()), transfers, resources);
        }

        /** The same settings with other transfer-queue bounds (the {@code planning.transfers.*} keys). */
        public Settings withTransfers(TransferScheduler.Settings queues) {
            return new Settings(capabilities, queues, resources);
        }
    }

    private final Settings settings;
    private final MeterRegistry registry;
    private final Ticker ticker;
    private final CostProxy cost;
    private MembershipView members = MembershipView.NONE;
    private UnaryOperator<EvidenceSource> discovery = UnaryOperator.identity();
    private final Map<RouteTemplate, ExecutionOwner> peerOwners = new EnumMap<>(RouteTemplate.class);
    private PlanningHandlers handlers;

    /** @param cost the cost role (estimates and shadow); null: nothing observed, nothing selected */
    public PlanningVerticle(Settings settings, MeterRegistry registry, Ticker ticker, CostProxy cost) {
        this.settings = Objects.requireNonNull(settings, "settings");
        this.registry = Objects.requireNonNull(registry, "registry");
        this.ticker = Objects.requireNonNull(ticker, "ticker");
        this.cost = cost;
    }

    /** The membership view peer evidence is checked against (the cluster role's); before start only. */
    public PlanningVerticle members(MembershipView view) {
        this.members = Objects.requireNonNull(view, "view");
        return this;
    }

    /**
     * Peers (the cluster and peer roles; before start only): {@code discovery} wraps the local evidence source (the
     * cluster merges its inventory's peer records in), and {@code owners} execute the peer route templates. A
     * template gets an owner here only when {@link Settings#capabilities()} also marks it executable.
     */
    public PlanningVerticle peers(UnaryOperator<EvidenceSource> discovery, Map<RouteTemplate, ExecutionOwner> owners) {
        this.discovery = Objects.requireNonNull(discovery, "discovery");
        owners.forEach((route, owner) -> {
            if (!route.medium().isPeer()) {
                throw new IllegalArgumentException(route + " is not a peer route");
            }
            peerOwners.put(route, Objects.requireNonNull(owner, "owner"));
        });
        return this;
    }

    @Override
    public Future<?> start() {
        StorageProxy storage = new StorageProxy(vertx);
        LocalOwners local = new LocalOwners(replicaPort(storage));
        RestoreOwner restore = settings.capabilities().engineRestoreCause().isEmpty()
                ? restoreOwner(new RestoreProxy(vertx)) : null;
        Map<RouteTemplate, ExecutionOwner> owners = new EnumMap<>(RouteTemplate.class);
        owners.put(RouteTemplate.LOCAL_DRAM, local.dram());
        owners.put(RouteTemplate.HOST_FROM_LOCAL_SSD, local.ssd());
        owners.putAll(peerOwners);
        PlanExecutor executor = new PlanExecutor(owners, restore, settings.transfers(), ticker, registry,
                (delayNanos, task) -> vertx.setTimer(Math.max(1, TimeUnit.NANOSECONDS.toMillis(delayNanos)),
                        id -> task.run()));
        PlanningRole role = new PlanningRole(settings.capabilities(), members, settings.resources(),
                discovery.apply(local.evidence()),
                cost == null ? EstimateSource.NONE : EstimateSource.of(cost), executor, ticker, registry);
        handlers = new PlanningHandlers(role, () -> storage.stats()
                .map(s -> s.freeBytes() < s.poolBytes() / 10));
        PlanningHandlers h = handlers;
        Gauge.builder("orbitkv.planning.executing", h, v -> v.stats().executing())
                .description("Demands being planned, acquired or prepared").register(registry);
        Gauge.builder("orbitkv.planning.leases", h, v -> v.stats().heldLeases())
                .description("Segment leases held by executions and prepared plans").register(registry);
        EventBus bus = vertx.eventBus();
        LocalCodec.register(vertx, PlanningCommands.MESSAGE_TYPES.toArray(Class<?>[]::new));
        serve(bus, PlanningProxy.PREPARE, (PlanningCommands.Prepare c) -> handlers.prepare(c));
        serve(bus, PlanningProxy.CANCEL, (PlanningCommands.Cancel c) -> handlers.cancel(c.id(), c.quarantine()));
        serve(bus, PlanningProxy.RELEASE, (PlanningCommands.Release c) -> handlers.release(c.id(), c.quarantine()));
        serve(bus, PlanningProxy.STATS, (PlanningCommands.GetStats c) -> Future.succeededFuture(handlers.stats()));
        return Future.succeededFuture();
    }

    @Override
    public Future<?> stop() {
        RoleProxies.withdrawAll(context);
        return handlers == null ? Future.succeededFuture() : handlers.shutdown();
    }

    private static <C, R> void serve(EventBus bus, String address, Function<C, Future<R>> handler) {
        RoleProxies.<C, R>serve(bus, address, handler);
    }

    /** The restore role as the owner of engine-restore plans' device copy. */
    static RestoreOwner restoreOwner(RestoreProxy restore) {
        return new RestoreOwner() {
            @Override
            public Future<Restored> restore(EngineDestination destination,
                                                            List<RestoreCommands.SourcePage> sources) {
                return restore.execute(destination.instance(), destination.ticket(), destination.target(), sources);
            }

            @Override
            public void cancel(EngineDestination destination) {
                restore.cancel(destination.instance(), destination.ticket());
            }
        };
    }

    /** The storage role as the local owners' port. */
    static LocalReplicaPort replicaPort(StorageProxy storage) {
        return new LocalReplicaPort() {
            @Override
            public Future<List<KeyEvidence>> discover(List<StateKey> keys) {
                return storage.discover(keys);
            }

            @Override
            public Future<ExactPin> pinGenerations(List<KeyGeneration> pages) {
                return storage.pinGenerations(pages);
            }

            @Override
            public Future<Integer> unpin(List<ImageRef> pinned, boolean quarantine) {
                return storage.unpinRefs(pinned, quarantine);
            }

            @Override
            public Future<SsdAcquired> acquireFromSsd(List<KeyGeneration> pages) {
                return storage.acquireFromSsd(pages).map(hold -> new SsdAcquired(hold.hold(), hold.staleKey()));
            }

            @Override
            public Future<List<ImageRef>> readFromSsd(long hold) {
                return storage.readFromSsd(hold);
            }

            @Override
            public Future<Boolean> releaseSsdHold(long hold) {
                return storage.releaseSsdHold(hold);
            }
        };
    }
}
