package io.orbitkv.recovery;

import io.orbitkv.recovery.RecoveryException.Reason;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Objects;

/**
 * The validated recovery rules of one registered instance: its page size and one {@link GroupRule} per layer group.
 *
 * <p>Constructing one is the validation: ids are unique, there is at least one group, and every recurrent checkpoint
 * interval is a whole number of pages (a checkpoint is stored as the page ending at its boundary, so a boundary inside
 * a page could not be stored). A sliding window need not be page-aligned: the page holding its oldest token is needed.
 * Groups are kept in ascending id order so that every per-group output has one deterministic order.
 *
 * @param pageSizeTokens tokens per page, equal for every group of the instance
 * @param groups         the rules, sorted by group id
 */
public record RecoveryRules(int pageSizeTokens, List<GroupRule> groups) {

    public RecoveryRules {
        if (pageSizeTokens <= 0) {
            throw new RecoveryException(Reason.INVALID_PAGE_SIZE, "page size " + pageSizeTokens + " tokens; must be > 0");
        }
        Objects.requireNonNull(groups, "groups");
        if (groups.isEmpty()) {
            throw new RecoveryException(Reason.NO_GROUPS, "a rule set needs at least one group");
        }
        var sorted = new ArrayList<>(groups);
        sorted.forEach(rule -> Objects.requireNonNull(rule, "rule"));
        sorted.sort(Comparator.comparingInt(GroupRule::groupId));
        for (int i = 1; i < sorted.size(); i++) {
            if (sorted.get(i).groupId() == sorted.get(i - 1).groupId()) {
                throw new RecoveryException(Reason.DUPLICATE_GROUP,
                        "group " + sorted.get(i).groupId() + " is registered twice");
            }
        }
        for (GroupRule rule : sorted) {
            if (rule.kind() == GroupKind.RECURRENT && rule.checkpointIntervalTokens() % pageSizeTokens != 0) {
                throw new RecoveryException(Reason.INVALID_CHECKPOINT_INTERVAL, "recurrent group " + rule.groupId()
                        + " checkpoints every " + rule.checkpointIntervalTokens()
                        + " tokens, not a multiple of the page size " + pageSizeTokens);
            }
        }
        groups = List.copyOf(sorted);
    }

    public static RecoveryRules of(int pageSizeTokens, GroupRule... groups) {
        return new RecoveryRules(pageSizeTokens, List.of(groups));
    }

    /** The rule of {@code groupId}, or a {@link Reason#UNKNOWN_GROUP} failure. */
    public GroupRule rule(int groupId) {
        for (GroupRule rule : groups) {
            if (rule.groupId() == groupId) {
                return rule;
            }
        }
        throw new RecoveryException(Reason.UNKNOWN_GROUP, "group " + groupId + " is not registered");
    }

    public boolean contains(int groupId) {
        for (GroupRule rule : groups) {
            if (rule.groupId() == groupId) {
                return true;
            }
        }
        return false;
    }

    /** The block position of the page that starts at {@code tokens}; the tokens must be page-aligned and in range. */
    int position(long tokens, String what) {
        requirePageAligned(tokens, what);
        long position = tokens / pageSizeTokens;
        if (position > Integer.MAX_VALUE) {
            throw new RecoveryException(Reason.TOKENS_OUT_OF_RANGE,
                    what + " of " + tokens + " tokens is beyond the last indexable block position");
        }
        return (int) position;
    }

    void requirePageAligned(long tokens, String what) {
        if (tokens < 0) {
            throw new RecoveryException(Reason.TOKENS_OUT_OF_RANGE, what + " of " + tokens + " tokens is negative");
        }
        if (tokens % pageSizeTokens != 0) {
            throw new RecoveryException(Reason.TOKENS_NOT_PAGE_ALIGNED,
                    what + " of " + tokens + " tokens is not a multiple of the page size " + pageSizeTokens);
        }
    }
}
