package io.orbitkv.recovery;

import java.util.List;
import java.util.Objects;

/**
 * The recovery part of an engine's demand for one request, as it arrives: nothing here is trusted until
 * {@link DemandValidator#validate} accepts it against the instance's registered {@link RecoveryRules}.
 *
 * <p>Identity, priority, first-use estimate, waiting budget and target rank belong to the admission role's own demand
 * record; this is what the recovery contract checks.
 *
 * @param revision                the engine's revision of this request's demand (uint64 on the wire, compared unsigned)
 * @param pageSizeTokens          the page size the engine believes it registered
 * @param validPrefixOriginTokens tokens the engine already holds in HBM; nothing below is restored
 * @param selectedEndTokens       the boundary the engine selected to resume from
 * @param selectedGroupId         the group whose hash chain this query carries
 * @param selectedGroupHashCount  how many chained block hashes the engine sent for the selected group
 * @param declaredRanges          per group, the block ranges the engine declares it needs restored
 */
public record RecoveryDemand(long revision, int pageSizeTokens, long validPrefixOriginTokens, long selectedEndTokens,
                             int selectedGroupId, int selectedGroupHashCount, List<GroupRanges> declaredRanges) {

    public RecoveryDemand {
        declaredRanges = List.copyOf(Objects.requireNonNull(declaredRanges, "declaredRanges"));
    }
}
