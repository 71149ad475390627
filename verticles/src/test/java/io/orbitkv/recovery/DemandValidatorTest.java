package io.orbitkv.recovery;

import io.orbitkv.recovery.RecoveryException.Reason;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.OptionalLong;

import static io.orbitkv.recovery.RecoveryContractTest.ATTENTION;
import static io.orbitkv.recovery.RecoveryContractTest.HYBRID;
import static io.orbitkv.recovery.RecoveryContractTest.MAMBA;
import static io.orbitkv.recovery.RecoveryContractTest.PAGE;
import static io.orbitkv.recovery.RecoveryContractTest.WINDOW;
import static io.orbitkv.recovery.RecoveryContractTest.assertReason;
import static io.orbitkv.recovery.RecoveryContractTest.pages;
import static org.assertj.core.api.Assertions.assertThatCode;

class DemandValidatorTest {
    static final OptionalLong FIRST = OptionalLong.empty();

    /** What a correct engine sends for the hybrid model resuming at 8 pages from an empty HBM prefix. */
    static RecoveryDemand wellFormed() {
        return new RecoveryDemand(3, PAGE, 0, pages(8), ATTENTION, 8,
                RecoveryContract.requiredRanges(HYBRID, pages(8), 0));
    }

    static RecoveryDemand withRanges(GroupRanges... ranges) {
        var demand = wellFormed();
        return new RecoveryDemand(demand.revision(), demand.pageSizeTokens(), demand.validPrefixOriginTokens(),
                demand.selectedEndTokens(), demand.selectedGroupId(), demand.selectedGroupHashCount(),
                List.of(ranges));
    }

    @Test
    void acceptsTheContractsOwnRanges() {
        assertThatCode(() -> DemandValidator.validate(HYBRID, wellFormed(), FIRST)).doesNotThrowAnyException();
        assertThatCode(() -> DemandValidator.validate(HYBRID, wellFormed(), OptionalLong.of(3)))
                .as("a repeat of the same revision").doesNotThrowAnyException();
    }

    @Test
    void acceptsTouchingRangesAndGroupsInAnyOrder() {
        var demand = withRanges(
                GroupRanges.of(MAMBA, new BlockRange(7, 8)),
                GroupRanges.of(ATTENTION, new BlockRange(0, 3), new BlockRange(3, 8)),
                GroupRanges.of(WINDOW, new BlockRange(4, 8)));
        assertThatCode(() -> DemandValidator.validate(HYBRID, demand, FIRST)).doesNotThrowAnyException();
    }

    @Test
    void refusesOutOfOrderRanges() {
        var demand = withRanges(
                GroupRanges.of(ATTENTION, new BlockRange(4, 8), new BlockRange(0, 4)),
                GroupRanges.of(WINDOW, new BlockRange(4, 8)),
                GroupRanges.of(MAMBA, new BlockRange(7, 8)));
        assertReason(() -> DemandValidator.validate(HYBRID, demand, FIRST), Reason.RANGES_OUT_OF_ORDER);
    }

    @Test
    void refusesOverlappingRanges() {
        var demand = withRanges(
                GroupRanges.of(ATTENTION, new BlockRange(0, 5), new BlockRange(4, 8)),
                GroupRanges.of(WINDOW, new BlockRange(4, 8)),
                GroupRanges.of(MAMBA, new BlockRange(7, 8)));
        assertReason(() -> DemandValidator.validate(HYBRID, demand, FIRST), Reason.RANGES_OVERLAP);
        assertReason(() -> DemandValidator.requireOrderedDisjoint(
                GroupRanges.of(MAMBA, new BlockRange(7, 8), new BlockRange(7, 8))), Reason.RANGES_OVERLAP);
    }

    @Test
    void refusesARangePastTheSelectedEnd() {
        var demand = withRanges(
                GroupRanges.of(ATTENTION, new BlockRange(0, 9)),
                GroupRanges.of(WINDOW, new BlockRange(4, 8)),
                GroupRanges.of(MAMBA, new BlockRange(7, 8)));
        assertReason(() -> DemandValidator.validate(HYBRID, demand, FIRST), Reason.RANGE_BEYOND_SELECTED_END);
    }

    @Test
    void refusesAMalformedRange() {
        assertReason(() -> new BlockRange(4, 4), Reason.MALFORMED_RANGE);
        assertReason(() -> new BlockRange(-1, 4), Reason.MALFORMED_RANGE);
    }

