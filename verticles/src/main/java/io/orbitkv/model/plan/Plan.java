package io.orbitkv.model.plan;

import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.recovery.BlockRange;
import io.orbitkv.recovery.GroupRanges;
import java.util.List;
import java.util.Objects;
import io.orbitkv.model.plan.BoundaryReason;
import io.orbitkv.model.plan.PlannedSegment;
import io.orbitkv.model.plan.RouteChoice;
import io.orbitkv.model.plan.TimeEstimate;

/**
 * An immutable plan for one demand revision: the chosen boundary and why, the exact required ranges per group, and the
 * segments that cover exactly those ranges, each with its route, evidence and completion target. Construction checks
 * the tiling (every required page in exactly one segment, nothing outside), so an owner that acquires a plan's
 * segments never leases a page the boundary does not require.
 *
 * <p>A plan whose boundary is the valid-prefix origin restores nothing: the engine recomputes (a MISS).
 *
 * @param longestLegalTokens the longest legal boundary the evidence allowed (the origin when none)
 * @param stateReady         estimated time from the decision until the state reaches the target; unknown when any
 *                           moving batch had no usable estimate
 * @param choices            the route choices of batches that had equal-coverage alternatives
 */
public record Plan(long validPrefixTokens, long boundaryTokens, BoundaryReason reason, CompletionTarget target,
                   List<GroupRanges> required, List<PlannedSegment> segments, long requiredBytes,
                   long longestLegalTokens, TimeEstimate stateReady, List<RouteChoice> choices) {

    public Plan {
        Objects.requireNonNull(reason, "reason");
        Objects.requireNonNull(target, "target");
        Objects.requireNonNull(stateReady, "stateReady");
        required = List.copyOf(required);
        segments = List.copyOf(segments);
        choices = List.copyOf(choices);
        if (boundaryTokens < validPrefixTokens) {
            throw new IllegalArgumentException("boundary " + boundaryTokens + " lies before the origin " + validPrefixTokens);
        }
        if (boundaryTokens == validPrefixTokens && (!required.isEmpty() || !segments.isEmpty())) {
            throw new IllegalArgumentException("a recompute plan restores nothing");
        }
        long bytes = 0;
        int next = 0;
        for (GroupRanges ranges : required) {
            for (BlockRange range : ranges.ranges()) {
                int position = range.startInclusive();
                while (position < range.endExclusive()) {
                    if (next >= segments.size()) {
                        throw new IllegalArgumentException("group " + ranges.groupId() + " position " + position
                                + " is required and in no segment");
                    }
                    PlannedSegment segment = segments.get(next++);
                    if (segment.groupId() != ranges.groupId() || segment.range().startInclusive() != position
                            || segment.range().endExclusive() > range.endExclusive()) {
                        throw new IllegalArgumentException("segment " + segment.groupId() + segment.range()
                                + " does not tile group " + ranges.groupId() + " required " + range + " at " + position);
                    }
                    if (!segment.target().equals(target)) {
                        throw new IllegalArgumentException("segment target differs from the plan's");
                    }
                    bytes += segment.bytes();
                    position = segment.range().endExclusive();
                }
            }
        }
        if (next != segments.size()) {
            throw new IllegalArgumentException("segment " + segments.get(next).groupId() + segments.get(next).range()
                    + " lies outside the required ranges");
        }
        if (bytes != requiredBytes) {
            throw new IllegalArgumentException("segments hold " + bytes + " bytes, the plan says " + requiredBytes);
        }
    }

    /** Whether the plan restores nothing (the engine recomputes from its origin). */
    public boolean isRecompute() {
        return boundaryTokens == validPrefixTokens;
    }

    /** Whether any segment moves payload (otherwise acquisition alone makes the state ready). */
    public boolean movesPayload() {
        return segments.stream().anyMatch(PlannedSegment::movesPayload);
    }

    /** Whether any segment moves payload to become host-ready (then admission answers PENDING while it moves). */
    public boolean movesPayloadToHost() {
        return segments.stream().anyMatch(PlannedSegment::movesPayloadToHost);
    }

    public int pages() {
        return segments.stream().mapToInt(s -> s.pages().size()).sum();
    }
}
