package io.orbitkv.recovery;

import io.orbitkv.recovery.RecoveryException.Reason;

import java.util.Objects;

/**
 * The recovery rule of one registered layer group.
 *
 * <p>Only the parameter of the group's own kind may be set; the other stays zero (as on the wire, where unset proto3
 * fields read as zero). Checks that need the page size (a checkpoint interval must be a whole number of pages) are made
 * by {@link RecoveryRules}.
 *
 * @param groupId                  the engine's group id, unique within an instance's rule set
 * @param kind                     what state the group needs at a boundary
 * @param windowTokens             {@link GroupKind#SLIDING_WINDOW} only: how many trailing tokens the group attends to
 * @param checkpointIntervalTokens {@link GroupKind#RECURRENT} only: checkpoints exist at every multiple of this
 */
public record GroupRule(int groupId, GroupKind kind, long windowTokens, long checkpointIntervalTokens) {

    public GroupRule {
        Objects.requireNonNull(kind, "kind");
        if (groupId < 0) {
            throw new RecoveryException(Reason.INVALID_GROUP_ID, "group id " + groupId + " is negative");
        }
        switch (kind) {
            case FULL_ATTENTION -> {
                requireUnset(groupId, kind, "window", windowTokens);
                requireUnset(groupId, kind, "checkpoint interval", checkpointIntervalTokens);
            }
            case SLIDING_WINDOW -> {
                if (windowTokens <= 0) {
                    throw new RecoveryException(Reason.INVALID_WINDOW,
                            "sliding-window group " + groupId + " has window " + windowTokens + " tokens; must be > 0");
                }
                requireUnset(groupId, kind, "checkpoint interval", checkpointIntervalTokens);
            }
            case RECURRENT -> {
                if (checkpointIntervalTokens <= 0) {
                    throw new RecoveryException(Reason.INVALID_CHECKPOINT_INTERVAL, "recurrent group " + groupId
                            + " has checkpoint interval " + checkpointIntervalTokens + " tokens; must be > 0");
                }
                requireUnset(groupId, kind, "window", windowTokens);
            }
        }
    }

    public static GroupRule fullAttention(int groupId) {
        return new GroupRule(groupId, GroupKind.FULL_ATTENTION, 0, 0);
    }

    public static GroupRule slidingWindow(int groupId, long windowTokens) {
        return new GroupRule(groupId, GroupKind.SLIDING_WINDOW, windowTokens, 0);
    }

    public static GroupRule recurrent(int groupId, long checkpointIntervalTokens) {
        return new GroupRule(groupId, GroupKind.RECURRENT, 0, checkpointIntervalTokens);
    }

    private static void requireUnset(int groupId, GroupKind kind, String parameter, long value) {
        if (value != 0) {
            throw new RecoveryException(Reason.PARAMETER_FOR_OTHER_KIND,
                    kind + " group " + groupId + " sets a " + parameter + " of " + value + " tokens; it has none");
        }
    }
}
