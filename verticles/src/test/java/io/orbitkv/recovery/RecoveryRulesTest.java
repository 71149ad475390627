package io.orbitkv.recovery;

import io.orbitkv.protocol.engine.ErrorReason;
import io.orbitkv.recovery.RecoveryException.Reason;
import org.junit.jupiter.api.Test;

import java.util.List;

import static io.orbitkv.recovery.RecoveryContractTest.assertReason;
import static org.assertj.core.api.Assertions.assertThat;

class RecoveryRulesTest {

    @Test
    void keepsGroupsInIdOrder() {
        var rules = RecoveryRules.of(16, GroupRule.recurrent(7, 64), GroupRule.fullAttention(2),
                GroupRule.slidingWindow(5, 100));

        assertThat(rules.groups()).extracting(GroupRule::groupId).containsExactly(2, 5, 7);
        assertThat(rules.rule(5).windowTokens()).isEqualTo(100);
        assertThat(rules.contains(3)).isFalse();
        assertReason(() -> rules.rule(3), Reason.UNKNOWN_GROUP);
    }

    @Test
    void refusesAnInvalidRuleSet() {
        assertReason(() -> RecoveryRules.of(0, GroupRule.fullAttention(0)), Reason.INVALID_PAGE_SIZE);
        assertReason(() -> new RecoveryRules(16, List.of()), Reason.NO_GROUPS);
        assertReason(() -> RecoveryRules.of(16, GroupRule.fullAttention(1), GroupRule.recurrent(1, 64)),
                Reason.DUPLICATE_GROUP);
        assertReason(() -> RecoveryRules.of(16, GroupRule.recurrent(1, 40)), Reason.INVALID_CHECKPOINT_INTERVAL);
    }

    @Test
    void refusesAnInvalidRule() {
        assertReason(() -> GroupRule.fullAttention(-1), Reason.INVALID_GROUP_ID);
        assertReason(() -> GroupRule.slidingWindow(0, 0), Reason.INVALID_WINDOW);
        assertReason(() -> GroupRule.slidingWindow(0, -16), Reason.INVALID_WINDOW);
        assertReason(() -> GroupRule.recurrent(0, 0), Reason.INVALID_CHECKPOINT_INTERVAL);
        assertReason(() -> new GroupRule(0, GroupKind.FULL_ATTENTION, 64, 0), Reason.PARAMETER_FOR_OTHER_KIND);
        assertReason(() -> new GroupRule(0, GroupKind.FULL_ATTENTION, 0, 64), Reason.PARAMETER_FOR_OTHER_KIND);
        assertReason(() -> new GroupRule(0, GroupKind.SLIDING_WINDOW, 64, 64), Reason.PARAMETER_FOR_OTHER_KIND);
        assertReason(() -> new GroupRule(0, GroupKind.RECURRENT, 64, 64), Reason.PARAMETER_FOR_OTHER_KIND);
    }

    @Test
    void reasonsNameTheirEngineApiError() {
        assertThat(Reason.DUPLICATE_GROUP.wireReason()).isEqualTo(ErrorReason.INVALID_IDENTITY);
        assertThat(Reason.RANGES_OVERLAP.wireReason()).isEqualTo(ErrorReason.INVALID_DEMAND);
        assertThat(Reason.REVISION_BACKWARDS.wireReason()).isEqualTo(ErrorReason.REVISION_BACKWARDS);
        assertThat(new RecoveryException(Reason.MISSING_GROUP, "group 3").getMessage())
                .isEqualTo("MISSING_GROUP: group 3");
    }
}
