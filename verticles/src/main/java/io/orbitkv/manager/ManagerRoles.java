package io.orbitkv.manager;

import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.orbitkv.admission.AdmissionVerticle;
import io.orbitkv.admission.TenantShares;
import io.orbitkv.cluster.ClusterEvidence;
import io.orbitkv.cluster.ClusterRoles;
import io.orbitkv.common.Ticker;
import io.orbitkv.cost.CostProxy;
import io.orbitkv.cost.CostVerticle;
import io.orbitkv.model.cost.ResourceId;
import io.orbitkv.model.cost.ResourceKind;
import io.orbitkv.engine.EngineSettings;
import io.orbitkv.engine.EngineVerticle;
import io.orbitkv.events.EventsVerticle;
import io.orbitkv.nativeio.shm.PoolPages;
import io.orbitkv.peer.PeerExecutionOwner;
import io.orbitkv.model.plan.MembershipView;
import io.orbitkv.planning.PlanningVerticle;
import io.orbitkv.model.plan.RouteResources;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.restore.RestoreVerticle;
import io.orbitkv.ssd.SsdProxy;
import io.orbitkv.ssd.SsdVerticle;
import io.orbitkv.storage.StorageSettings;
import io.orbitkv.storage.StorageVerticle;
import io.vertx.core.Deployable;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * The roles of one Manager, each built from its settings, and their deployment ids once deployed. Optional roles
 * are null: ssd without the SSD tier, cluster in single-host mode, peer without {@code peer.port}.
 */
final class ManagerRoles {
    /** The deployment ids of the roles, for the ordered stop; ssd is null without the SSD tier. */
    static final class Deployments {
        String cost;
        String ssd;
        String storage;
        String planning;
        String restore;
        String admission;
        String engine;
        String health;
        String peer;
        String events;
    }

    final String token;
    final Path poolPath;
    final RouteResources planningResources;
    final CostVerticle cost;
    final SsdVerticle ssd;
    final StorageVerticle storage;
    final ClusterRoles cluster;
    final io.orbitkv.peer.PeerVerticle peer;
    final PlanningVerticle planning;
    final RestoreVerticle restore;
    final AdmissionVerticle admission;
    final EngineVerticle engine;
    final HealthAndMetricsVerticle health;
    /** KV events and router summaries; null unless configured. */
    final EventsVerticle events;
    final Deployments deployments = new Deployments();

    ManagerRoles(ManagerConfig config, String token, PoolPages.Answer poolPages, Vertx vertx,
                 PrometheusMeterRegistry registry, long incarnation, int eventBusPort, Path poolPath,
                 RestoreVerticle.CopyGate restoreGate) {
        this.token = token;
        this.poolPath = poolPath;
        long poolBytes = config.pool().sizeBytes();
        ResourceId dramPool = new ResourceId(ResourceKind.DRAM_POOL, "dram-pool", incarnation);
        ResourceId ssdStore = new ResourceId(ResourceKind.SSD_STORE, "ssd-store", incarnation);
        this.planningResources = new RouteResources(dramPool, ssdStore);
        this.cost = new CostVerticle(config.cost(), registry);
        CostProxy costs = cost.proxy();
        this.ssd = config.ssd().enabled() ? new SsdVerticle(config.ssd().settings()
                .observer(new SsdWriteObservations(costs, ssdStore, dramPool)), registry) : null;
        TenantShares shares = config.query().tenantShares();
        StorageSettings storageSettings = config.pool()
                .storageSettings(poolPath, shares.configured() ? shares::fractionOf : null)
                .poolPages(poolPages)
                .incarnation(incarnation)
                .quarantineNanos(TimeUnit.MILLISECONDS.toNanos(config.engine().sessions().quarantineMillis()))
                .cost(costs, dramPool)
                .backgroundChecksums(config.peer().enabled());
        if (ssd != null) {
            storageSettings.ssd(new SsdProxy(vertx), ssdStore);
        }
        this.storage = new StorageVerticle(storageSettings, registry, Ticker.SYSTEM);
        this.admission = new AdmissionVerticle(admissionSettings(config), registry, Ticker.SYSTEM, costs, dramPool);
        this.restore = new RestoreVerticle(
                new RestoreVerticle.Settings(poolPath, poolBytes, incarnation).withGate(restoreGate), registry, costs);
        this.engine = new EngineVerticle(engineSettings(config, token, poolPath), registry, Ticker.SYSTEM);
        this.cluster = config.cluster().map(settings -> new ClusterRoles(settings, incarnation,
                eventBusPort, config.ssd().enabled(), registry, vertx, config.peer().enabled()
                        ? Map.of("peer", settings.host() + ":" + config.peer().port(),
                                "peer-transfer", settings.host() + ":" + config.peer().transferPort()) : Map.of()))
                .orElse(null);
        this.peer = cluster == null || !config.peer().enabled() ? null
                : new io.orbitkv.peer.PeerVerticle(config.peer(), cluster.memberNetwork(), cluster.membership(), poolPath,
                        poolBytes, registry, costs, Ticker.SYSTEM)
                        .poolPageBytes(io.orbitkv.peer.PoolPrefault.pageBytes(poolPages));
        this.planning = planning(config, vertx, registry, costs);
        this.events = config.events().enabled() ? new EventsVerticle(config.events(), registry, costs,
                planningResources, config.ssd().enabled(), incarnation) : null;
        this.health = new HealthAndMetricsVerticle(registry, config.metricsHost(), config.metricsPort(),
                Manager.usesTransferEngine(config), events != null);
    }

