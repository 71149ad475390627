package io.orbitkv.model.plan;

import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.recovery.RecoveryRules;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalLong;
import io.orbitkv.model.PositionedKey;
import io.orbitkv.model.plan.PlanningException;
import io.orbitkv.model.plan.PlanningFailure;
import io.orbitkv.model.plan.RouteTemplate;

/**
 * What planning needs of one admitted demand. Admission builds it from a validated demand (it has already checked the
 * group set, page size, ranges and hashes against the registration) plus what only admission knows: how many bytes
 * this demand may lease now (its budgets and tenant share).
 *
 * @param groups                 per registered group, the keys the engine allows restoring at their positions
 * @param target                 host-ready (engine-local restore, today's only path) or engine-restore on a device
 * @param requestedRoute         an explicit route: only it (and local DRAM) may be used, and it fails closed if absent
 * @param prefillTokensPerSecond the engine's declared prefill rate (per registration, overridable per demand); empty:
 *                               the longest legal boundary is chosen, as without a rate
 * @param firstUseNanos          when the engine expects to use the state, on this Manager's ticker; empty: unknown
 * @param confidence             in [0, 1]; 0 means unknown
 * @param byteCapBytes           the most bytes this demand may lease (admission's headroom); {@link Long#MAX_VALUE}: no cap
 * @param waitDeadlineNanos      when the demand's waiting budget ends, on this Manager's ticker (admission's: its
 *                               latest revision plus its budget); empty: none. Execution tells each acquisition what
 *                               is left of it ({@link AttemptWindow}), so a peer attempt leaves room for a fallback
 */
