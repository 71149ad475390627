package io.orbitkv.recovery;

import io.orbitkv.recovery.RecoveryException.Reason;

import java.util.List;
import java.util.Objects;
import java.util.OptionalLong;

/**
 * Checks an engine's {@link RecoveryDemand} against the instance's registered {@link RecoveryRules} before the Manager
 * admits the query or reserves a byte.
 *
 * <p>Each check is also public on its own so the admission role can run only what a given message needs. Every failure
 * is a {@link RecoveryException} with its own {@link Reason}:
 * <pre>
 *   engine page size != registered          PAGE_SIZE_MISMATCH
 *   origin / end not a multiple of P        TOKENS_NOT_PAGE_ALIGNED     (negative: TOKENS_OUT_OF_RANGE)
 *   end before origin                       END_BEFORE_ORIGIN
 *   registered group without ranges         MISSING_GROUP
 *   ranges for an unregistered group        UNKNOWN_GROUP               (twice: DUPLICATE_GROUP)
 *   a range starting before its predecessor RANGES_OUT_OF_ORDER
 *   a range sharing a position with another RANGES_OVERLAP
 *   a range past end/P                      RANGE_BEYOND_SELECTED_END
 *   selected group's hashes != end/P        HASH_COUNT_MISMATCH
 *   revision older than the previous one    REVISION_BACKWARDS
 * </pre>
 * Order matters only for which reason a demand with several faults reports: the revision first (a stale demand is
 * ignored, however malformed), then the page geometry, then the group set, then each group's ranges, then the hashes.
 *
 * <p>Touching ranges ({@code [0,3)} then {@code [3,5)}) are accepted: they do not overlap, only fail to be merged.
 */
public final class DemandValidator {

    private DemandValidator() {
    }

    /**
     * Runs every check on {@code demand}.
     *
     * @param previousRevision the revision last accepted for the same request, or empty for its first demand
     */
    public static void validate(RecoveryRules rules, RecoveryDemand demand, OptionalLong previousRevision) {
        Objects.requireNonNull(rules, "rules");
        Objects.requireNonNull(demand, "demand");
        requireRevisionNotBackwards(previousRevision, demand.revision());
        requirePageSize(rules, demand.pageSizeTokens());
        requireBounds(rules, demand.validPrefixOriginTokens(), demand.selectedEndTokens());
        requireCompleteGroupSet(rules, demand.declaredRanges());
        int endPosition = rules.position(demand.selectedEndTokens(), "selected end");
        for (GroupRanges group : demand.declaredRanges()) {
            requireOrderedDisjoint(group);
            requireWithinSelectedEnd(group, endPosition);
        }
        requireHashCount(rules, demand.selectedGroupId(), demand.selectedEndTokens(), demand.selectedGroupHashCount());
    }

    /** An equal revision is a repeat of the same demand; only an older one is refused. Compared as uint64. */
    public static void requireRevisionNotBackwards(OptionalLong previousRevision, long revision) {
        Objects.requireNonNull(previousRevision, "previousRevision");
        if (previousRevision.isPresent() && Long.compareUnsigned(revision, previousRevision.getAsLong()) < 0) {
            throw new RecoveryException(Reason.REVISION_BACKWARDS, "revision " + Long.toUnsignedString(revision)
                    + " is older than the previous revision " + Long.toUnsignedString(previousRevision.getAsLong()));
        }
    }

    public static void requirePageSize(RecoveryRules rules, int enginePageSizeTokens) {
        if (enginePageSizeTokens != rules.pageSizeTokens()) {
            throw new RecoveryException(Reason.PAGE_SIZE_MISMATCH, "engine page size " + enginePageSizeTokens
                    + " tokens differs from the registered " + rules.pageSizeTokens() + " tokens");
        }
    }

    /** Origin and end are page-aligned, non-negative, indexable, and the end does not precede the origin. */
    public static void requireBounds(RecoveryRules rules, long validPrefixOriginTokens, long selectedEndTokens) {
        rules.position(validPrefixOriginTokens, "valid-prefix origin");
        rules.position(selectedEndTokens, "selected end");
        if (selectedEndTokens < validPrefixOriginTokens) {
            throw new RecoveryException(Reason.END_BEFORE_ORIGIN, "selected end " + selectedEndTokens
                    + " tokens lies before the valid-prefix origin " + validPrefixOriginTokens + " tokens");
        }
    }

    /** Exactly one {@link GroupRanges} per registered group, none for another group. */
    public static void requireCompleteGroupSet(RecoveryRules rules, List<GroupRanges> declaredRanges) {
        Objects.requireNonNull(declaredRanges, "declaredRanges");
        for (int i = 0; i < declaredRanges.size(); i++) {
            int groupId = declaredRanges.get(i).groupId();
            if (!rules.contains(groupId)) {
                throw new RecoveryException(Reason.UNKNOWN_GROUP,
                        "demand declares ranges for group " + groupId + ", which is not registered");
            }
            for (int j = 0; j < i; j++) {
                if (declaredRanges.get(j).groupId() == groupId) {
                    throw new RecoveryException(Reason.DUPLICATE_GROUP,
                            "demand declares ranges for group " + groupId + " twice");
                }
            }
        }
        for (GroupRule rule : rules.groups()) {
            if (declaredRanges.stream().noneMatch(group -> group.groupId() == rule.groupId())) {
                throw new RecoveryException(Reason.MISSING_GROUP,
                        "demand declares no ranges for registered group " + rule.groupId());
            }
        }
    }

    /** Ranges ascend by start and no two share a position. */
    public static void requireOrderedDisjoint(GroupRanges group) {
        List<BlockRange> ranges = group.ranges();
        for (int i = 1; i < ranges.size(); i++) {
            BlockRange previous = ranges.get(i - 1);
            BlockRange current = ranges.get(i);
            if (current.startInclusive() < previous.startInclusive()) {
                throw new RecoveryException(Reason.RANGES_OUT_OF_ORDER, "group " + group.groupId() + ": range "
                        + current + " starts before the preceding range " + previous);
            }
            if (current.startInclusive() < previous.endExclusive()) {
                throw new RecoveryException(Reason.RANGES_OVERLAP, "group " + group.groupId() + ": range "
                        + current + " overlaps the preceding range " + previous);
            }
        }
    }

    /** No range names a block at or past the selected end's position. */
    public static void requireWithinSelectedEnd(GroupRanges group, int selectedEndPosition) {
        for (BlockRange range : group.ranges()) {
            if (range.endExclusive() > selectedEndPosition) {
                throw new RecoveryException(Reason.RANGE_BEYOND_SELECTED_END, "group " + group.groupId() + ": range "
                        + range + " reaches past the selected end at block " + selectedEndPosition);
            }
        }
    }

    /** The selected group carries one chained hash per page from block 0 up to the selected end. */
    public static void requireHashCount(RecoveryRules rules, int selectedGroupId, long selectedEndTokens,
                                        int hashCount) {
        rules.rule(selectedGroupId);
        long expected = rules.position(selectedEndTokens, "selected end");
        if (hashCount != expected) {
            throw new RecoveryException(Reason.HASH_COUNT_MISMATCH, "group " + selectedGroupId + " sent " + hashCount
                    + " block hashes for a selected end of " + selectedEndTokens + " tokens; expected " + expected
                    + " (one per " + rules.pageSizeTokens() + "-token page)");
        }
    }
}