    @Test
    void refusesAnIncompleteGroupSet() {
        var missing = withRanges(
                GroupRanges.of(ATTENTION, new BlockRange(0, 8)),
                GroupRanges.of(MAMBA, new BlockRange(7, 8)));
        assertReason(() -> DemandValidator.validate(HYBRID, missing, FIRST), Reason.MISSING_GROUP);

        var unknown = withRanges(
                GroupRanges.of(ATTENTION, new BlockRange(0, 8)),
                GroupRanges.of(WINDOW, new BlockRange(4, 8)),
                GroupRanges.of(MAMBA, new BlockRange(7, 8)),
                GroupRanges.of(42, new BlockRange(0, 1)));
        assertReason(() -> DemandValidator.validate(HYBRID, unknown, FIRST), Reason.UNKNOWN_GROUP);

        var twice = withRanges(
                GroupRanges.of(ATTENTION, new BlockRange(0, 8)),
                GroupRanges.of(WINDOW, new BlockRange(4, 8)),
                GroupRanges.of(MAMBA, new BlockRange(7, 8)),
                GroupRanges.of(WINDOW, new BlockRange(4, 8)));
        assertReason(() -> DemandValidator.validate(HYBRID, twice, FIRST), Reason.DUPLICATE_GROUP);
    }

    @Test
    void refusesAPageSizeMismatch() {
        var demand = wellFormed();
        var otherPageSize = new RecoveryDemand(demand.revision(), 32, 0, pages(8), ATTENTION, 8,
                demand.declaredRanges());
        assertReason(() -> DemandValidator.validate(HYBRID, otherPageSize, FIRST), Reason.PAGE_SIZE_MISMATCH);

        var unalignedEnd = new RecoveryDemand(demand.revision(), PAGE, 0, pages(8) + 3, ATTENTION, 8,
                demand.declaredRanges());
        assertReason(() -> DemandValidator.validate(HYBRID, unalignedEnd, FIRST), Reason.TOKENS_NOT_PAGE_ALIGNED);

        var unalignedOrigin = new RecoveryDemand(demand.revision(), PAGE, 5, pages(8), ATTENTION, 8,
                demand.declaredRanges());
        assertReason(() -> DemandValidator.validate(HYBRID, unalignedOrigin, FIRST), Reason.TOKENS_NOT_PAGE_ALIGNED);

        var endBeforeOrigin = new RecoveryDemand(demand.revision(), PAGE, pages(9), pages(8), ATTENTION, 8,
                demand.declaredRanges());
        assertReason(() -> DemandValidator.validate(HYBRID, endBeforeOrigin, FIRST), Reason.END_BEFORE_ORIGIN);
    }

    @Test
    void refusesAHashCountThatDoesNotMatchTheSelectedEnd() {
        var demand = wellFormed();
        var tooFew = new RecoveryDemand(demand.revision(), PAGE, 0, pages(8), ATTENTION, 7, demand.declaredRanges());
        assertReason(() -> DemandValidator.validate(HYBRID, tooFew, FIRST), Reason.HASH_COUNT_MISMATCH);

        var tooMany = new RecoveryDemand(demand.revision(), PAGE, 0, pages(8), MAMBA, 9, demand.declaredRanges());
        assertReason(() -> DemandValidator.validate(HYBRID, tooMany, FIRST), Reason.HASH_COUNT_MISMATCH);

        var unknownSelected = new RecoveryDemand(demand.revision(), PAGE, 0, pages(8), 42, 8,
                demand.declaredRanges());
        assertReason(() -> DemandValidator.validate(HYBRID, unknownSelected, FIRST), Reason.UNKNOWN_GROUP);
    }

    @Test
    void refusesARevisionGoingBackwards() {
        assertReason(() -> DemandValidator.validate(HYBRID, wellFormed(), OptionalLong.of(4)),
                Reason.REVISION_BACKWARDS);
        // uint64 on the wire: -1L is 2^64 - 1, the largest revision, not a negative one.
        assertReason(() -> DemandValidator.requireRevisionNotBackwards(OptionalLong.of(-1L), 5),
                Reason.REVISION_BACKWARDS);
        assertThatCode(() -> DemandValidator.requireRevisionNotBackwards(OptionalLong.of(5), -1L))
                .doesNotThrowAnyException();
    }
}
