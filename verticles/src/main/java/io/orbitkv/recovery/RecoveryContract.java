package io.orbitkv.recovery;

import io.orbitkv.recovery.RecoveryException.Reason;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.OptionalLong;

/**
 * Which boundaries a hybrid model can resume from, and which pages each group must restore to get there.
 *
 * <h2>Semantics</h2>
 * Pages hold {@code P} tokens; block position p covers tokens {@code [p*P, (p+1)*P)}. A <em>boundary</em> b is a
 * page-aligned token count from which the engine resumes computing. The engine declares a valid-prefix
 * <em>origin</em> (tokens already in its HBM, never restored) and a <em>selected end</em>; candidate boundaries are the
 * page multiples b with {@code origin < b <= end}. Each group needs:
 * <pre>
 *   tokens   0    P    2P   3P   4P   5P   6P   7P   8P
 *   pages    | 0  | 1  | 2  | 3  | 4  | 5  | 6  | 7  |
 *                      ^ origin = 2P                 ^ b = 8P
 *   FULL_ATTENTION     [2   3    4    5    6    7 ]      every page in [origin, b)
 *   SLIDING_WINDOW W=3P                 [5    6    7 ]   pages covering [max(origin, b - W), b)
 *   RECURRENT C=4P                                [7 ]   the checkpoint after the block ending at b (b % C == 0)
 * </pre>
 * A sliding window that is not page-aligned also needs the page holding its oldest token
 * ({@code floor(max(origin, b - W) / P)}); it never needs a page it will not attend to, and pages below the origin are
 * in HBM already.
 *
 * <p>b is <em>legal</em> when every registered group's required pages are available (and, for a recurrent group, b is
 * one of its checkpoint boundaries). Equivalently, the legal set is the intersection of the sets each group allows
 * alone: adding a group can only remove boundaries. That is the point of the contract. A longer attention match with a
 * shorter recurrent checkpoint is not a longer restorable prefix:
 * <pre>
 *   FULL_ATTENTION pages   ██████████          (10 pages available)
 *   RECURRENT checkpoints     ▲ 4P   ·  8P     (only the 4-page checkpoint survived)
 *   best boundary          = 4P, not 10P
 * </pre>
 * {@link #requiredRanges} emits exactly the pages {@link #legalBoundaries} checked, from the same per-group formula, so a
 * planner that restores those ranges restores everything needed and nothing the contract does not demand.
 *
 * <h2>Cost</h2>
 * One pass over the candidate boundaries. Full-attention groups cap it at their first missing page
 * ({@link java.util.BitSet#nextClearBit}); recurrent groups step it by the least common multiple of their intervals.
 * Each remaining candidate costs one bit lookup per recurrent group and one {@code nextClearBit} per window group.
 *
 * <p>Pure logic: no Vert.x, no I/O, no shared state; safe from any thread.
 */
public final class RecoveryContract {

    private RecoveryContract() {
    }

    /**
     * Every legal boundary b with {@code validPrefixOriginTokens < b <= selectedEndTokens}, ascending.
     *
     * @param availability one view per group the Manager found pages for; a registered group without a view has none
     */
    public static List<Long> legalBoundaries(RecoveryRules rules, List<GroupAvailability> availability,
                                             long validPrefixOriginTokens, long selectedEndTokens) {
        Candidates c = candidates(rules, availability, validPrefixOriginTokens, selectedEndTokens);
        var legal = new ArrayList<Long>();
        for (long candidate = c.first(); candidate <= c.last(); candidate += c.step()) {
            long boundary = candidate * rules.pageSizeTokens();
            if (allGroupsAllow(rules, c.views(), validPrefixOriginTokens, boundary, (int) candidate)) {
                legal.add(boundary);
            }
        }
        return List.copyOf(legal);
    }

    /**
     * The candidate boundary positions, {@code first..last} by {@code step} pages: after the origin, not past the
     * selected end nor the first page a full-attention group lacks, and on every recurrent group's checkpoint grid.
     */
    private record Candidates(GroupAvailability[] views, long first, long last, long step) {}