public record DemandView(RecoveryRules rules, long validPrefixTokens, long selectedEndTokens, List<GroupKeys> groups,
                         CompletionTarget target, Optional<RouteTemplate> requestedRoute,
                         OptionalDouble prefillTokensPerSecond, OptionalLong firstUseNanos, int priority,
                         float confidence, boolean speculative, long byteCapBytes, OptionalLong waitDeadlineNanos) {

    /** The keys of one group at their block positions and the registered bytes of one page. */
    public record GroupKeys(int groupId, long bytesPerPage, List<PositionedKey> keys) {
        public GroupKeys {
            keys = List.copyOf(keys);
            if (bytesPerPage <= 0) {
                throw new PlanningException(PlanningFailure.INVALID_INPUT, "group " + groupId + " has " + bytesPerPage
                        + " bytes per page; the registration guarantees > 0");
            }
        }
    }

    public DemandView {
        Objects.requireNonNull(rules, "rules");
        groups = List.copyOf(groups);
        Objects.requireNonNull(target, "target");
        Objects.requireNonNull(requestedRoute, "requestedRoute");
        Objects.requireNonNull(prefillTokensPerSecond, "prefillTokensPerSecond");
        Objects.requireNonNull(firstUseNanos, "firstUseNanos");
        Objects.requireNonNull(waitDeadlineNanos, "waitDeadlineNanos");
        if (target.intent() != CompletionTarget.Intent.HOST_READY
                && target.intent() != CompletionTarget.Intent.ENGINE_RESTORE) {
            throw new PlanningException(PlanningFailure.INVALID_INPUT, "a demand ends host-ready or engine-restore, not "
                    + target.intent());
        }
        if (prefillTokensPerSecond.isPresent() && !(prefillTokensPerSecond.getAsDouble() > 0
                && Double.isFinite(prefillTokensPerSecond.getAsDouble()))) {
            throw new PlanningException(PlanningFailure.INVALID_INPUT, "prefill rate "
                    + prefillTokensPerSecond.getAsDouble() + " tokens/s; must be a finite rate > 0");
        }
        if (!(confidence >= 0 && confidence <= 1)) {
            throw new PlanningException(PlanningFailure.INVALID_INPUT, "confidence " + confidence + " is outside [0, 1]");
        }
        if (byteCapBytes < 0) {
            throw new PlanningException(PlanningFailure.INVALID_INPUT, "byte cap " + byteCapBytes + " is negative");
        }
        for (GroupKeys group : groups) {
            if (!rules.contains(group.groupId())) {
                throw new PlanningException(PlanningFailure.INVALID_INPUT, "group " + group.groupId()
                        + " is not in the rules");
            }
        }
    }

    /** Without a waiting deadline (planning-only callers and tests). */
    public DemandView(RecoveryRules rules, long validPrefixTokens, long selectedEndTokens, List<GroupKeys> groups,
                      CompletionTarget target, Optional<RouteTemplate> requestedRoute,
                      OptionalDouble prefillTokensPerSecond, OptionalLong firstUseNanos, int priority,
                      float confidence, boolean speculative, long byteCapBytes) {
        this(rules, validPrefixTokens, selectedEndTokens, groups, target, requestedRoute, prefillTokensPerSecond,
                firstUseNanos, priority, confidence, speculative, byteCapBytes, OptionalLong.empty());
    }

    /** A host-ready demand with no rate, first use, priority, confidence or cap: the shape today's queries have. */
    public static DemandView hostReady(RecoveryRules rules, long validPrefixTokens, long selectedEndTokens,
                                       List<GroupKeys> groups) {
        return new DemandView(rules, validPrefixTokens, selectedEndTokens, groups, CompletionTarget.hostReady(),
                Optional.empty(), OptionalDouble.empty(), OptionalLong.empty(), 0, 0f, false, Long.MAX_VALUE);
    }

    public DemandView withTarget(CompletionTarget newTarget) {
        return new DemandView(rules, validPrefixTokens, selectedEndTokens, groups, newTarget, requestedRoute,
                prefillTokensPerSecond, firstUseNanos, priority, confidence, speculative, byteCapBytes,
                waitDeadlineNanos);
    }

    public DemandView withRequestedRoute(RouteTemplate route) {
        return new DemandView(rules, validPrefixTokens, selectedEndTokens, groups, target, Optional.of(route),
                prefillTokensPerSecond, firstUseNanos, priority, confidence, speculative, byteCapBytes,
                waitDeadlineNanos);
    }

    public DemandView withPrefillRate(double tokensPerSecond) {
        return new DemandView(rules, validPrefixTokens, selectedEndTokens, groups, target, requestedRoute,
                OptionalDouble.of(tokensPerSecond), firstUseNanos, priority, confidence, speculative, byteCapBytes,
                waitDeadlineNanos);
    }

    public DemandView withFirstUse(long nanos) {
        return new DemandView(rules, validPrefixTokens, selectedEndTokens, groups, target, requestedRoute,
                prefillTokensPerSecond, OptionalLong.of(nanos), priority, confidence, speculative, byteCapBytes,
                waitDeadlineNanos);
    }

    public DemandView withByteCap(long bytes) {
        return new DemandView(rules, validPrefixTokens, selectedEndTokens, groups, target, requestedRoute,
                prefillTokensPerSecond, firstUseNanos, priority, confidence, speculative, bytes,
                waitDeadlineNanos);
    }

    public DemandView withSpeculation(boolean isSpeculative, float newConfidence, int newPriority) {
        return new DemandView(rules, validPrefixTokens, selectedEndTokens, groups, target, requestedRoute,
                prefillTokensPerSecond, firstUseNanos, newPriority, newConfidence, isSpeculative, byteCapBytes,
                waitDeadlineNanos);
    }

    public DemandView withWaitDeadline(long nanos) {
        return new DemandView(rules, validPrefixTokens, selectedEndTokens, groups, target, requestedRoute,
                prefillTokensPerSecond, firstUseNanos, priority, confidence, speculative, byteCapBytes,
                OptionalLong.of(nanos));
    }

    /** The group's keys, or null when the demand names no keys for it. */
    public GroupKeys group(int groupId) {
        for (GroupKeys group : groups) {
            if (group.groupId() == groupId) {
                return group;
            }
        }
        return null;
    }
}
