package io.orbitkv.recovery;

import io.orbitkv.recovery.RecoveryException.Reason;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Worked examples of the recovery contract on a hybrid model: full attention, a 4-page sliding window and a recurrent
 * group checkpointing every 4 pages, with 16-token pages.
 */
class RecoveryContractTest {
    static final int PAGE = 16;
    static final int ATTENTION = 0;
    static final int WINDOW = 1;
    static final int MAMBA = 2;
    static final RecoveryRules HYBRID = RecoveryRules.of(PAGE,
            GroupRule.fullAttention(ATTENTION),
            GroupRule.slidingWindow(WINDOW, 4 * PAGE),
            GroupRule.recurrent(MAMBA, 4 * PAGE));

    static long pages(int count) {
        return (long) count * PAGE;
    }

    // The hybrid model.
    /**
     * The LMCache bug: attention and window pages match 10 pages, but the recurrent state only has the checkpoint at
     * 4 pages. Resuming at 10 pages would run the recurrent layers from a state that does not exist.
     */
    @Test
    void longerAttentionMatchDoesNotOutrunTheRecurrentCheckpoint() {
        var availability = List.of(
                GroupAvailability.ofRange(ATTENTION, 0, 10),
                GroupAvailability.ofRange(WINDOW, 0, 10),
                GroupAvailability.ofCheckpoints(MAMBA, PAGE, pages(4)));

        assertThat(RecoveryContract.legalBoundaries(HYBRID, availability, 0, pages(10)))
                .containsExactly(pages(4));
        assertThat(RecoveryContract.bestBoundary(HYBRID, availability, 0, pages(10))).hasValue(pages(4));
        assertThat(RecoveryContract.isLegal(HYBRID, availability, 0, pages(10))).isFalse();

        var attentionAlone = RecoveryRules.of(PAGE, GroupRule.fullAttention(ATTENTION));
        assertThat(RecoveryContract.bestBoundary(attentionAlone, availability.subList(0, 1), 0, pages(10)))
                .as("attention alone would claim all 10 pages").hasValue(pages(10));
    }

    @Test
    void requiredRangesAtTheFourPageBoundary() {
        assertThat(RecoveryContract.requiredRanges(HYBRID, pages(4), 0)).containsExactly(
                GroupRanges.of(ATTENTION, new BlockRange(0, 4)),
                GroupRanges.of(WINDOW, new BlockRange(0, 4)),
                GroupRanges.of(MAMBA, new BlockRange(3, 4)));
    }

    @Test
    void aLaterCheckpointExtendsTheBestBoundaryToIt() {
        var availability = List.of(
                GroupAvailability.ofRange(ATTENTION, 0, 10),
                GroupAvailability.ofRange(WINDOW, 0, 10),
                GroupAvailability.ofCheckpoints(MAMBA, PAGE, pages(4), pages(8)));

        assertThat(RecoveryContract.legalBoundaries(HYBRID, availability, 0, pages(10)))
                .containsExactly(pages(4), pages(8));
        assertThat(RecoveryContract.requiredRanges(HYBRID, pages(8), 0)).containsExactly(
                GroupRanges.of(ATTENTION, new BlockRange(0, 8)),
                GroupRanges.of(WINDOW, new BlockRange(4, 8)),
                GroupRanges.of(MAMBA, new BlockRange(7, 8)));
    }

    @Test
    void theWindowGroupNeedsNoPageOlderThanItsWindow() {
        // Window pages 0..3 were evicted; the 8-page boundary only attends to pages 4..7.
        var availability = List.of(
                GroupAvailability.ofRange(ATTENTION, 0, 8),
                GroupAvailability.ofRange(WINDOW, 4, 8),
                GroupAvailability.ofCheckpoints(MAMBA, PAGE, pages(4), pages(8)));

        assertThat(RecoveryContract.legalBoundaries(HYBRID, availability, 0, pages(8))).containsExactly(pages(8));
    }

    @Test
    void aMissingRegisteredGroupViewMeansNothingAvailable() {
        var availability = List.of(
                GroupAvailability.ofRange(ATTENTION, 0, 10),
                GroupAvailability.ofCheckpoints(MAMBA, PAGE, pages(4)));

        assertThat(RecoveryContract.bestBoundary(HYBRID, availability, 0, pages(10))).isEmpty();
    }

    @Test
    void theValidPrefixOriginIsNeverRestored() {
        // Pages 0..5 are in HBM already: attention needs only [6, 8), and the window, which would reach back to
        // page 4, stops at the origin too.
        var availability = List.of(
                GroupAvailability.ofRange(ATTENTION, 6, 8),
                GroupAvailability.ofRange(WINDOW, 6, 8),
                GroupAvailability.ofCheckpoints(MAMBA, PAGE, pages(8)));

        assertThat(RecoveryContract.legalBoundaries(HYBRID, availability, pages(6), pages(8)))
                .containsExactly(pages(8));
        assertThat(RecoveryContract.requiredRanges(HYBRID, pages(8), pages(6))).containsExactly(
                GroupRanges.of(ATTENTION, new BlockRange(6, 8)),
                GroupRanges.of(WINDOW, new BlockRange(6, 8)),
                GroupRanges.of(MAMBA, new BlockRange(7, 8)));
    }