    private static Candidates candidates(RecoveryRules rules, List<GroupAvailability> availability,
                                         long validPrefixOriginTokens, long selectedEndTokens) {
        Objects.requireNonNull(rules, "rules");
        int pageSize = rules.pageSizeTokens();
        int originPosition = rules.position(validPrefixOriginTokens, "valid-prefix origin");
        int endPosition = rules.position(selectedEndTokens, "selected end");
        if (selectedEndTokens < validPrefixOriginTokens) {
            throw new RecoveryException(Reason.END_BEFORE_ORIGIN, "selected end " + selectedEndTokens
                    + " tokens lies before the valid-prefix origin " + validPrefixOriginTokens + " tokens");
        }
        GroupAvailability[] views = viewsInRuleOrder(rules, availability);
        int lastCandidate = endPosition;
        long stepPages = 1;
        for (int g = 0; g < views.length; g++) {
            GroupRule rule = rules.groups().get(g);
            switch (rule.kind()) {
                case FULL_ATTENTION -> lastCandidate = Math.min(lastCandidate, views[g].firstMissingFrom(originPosition));
                case RECURRENT -> stepPages = lcmCapped(stepPages, rule.checkpointIntervalTokens() / pageSize);
                case SLIDING_WINDOW -> { }
            }
        }
        long first = (originPosition / stepPages + 1) * stepPages;
        return new Candidates(views, first, lastCandidate, stepPages);
    }

    /** The largest legal boundary, or empty for a MISS (the engine recomputes from its valid-prefix origin). */
    public static OptionalLong bestBoundary(RecoveryRules rules, List<GroupAvailability> availability,
                                            long validPrefixOriginTokens, long selectedEndTokens) {
        // The same candidates as legalBoundaries, scanned from the top: the first legal one is the best, and on the
        // hot path (a full prefix resident) that is the first candidate checked.
        Candidates c = candidates(rules, availability, validPrefixOriginTokens, selectedEndTokens);
        for (long candidate = c.last() / c.step() * c.step(); candidate >= c.first(); candidate -= c.step()) {
            long boundary = candidate * rules.pageSizeTokens();
            if (allGroupsAllow(rules, c.views(), validPrefixOriginTokens, boundary, (int) candidate)) {
                return OptionalLong.of(boundary);
            }
        }
        return OptionalLong.empty();
    }

    /**
     * Whether one boundary is legal; for re-checking a selected boundary after its evidence has been re-acquired.
     * A boundary that is not after the origin is never legal (there is nothing to restore).
     */
    public static boolean isLegal(RecoveryRules rules, List<GroupAvailability> availability,
                                  long validPrefixOriginTokens, long boundaryTokens) {
        Objects.requireNonNull(rules, "rules");
        rules.position(validPrefixOriginTokens, "valid-prefix origin");
        int boundaryPosition = rules.position(boundaryTokens, "boundary");
        if (boundaryTokens <= validPrefixOriginTokens) {
            return false;
        }
        return allGroupsAllow(rules, viewsInRuleOrder(rules, availability), validPrefixOriginTokens, boundaryTokens,
                boundaryPosition);
    }

    /**
     * Per registered group (ascending id), the minimal block ranges to restore so the engine can resume at
     * {@code boundaryTokens} with its valid prefix ending at {@code validPrefixOriginTokens}. Each group gets exactly one
     * non-empty range: full attention {@code [origin/P, b/P)}, sliding window the pages its window reaches above the
     * origin, recurrent the single checkpoint page {@code [b/P - 1, b/P)}.
     *
     * @throws RecoveryException {@link Reason#BOUNDARY_NOT_AFTER_ORIGIN} when there is nothing to restore, or
     *                           {@link Reason#NOT_A_CHECKPOINT_BOUNDARY} when a recurrent group can have no checkpoint at b
     */
    public static List<GroupRanges> requiredRanges(RecoveryRules rules, long boundaryTokens,
                                                   long validPrefixOriginTokens) {
        Objects.requireNonNull(rules, "rules");
        rules.position(validPrefixOriginTokens, "valid-prefix origin");
        int boundaryPosition = rules.position(boundaryTokens, "boundary");
        if (boundaryTokens <= validPrefixOriginTokens) {
            throw new RecoveryException(Reason.BOUNDARY_NOT_AFTER_ORIGIN, "boundary " + boundaryTokens
                    + " tokens is not after the valid-prefix origin " + validPrefixOriginTokens + " tokens");
        }
        var required = new ArrayList<GroupRanges>(rules.groups().size());
        for (GroupRule rule : rules.groups()) {
            if (!isCheckpointBoundary(rule, boundaryTokens)) {
                throw new RecoveryException(Reason.NOT_A_CHECKPOINT_BOUNDARY, "recurrent group " + rule.groupId()
                        + " checkpoints every " + rule.checkpointIntervalTokens() + " tokens; boundary "
                        + boundaryTokens + " is not one of them");
            }
            int first = firstRequiredPosition(rule, rules.pageSizeTokens(), validPrefixOriginTokens, boundaryTokens);
            required.add(GroupRanges.of(rule.groupId(), new BlockRange(first, boundaryPosition)));
        }
        return List.copyOf(required);
    }

