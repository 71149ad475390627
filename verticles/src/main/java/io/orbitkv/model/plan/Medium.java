package io.orbitkv.model.plan;

/**
 * Where a replica's bytes live, as seen from the requesting Manager. Access methods (io_uring, cuFile, TCP, Mooncake)
 * and temporary staging are not media: they belong to {@link RouteTemplate routes}. Engine HBM is not a medium here:
 * it becomes a source only with an engine grant, which no route implements yet.
 */
public enum Medium {
    /** This Manager's shared-memory pool. */
    LOCAL_DRAM,
    /** This Manager's SSD tier (committed extents). */
    LOCAL_SSD,
    /** Another Manager's pool, known from its inventory stream. */
    PEER_DRAM,
    /** Another Manager's committed SSD extents, known from its inventory stream; never directly readable memory. */
    PEER_SSD;

    public boolean isPeer() {
        return this == PEER_DRAM || this == PEER_SSD;
    }
}
