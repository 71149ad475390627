package io.orbitkv.model.plan;

import io.vertx.core.Future;
import io.orbitkv.model.plan.DemandView;
import io.orbitkv.model.plan.DemandEvidence;

/**
 * Discovery: the replica sets of a demand's keys, metadata only (nothing pinned, nothing read). The storage role
 * answers for local DRAM (slot generation + residency sequence) and local SSD (extent generation + length); the
 * membership/inventory role adds peer evidence from its bounded directory. Futures complete on the planning role's
 * event loop.
 */
@FunctionalInterface
public interface EvidenceSource {
    Future<DemandEvidence> discover(DemandView demand);
}
