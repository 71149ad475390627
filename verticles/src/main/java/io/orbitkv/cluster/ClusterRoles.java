package io.orbitkv.cluster;

import io.micrometer.core.instrument.MeterRegistry;
import io.vertx.core.Future;
import io.orbitkv.storage.StorageProxy;
import io.vertx.core.Vertx;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The cluster roles of one Manager (only with {@code cluster.enabled}): membership, then the inventory streams.
 * Deployed after the storage role (inventory follows its residency stream) and before admission.
 */
public final class ClusterRoles {
    private final ClusterSettings settings;
    private final MembershipRole membership;
    private final InventoryRole inventory;
    private volatile String membershipDeployment;
    private volatile String inventoryDeployment;

    /** Both roles exist from here on (the planner can be given their ports before they are deployed). */
    public ClusterRoles(ClusterSettings settings, long incarnation, int eventBusPort, boolean ssd, MeterRegistry registry,
                        Vertx vertx) {
        this.settings = settings;
        List<String> capabilities = new ArrayList<>(List.of("inventory-v1", "dram"));
        if (ssd) {
            capabilities.add("ssd");
        }
        Map<String, String> endpoints = Map.of(
                "hazelcast", settings.host() + ":" + settings.hazelcastPort(),
                "eventbus", settings.host() + ":" + eventBusPort);
        this.membership = new MembershipRole(settings, incarnation, endpoints, capabilities, registry);
        this.inventory = new InventoryRole(settings, membership, new StorageProxy(vertx), registry);
    }

    /** Deploys membership, then inventory (after the storage role, whose residency stream it follows). */
    public Future<String> deploy(Vertx vertx) {
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
}
