package io.orbitkv.cluster;

import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.vertx.core.Future;
import io.orbitkv.storage.StorageProxy;
import io.vertx.core.Vertx;
import io.vertx.core.internal.VertxInternal;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import io.orbitkv.model.MemberNetwork;

/**
 * The cluster roles of one Manager (only with {@code cluster.enabled}): membership, then the inventory streams.
 * Deployed after the storage role (inventory follows its residency stream) and before admission.
 */
public final class ClusterRoles {
    private final ClusterSettings settings;
    private final MembershipRole membership;
    private final InventoryRole inventory;
    private final MeterRegistry registry;
    private volatile String membershipDeployment;
    private volatile String inventoryDeployment;

    /** Both roles exist from here on (the planner can be given their ports before they are deployed). */
    public ClusterRoles(ClusterSettings settings, long incarnation, int eventBusPort, boolean ssd, MeterRegistry registry,
                        Vertx vertx) {
        this(settings, incarnation, eventBusPort, ssd, registry, vertx, Map.of());
    }

    /** With extra endpoints advertised in the member record (the peer role's {@code peer} port). */
    public ClusterRoles(ClusterSettings settings, long incarnation, int eventBusPort, boolean ssd, MeterRegistry registry,
                        Vertx vertx, Map<String, String> extraEndpoints) {
        this.settings = settings;
        List<String> capabilities = new ArrayList<>(List.of("inventory-v1", "dram"));
        if (ssd) {
            capabilities.add("ssd");
        }
        Map<String, String> endpoints = new java.util.HashMap<>(extraEndpoints);
        endpoints.put("hazelcast", settings.host() + ":" + settings.hazelcastPort());
        endpoints.put("eventbus", settings.host() + ":" + eventBusPort);
        if (!extraEndpoints.isEmpty()) {
            capabilities.add("peer-v1");
        }
        this.membership = new MembershipRole(settings, incarnation, endpoints, capabilities, registry);
        this.inventory = new InventoryRole(settings, membership, new StorageProxy(vertx), registry);
        this.registry = registry;
    }

    /** Deploys membership, then inventory (after the storage role, whose residency stream it follows). */
    public Future<String> deploy(Vertx vertx) {
        // Hazelcast's view beside etcd's: more event-bus nodes than members means a node joined the event-bus cluster
        // without being a member (it gets no message without a cluster certificate); fewer means a split to look at.
        Gauge.builder("orbitkv.cluster.eventbus.nodes", vertx, v -> ((VertxInternal) v).clusterManager() == null ? 0
                        : ((VertxInternal) v).clusterManager().getNodes().size())
                .description("Nodes in the clustered event bus (Hazelcast), this Manager included").register(registry);
        return vertx.deployVerticle(membership).onSuccess(id -> membershipDeployment = id)
                .compose(id -> vertx.deployVerticle(inventory)).onSuccess(id -> inventoryDeployment = id);
    }

    /**
     * Leaves the cluster first in an ordered stop: the inventory stops publishing and following, then the member key's
     * lease is revoked (peers see this Manager leave at once and fence its evidence).
     */
    public Future<Void> undeploy(Vertx vertx) {
        Future<Void> inventoryGone = inventoryDeployment == null ? Future.succeededFuture()
                : vertx.undeploy(inventoryDeployment);
        return inventoryGone.compose(v -> membershipDeployment == null ? Future.<Void>succeededFuture()
                : vertx.undeploy(membershipDeployment));
    }

    /** Peer evidence for the planner (peer DRAM and SSD records only). */
    public InventoryRole inventory() {
        return inventory;
    }

    public MembershipRole membership() {
        return membership;
    }

    public ClusterSettings settings() {
        return settings;
    }

    /** The host and TLS files the peer role serves and connects with. */
    public MemberNetwork memberNetwork() {
        return new MemberNetwork(settings.host(), settings.tlsCa(), settings.tlsCert(), settings.tlsKey());
    }
}