    // A sliding-window group alone.
    @Test
    void requiredRangesExcludePagesOlderThanTheWindow() {
        var rules = RecoveryRules.of(PAGE, GroupRule.slidingWindow(WINDOW, 4 * PAGE));

        assertThat(RecoveryContract.requiredRanges(rules, pages(10), 0))
                .containsExactly(GroupRanges.of(WINDOW, new BlockRange(6, 10)));
    }

    @Test
    void anUnalignedWindowAlsoNeedsThePageHoldingItsOldestToken() {
        // Tokens [160 - 50, 160) = [110, 160): token 110 lives on page 6.
        var rules = RecoveryRules.of(PAGE, GroupRule.slidingWindow(WINDOW, 50));

        assertThat(RecoveryContract.requiredRanges(rules, pages(10), 0))
                .containsExactly(GroupRanges.of(WINDOW, new BlockRange(6, 10)));
    }

    @Test
    void legalBoundariesCanResumeAfterAHoleTheWindowHasPassed() {
        var rules = RecoveryRules.of(PAGE, GroupRule.slidingWindow(WINDOW, 2 * PAGE));
        var availability = List.of(GroupAvailability.ofPositions(WINDOW, 0, 2, 3, 4));

        assertThat(RecoveryContract.legalBoundaries(rules, availability, 0, pages(5)))
                .containsExactly(pages(1), pages(4), pages(5));
    }

    // Recurrent groups alone.
    @Test
    void checkpointBitsOffTheIntervalAreIgnored() {
        var rules = RecoveryRules.of(PAGE, GroupRule.recurrent(MAMBA, 4 * PAGE));
        var availability = List.of(GroupAvailability.ofPositions(MAMBA, 0, 1, 2, 4, 5, 6, 7));

        assertThat(RecoveryContract.legalBoundaries(rules, availability, 0, pages(8))).containsExactly(pages(8));
    }

    @Test
    void boundariesStepByTheCommonMultipleOfAllIntervals() {
        var rules = RecoveryRules.of(PAGE, GroupRule.recurrent(1, 2 * PAGE), GroupRule.recurrent(2, 3 * PAGE));
        var availability = List.of(GroupAvailability.ofRange(1, 0, 20), GroupAvailability.ofRange(2, 0, 20));

        assertThat(RecoveryContract.legalBoundaries(rules, availability, pages(1), pages(20)))
                .containsExactly(pages(6), pages(12), pages(18));
    }

    @Test
    void requiredRangesRefuseABoundaryWithoutACheckpoint() {
        assertThatThrownBy(() -> RecoveryContract.requiredRanges(HYBRID, pages(5), 0))
                .isInstanceOfSatisfying(RecoveryException.class,
                        e -> assertThat(e.reason()).isEqualTo(Reason.NOT_A_CHECKPOINT_BOUNDARY));
    }

    // Inputs the contract refuses or treats as empty.
    @Test
    void anEmptySpanHasNoBoundary() {
        var availability = List.of(GroupAvailability.ofRange(ATTENTION, 0, 10));
        assertThat(RecoveryContract.legalBoundaries(HYBRID, availability, pages(4), pages(4))).isEmpty();
        assertThat(RecoveryContract.isLegal(HYBRID, availability, pages(4), pages(4))).isFalse();
    }

    @Test
    void refusesMalformedBoundsAndViews() {
        var none = List.<GroupAvailability>of();
        assertReason(() -> RecoveryContract.legalBoundaries(HYBRID, none, pages(4), pages(2)),
                Reason.END_BEFORE_ORIGIN);
        assertReason(() -> RecoveryContract.legalBoundaries(HYBRID, none, 0, 17), Reason.TOKENS_NOT_PAGE_ALIGNED);
        assertReason(() -> RecoveryContract.legalBoundaries(HYBRID, none, -16, 16), Reason.TOKENS_OUT_OF_RANGE);
        assertReason(() -> RecoveryContract.legalBoundaries(HYBRID, none, 0, (Integer.MAX_VALUE + 1L) * PAGE),
                Reason.TOKENS_OUT_OF_RANGE);
        assertReason(() -> RecoveryContract.legalBoundaries(HYBRID, List.of(GroupAvailability.none(9)), 0, 16),
                Reason.UNKNOWN_GROUP);
        assertReason(() -> RecoveryContract.legalBoundaries(HYBRID,
                List.of(GroupAvailability.none(ATTENTION), GroupAvailability.none(ATTENTION)), 0, 16),
                Reason.DUPLICATE_GROUP);
        assertReason(() -> RecoveryContract.requiredRanges(HYBRID, pages(4), pages(4)),
                Reason.BOUNDARY_NOT_AFTER_ORIGIN);
        assertReason(() -> GroupAvailability.checkpointPosition(0, PAGE), Reason.TOKENS_OUT_OF_RANGE);
        assertReason(() -> GroupAvailability.checkpointPosition(20, PAGE), Reason.TOKENS_NOT_PAGE_ALIGNED);
    }

    static void assertReason(Runnable call, Reason reason) {
        assertThatThrownBy(call::run).isInstanceOfSatisfying(RecoveryException.class,
                e -> assertThat(e.reason()).isEqualTo(reason));
    }
}
