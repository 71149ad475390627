package io.orbitkv.recovery;

import io.orbitkv.recovery.RecoveryException.Reason;

import java.util.BitSet;
import java.util.Objects;

/**
 * Which block positions of one group have a page the Manager could restore (from any replica), as an immutable bit set.
 *
 * <p>For a {@link GroupKind#RECURRENT} group a set bit at position p means "the checkpoint taken after the block that
 * ends at token {@code (p+1)*P}", i.e. the checkpoint for boundary b lives at position {@code b/P - 1}:
 * <pre>
 *   tokens      0        4P       8P       12P        (P = page size, checkpoint interval C = 4P)
 *   positions   0  1  2  3  4  5  6  7  8  9  10 11
 *   checkpoint           ▲ b=4P      ▲ b=8P      ▲ b=12P
 * </pre>
 * The view does not know its group's rule: a bit at a position that is no checkpoint boundary of a recurrent group is
 * simply never consulted by {@link RecoveryContract}.
 *
 * <p>Design note: immutable so that one view can be shared between a planning pass and its tests without copies at
 * each step; builders ({@link #with(int)}, {@link #without(int)}) return new views and are meant for tests and for
 * assembling a view once per query, not for hot loops.
 */
public final class GroupAvailability {
    private final int groupId;
    private final BitSet positions;

    private GroupAvailability(int groupId, BitSet positions) {
        if (groupId < 0) {
            throw new RecoveryException(Reason.INVALID_GROUP_ID, "group id " + groupId + " is negative");
        }
        this.groupId = groupId;
        this.positions = positions;
    }

    /** A view of {@code groupId} with the given positions set; the bit set is copied. */
    public static GroupAvailability of(int groupId, BitSet positions) {
        return new GroupAvailability(groupId, (BitSet) Objects.requireNonNull(positions, "positions").clone());
    }

    public static GroupAvailability none(int groupId) {
        return new GroupAvailability(groupId, new BitSet());
    }

    public static GroupAvailability ofPositions(int groupId, int... positions) {
        var bits = new BitSet();
        for (int position : positions) {
            requireNonNegative(position);
            bits.set(position);
        }
        return new GroupAvailability(groupId, bits);
    }

    /** Every position in {@code [startInclusive, endExclusive)}. */
    public static GroupAvailability ofRange(int groupId, int startInclusive, int endExclusive) {
        var bits = new BitSet();
        bits.set(startInclusive, endExclusive);
        return new GroupAvailability(groupId, bits);
    }

    /** A recurrent group's view holding checkpoints at the given boundaries (token counts, multiples of the page size). */
    public static GroupAvailability ofCheckpoints(int groupId, int pageSizeTokens, long... boundaryTokens) {
        var bits = new BitSet();
        for (long boundary : boundaryTokens) {
            bits.set(checkpointPosition(boundary, pageSizeTokens));
        }
        return new GroupAvailability(groupId, bits);
    }

    /** Where the checkpoint for {@code boundaryTokens} is stored: the page of the block that ends at the boundary. */
    public static int checkpointPosition(long boundaryTokens, int pageSizeTokens) {
        if (pageSizeTokens <= 0) {
            throw new RecoveryException(Reason.INVALID_PAGE_SIZE, "page size " + pageSizeTokens + " tokens; must be > 0");
        }
        if (boundaryTokens <= 0 || boundaryTokens % pageSizeTokens != 0
                || boundaryTokens / pageSizeTokens > Integer.MAX_VALUE) {
            throw new RecoveryException(boundaryTokens % pageSizeTokens != 0 ? Reason.TOKENS_NOT_PAGE_ALIGNED
                    : Reason.TOKENS_OUT_OF_RANGE, "no checkpoint page for boundary " + boundaryTokens
                    + " tokens with page size " + pageSizeTokens);
        }
        return (int) (boundaryTokens / pageSizeTokens) - 1;
    }

    public int groupId() {
        return groupId;
    }

    public boolean isAvailable(int position) {
        return position >= 0 && positions.get(position);
    }

    /** Whether every position in {@code [startInclusive, endExclusive)} is available (true for an empty run). */
    public boolean allAvailable(int startInclusive, int endExclusive) {
        return startInclusive >= endExclusive || positions.nextClearBit(startInclusive) >= endExclusive;
    }

    /** The first position at or after {@code fromPosition} that is not available. */
    public int firstMissingFrom(int fromPosition) {
        return positions.nextClearBit(fromPosition);
    }

    public int cardinality() {
        return positions.cardinality();
    }

    /** A copy of the available positions. */
    public BitSet positions() {
        return (BitSet) positions.clone();
    }

    public GroupAvailability with(int position) {
        requireNonNegative(position);
        var bits = positions();
        bits.set(position);
        return new GroupAvailability(groupId, bits);
    }

    public GroupAvailability without(int position) {
        requireNonNegative(position);
        var bits = positions();
        bits.clear(position);
        return new GroupAvailability(groupId, bits);
    }

    private static void requireNonNegative(int position) {
        if (position < 0) {
            throw new RecoveryException(Reason.TOKENS_OUT_OF_RANGE, "block position " + position + " is negative");
        }
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof GroupAvailability that && groupId == that.groupId && positions.equals(that.positions);
    }

    @Override
    public int hashCode() {
        return 31 * groupId + positions.hashCode();
    }

    @Override
    public String toString() {
        return "GroupAvailability[group=" + groupId + ", positions=" + positions + "]";
    }
}