    /**
     * The lowest block position {@code rule}'s group needs for boundary b; it needs every position from there up to
     * {@code b/P - 1}. The single formula {@link #legalBoundaries} and {@link #requiredRanges} both use.
     */
    private static int firstRequiredPosition(GroupRule rule, int pageSize, long origin, long boundary) {
        long firstTokenNeeded = switch (rule.kind()) {
            case FULL_ATTENTION -> origin;
            case SLIDING_WINDOW -> Math.max(origin, boundary - rule.windowTokens());
            // The state after the block that ends at b, i.e. the page holding token b - 1.
            case RECURRENT -> boundary - 1;
        };
        return (int) (firstTokenNeeded / pageSize);
    }

    private static boolean isCheckpointBoundary(GroupRule rule, long boundary) {
        return rule.kind() != GroupKind.RECURRENT || boundary % rule.checkpointIntervalTokens() == 0;
    }

    private static boolean allGroupsAllow(RecoveryRules rules, GroupAvailability[] views, long origin, long boundary,
                                          int boundaryPosition) {
        for (int g = 0; g < views.length; g++) {
            GroupRule rule = rules.groups().get(g);
            if (!isCheckpointBoundary(rule, boundary)) {
                return false;
            }
            int first = firstRequiredPosition(rule, rules.pageSizeTokens(), origin, boundary);
            if (!views[g].allAvailable(first, boundaryPosition)) {
                return false;
            }
        }
        return true;
    }

    /** The views indexed like {@code rules.groups()}, an empty view for each group the caller found nothing for. */
    private static GroupAvailability[] viewsInRuleOrder(RecoveryRules rules, List<GroupAvailability> availability) {
        Objects.requireNonNull(availability, "availability");
        List<GroupRule> groups = rules.groups();
        var views = new GroupAvailability[groups.size()];
        for (GroupAvailability view : availability) {
            int index = indexOf(groups, Objects.requireNonNull(view, "availability view").groupId());
            if (index < 0) {
                throw new RecoveryException(Reason.UNKNOWN_GROUP,
                        "availability names group " + view.groupId() + ", which is not registered");
            }
            if (views[index] != null) {
                throw new RecoveryException(Reason.DUPLICATE_GROUP,
                        "availability names group " + view.groupId() + " twice");
            }
            views[index] = view;
        }
        for (int g = 0; g < views.length; g++) {
            if (views[g] == null) {
                views[g] = GroupAvailability.none(groups.get(g).groupId());
            }
        }
        return views;
    }

    private static int indexOf(List<GroupRule> groups, int groupId) {
        for (int g = 0; g < groups.size(); g++) {
            if (groups.get(g).groupId() == groupId) {
                return g;
            }
        }
        return -1;
    }

    /** lcm(a, b), capped at 2^31: past every block position, so no candidate is then a multiple of it. */
    private static long lcmCapped(long a, long b) {
        long cap = (long) Integer.MAX_VALUE + 1;
        long lcm = a / gcd(a, b) * Math.min(b, cap);
        return Math.min(lcm, cap);
    }

    private static long gcd(long a, long b) {
        while (b != 0) {
            long t = a % b;
            a = b;
            b = t;
        }
        return a;
    }
}