    /**
     * Peer evidence counts only for current members. With the cluster on, discovery merges the inventory's peer
     * records with local evidence; with the peer role too, peer DRAM and peer SSD (the source stages its own
     * extents) are executable through it, one execution owner for both.
     */
    private PlanningVerticle planning(ManagerConfig config, Vertx vertx, PrometheusMeterRegistry registry,
                                      CostProxy costs) {
        PlanningVerticle.Settings settings = PlanningVerticle.Settings.localOnly(config.ssd().enabled(),
                planningResources).withRestoreRole().withTransfers(config.planning().transfers());
        if (peer != null) {
            settings = new PlanningVerticle.Settings(
                    settings.capabilities().with(RouteTemplate.HOST_FROM_PEER_DRAM)
                            .with(RouteTemplate.HOST_FROM_PEER_SSD),
                    settings.transfers(), settings.resources());
        }
        PlanningVerticle planning = new PlanningVerticle(settings, registry, Ticker.SYSTEM, costs)
                .members(cluster == null ? MembershipView.NONE : cluster.membership());
        if (cluster != null) {
            PeerExecutionOwner peerOwner = peer == null ? null
                    : new PeerExecutionOwner(vertx, config.peer(), Duration.ofMillis(config.query().waitBudgetMillis()),
                            config.peerAttempts());
            planning.peers(local -> ClusterEvidence.merged(local, cluster.inventory()), peerOwner == null ? Map.of()
                    : Map.of(RouteTemplate.HOST_FROM_PEER_DRAM, peerOwner, RouteTemplate.HOST_FROM_PEER_SSD, peerOwner));
        }
        return planning;
    }

    /**
     * Deploys in dependency order: each role after what it calls at start. Each deployment's time goes into
     * {@code phases} (milliseconds by role, in order), which the Manager logs once started.
     */
    Future<ManagerRoles> deployInOrder(Vertx vertx, Map<String, Long> phases) {
        return deploy(vertx, "cost", cost, id -> deployments.cost = id, phases)
                .compose(v -> deploy(vertx, "ssd", ssd, id -> deployments.ssd = id, phases))
                .compose(v -> deploy(vertx, "storage", storage, id -> deployments.storage = id, phases))
                .compose(v -> deploy(vertx, "events", events, id -> deployments.events = id, phases))
                .compose(v -> timed("cluster", cluster == null ? null : () -> cluster.deploy(vertx), phases))
                .compose(v -> deploy(vertx, "planning", planning, id -> deployments.planning = id, phases))
                .compose(v -> deploy(vertx, "peer", peer, id -> deployments.peer = id, phases))
                .compose(v -> deploy(vertx, "restore", restore, id -> deployments.restore = id, phases))
                .compose(v -> deploy(vertx, "admission", admission, id -> deployments.admission = id, phases))
                .compose(v -> deploy(vertx, "engine", engine, id -> deployments.engine = id, phases))
                .compose(v -> deploy(vertx, "health", health, id -> deployments.health = id, phases))
                .map(v -> this);
    }

    /** Deploys {@code verticle} and keeps its id; nothing for an absent (null) role. */
    private static Future<?> deploy(Vertx vertx, String role, Deployable verticle, Consumer<String> deployed,
                                    Map<String, Long> phases) {
        return timed(role, verticle == null ? null
                : () -> vertx.deployVerticle(verticle).onSuccess(deployed::accept), phases);
    }

    /** Runs {@code step} (none when null) and records its milliseconds under {@code role}. */
    private static Future<?> timed(String role, java.util.function.Supplier<Future<?>> step, Map<String, Long> phases) {
        if (step == null) {
            return Future.succeededFuture();
        }
        long started = System.nanoTime();
        return step.get().onSuccess(x -> phases.put(role, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started)));
    }

    /** The admission role's settings: its bounds, and its byte budgets as fractions of the pool. */
    static AdmissionVerticle.Settings admissionSettings(ManagerConfig config) {
        return config.query().admissionSettings(config.pool().sizeBytes());
    }

    /** The engine role's settings from the configuration. */
    static EngineSettings engineSettings(ManagerConfig config, String token, Path poolPath) {
        return config.engine().settings(token, poolPath, config.pool().sizeBytes())
                .memberId(config.cluster().map(c -> c.memberId()).orElse(null));
    }
}
