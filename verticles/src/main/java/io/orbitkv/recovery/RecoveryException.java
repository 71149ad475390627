package io.orbitkv.recovery;

import io.orbitkv.protocol.engine.ErrorReason;

import java.io.Serial;
import java.util.Objects;

/**
 * A rule set, an availability view, a boundary or an engine demand that the recovery contract cannot accept.
 *
 * <p>Design note: one unchecked exception type with a {@link Reason} instead of a hierarchy, in the manner of Vert.x's
 * {@code ReplyFailure}. Callers branch on {@link #reason()}; the message is for humans and logs. Each reason names the
 * {@link ErrorReason} it travels as on the engine API, so the gRPC layer maps it without a second table.
 */
public final class RecoveryException extends RuntimeException {
    @Serial
    private static final long serialVersionUID = 1L;

    /** Why the recovery contract refused its input. */
    public enum Reason {
        // --- registered rule set (reported to the engine as INVALID_IDENTITY) ---
        /** The page size is not a positive token count. */
        INVALID_PAGE_SIZE(ErrorReason.INVALID_IDENTITY),
        /** A rule set registers no group at all. */
        NO_GROUPS(ErrorReason.INVALID_IDENTITY),
        /** A group id is negative (the wire carries uint32 ids; Java ints cover the ids we accept). */
        INVALID_GROUP_ID(ErrorReason.INVALID_IDENTITY),
        /** A group id appears twice in a rule set, in an availability view or in a demand. */
        DUPLICATE_GROUP(ErrorReason.INVALID_IDENTITY),
        /** A sliding-window group has no positive window. */
        INVALID_WINDOW(ErrorReason.INVALID_IDENTITY),
        /** A recurrent group's checkpoint interval is not a positive multiple of the page size. */
        INVALID_CHECKPOINT_INTERVAL(ErrorReason.INVALID_IDENTITY),
        /** A window or checkpoint interval is set on a group of a kind that has no such parameter. */
        PARAMETER_FOR_OTHER_KIND(ErrorReason.INVALID_IDENTITY),

        // --- boundaries and availability (INVALID_DEMAND) ---
        /** A token count that must be a whole number of pages is not. */
        TOKENS_NOT_PAGE_ALIGNED(ErrorReason.INVALID_DEMAND),
        /** A token count is negative or has more pages than a block position can index. */
        TOKENS_OUT_OF_RANGE(ErrorReason.INVALID_DEMAND),
        /** The selected end lies before the valid-prefix origin. */
        END_BEFORE_ORIGIN(ErrorReason.INVALID_DEMAND),
        /** A boundary to restore to does not lie after the valid-prefix origin, so there is nothing to restore. */
        BOUNDARY_NOT_AFTER_ORIGIN(ErrorReason.INVALID_DEMAND),
        /** A recurrent group has no checkpoint at this boundary by construction (not a multiple of its interval). */
        NOT_A_CHECKPOINT_BOUNDARY(ErrorReason.INVALID_DEMAND),
        /** A group id that the registered rule set does not contain. */
        UNKNOWN_GROUP(ErrorReason.INVALID_DEMAND),

        // --- engine-declared demand (INVALID_DEMAND unless noted) ---
        /** The engine's page size differs from the registered one. */
        PAGE_SIZE_MISMATCH(ErrorReason.INVALID_DEMAND),
        /** A registered group has no declared ranges in the demand. */
        MISSING_GROUP(ErrorReason.INVALID_DEMAND),
        /** A block range is empty or starts below position zero. */
        MALFORMED_RANGE(ErrorReason.INVALID_DEMAND),
        /** A group's ranges are not in ascending order of their start. */
        RANGES_OUT_OF_ORDER(ErrorReason.INVALID_DEMAND),
        /** Two of a group's ranges share a block position. */
        RANGES_OVERLAP(ErrorReason.INVALID_DEMAND),
        /** A declared range reaches past the selected end. */
        RANGE_BEYOND_SELECTED_END(ErrorReason.INVALID_DEMAND),
        /** The selected group's hash chain does not have exactly one hash per page up to the selected end. */
        HASH_COUNT_MISMATCH(ErrorReason.INVALID_DEMAND),
        /** The demand's revision is older than one already seen for the same request. */
        REVISION_BACKWARDS(ErrorReason.REVISION_BACKWARDS);

        private final ErrorReason wireReason;

        Reason(ErrorReason wireReason) {
            this.wireReason = wireReason;
        }

        /** The engine-API error this reason is reported as. */
        public ErrorReason wireReason() {
            return wireReason;
        }
    }

    private final Reason reason;

    public RecoveryException(Reason reason, String message) {
        super(Objects.requireNonNull(reason, "reason").name() + ": " + message);
        this.reason = reason;
    }

    public Reason reason() {
        return reason;
    }
}
