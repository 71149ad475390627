package io.orbitkv.model.cost;

/** What kind of execution resource a {@link ResourceId} names. */
public enum ResourceKind {
    SSD_STORE,
    DRAM_POOL,
    GPU_DEVICE,
    PEER_MANAGER
}
