package io.orbitkv.admission;

import io.orbitkv.model.plan.BoundaryReason;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.recovery.RecoveryRules;
import io.orbitkv.model.plan.RestoreTarget;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.PositionedKey;
import io.orbitkv.model.ProducerRef;
import io.orbitkv.model.plan.Restored;

/** Messages the admission role accepts. Local records only. */
public final class AdmissionCommands {
    private AdmissionCommands() {}

    /** What the engine acts on: MISS (recompute), PENDING (poll again), READY (consume), RESIDENT (speculative, held). */
    public enum Status { MISS, PENDING, READY, RESIDENT }

    /**
     * How far preparation of a demand got (engine.proto QueryReply.detail). Transitions only go right, except that a
     * lost source (evicted between evidence and acquisition) drops a demand back to CANDIDATE:
     * <pre>
     *   MISS ── evidence ──▶ CANDIDATE ── source leases ──▶ RESERVED ── bytes in local DRAM ──▶ RESIDENT ── legal
     *   boundary re-checked on what was acquired, handed to the engine ──▶ READY
     * </pre>
     * Evidence alone is never READY. A local plan is RESERVED as soon as it executes (its owners are this Manager's);
     * a plan with a peer segment is RESERVED once the source Manager granted its lease and the local slots are
     * allocated, until its bytes are sealed here (CRC32C checked). RESIDENT and READY are passed in one step for a
     * host-ready demand; an engine-restore demand stays RESIDENT until its device copy is terminal. A demand naming a
     * producer is WAITING_FOR_PRODUCER (holding nothing) until the producer sealed its pages, then goes on as any other.
     */
    public enum DemandState { MISS, WAITING_FOR_PRODUCER, CANDIDATE, RESERVED, RESIDENT, READY }

    /**
     * One group of a checked demand: the keys the engine allows restoring (its declared ranges), at their positions,
     * and the registered bytes of one page (for budgets before anything is pinned).
     */
    public record GroupPlan(int groupId, long bytesPerPage, List<PositionedKey> keys) {
        public GroupPlan {
            keys = List.copyOf(keys);
        }
    }

    /**
     * A demand the engine role has validated against the instance's registration (group set, page size, ranges,
     * hashes). {@code requestId} is null for the prefix form (SubmitQuery): such tickets have no revision history.
     * {@code maxWaitNanos} is -1 for "the configured waiting budget"; otherwise it is capped by it.
     * {@code engineRestore} is null for an engine-local restore; otherwise READY means the Manager copied the pages
     * into that destination (and released its sources). {@code producer} is null unless the demand waits for a
     * producer's pages (P/D, see {@link ProducerWaits}).
     */
    public record DemandPlan(String requestId, long revision, long operationId, String tenant, RecoveryRules rules,
                             long validPrefixTokens, long selectedEndTokens, List<GroupPlan> groups,
                             long firstUseMicros, int priority, float confidence, long maxWaitNanos,
                             boolean speculative, RestoreTarget engineRestore, double prefillTokensPerSecond,
                             Optional<RouteTemplate> requestedRoute, ProducerRef producer) {
        public DemandPlan {
            groups = List.copyOf(groups);
            Objects.requireNonNull(requestedRoute, "requestedRoute");
        }

        /** A demand that waits for no producer. */
        public DemandPlan(String requestId, long revision, long operationId, String tenant, RecoveryRules rules,
                          long validPrefixTokens, long selectedEndTokens, List<GroupPlan> groups,
                          long firstUseMicros, int priority, float confidence, long maxWaitNanos,
                          boolean speculative, RestoreTarget engineRestore, double prefillTokensPerSecond,
                          Optional<RouteTemplate> requestedRoute) {
            this(requestId, revision, operationId, tenant, rules, validPrefixTokens, selectedEndTokens, groups,
                    firstUseMicros, priority, confidence, maxWaitNanos, speculative, engineRestore,
                    prefillTokensPerSecond, requestedRoute, null);
        }


        /** An engine-local demand (no Manager-executed restore), without a prefill rate or an explicit route. */
        public DemandPlan(String requestId, long revision, long operationId, String tenant, RecoveryRules rules,
                          long validPrefixTokens, long selectedEndTokens, List<GroupPlan> groups,
                          long firstUseMicros, int priority, float confidence, long maxWaitNanos, boolean speculative) {
            this(requestId, revision, operationId, tenant, rules, validPrefixTokens, selectedEndTokens, groups,
                    firstUseMicros, priority, confidence, maxWaitNanos, speculative, null, 0, Optional.empty());
        }

        public DemandPlan withEngineRestore(RestoreTarget target) {
            return new DemandPlan(requestId, revision, operationId, tenant, rules, validPrefixTokens, selectedEndTokens,
                    groups, firstUseMicros, priority, confidence, maxWaitNanos, speculative, target,
                    prefillTokensPerSecond, requestedRoute, producer);
        }

        public DemandPlan withProducer(ProducerRef ref) {
            return new DemandPlan(requestId, revision, operationId, tenant, rules, validPrefixTokens, selectedEndTokens,
                    groups, firstUseMicros, priority, confidence, maxWaitNanos, speculative, engineRestore,
                    prefillTokensPerSecond, requestedRoute, ref);
        }
    }

    public record Submit(long instance, DemandPlan plan) {}

    public record Poll(long instance, long ticket) {}

    public record Cancel(long instance, long ticket) {}

    public record Release(long instance, long leaseId) {}

    public record ReleaseInstance(long instance) {}

    public record GetStats(long instance) {}

    /** The leased pages of one group: positions ascending, {@code refs} parallel to them. */
    public record LeasedGroup(int groupId, List<Integer> positions, List<ImageRef> refs) {}

    /**
     * The answer to a submit or poll. READY/RESIDENT carry the lease, the boundary and, per group in ascending id
     * order, exactly the pages the recovery contract requires for that boundary.
     */
    public record Outcome(long ticket, Status status, DemandState detail, long boundaryTokens, int pageSizeTokens,
                          long leaseId, List<LeasedGroup> leased, long revision, String requestId, long operationId,
                          long retryAfterMicros, BoundaryReason boundaryReason, Restored restored) {
        /**
         * An answer whose boundary was not chosen by a plan (PENDING, or before the planning role answered), without a
         * Manager-executed restore.
         */
        public Outcome(long ticket, Status status, DemandState detail, long boundaryTokens, int pageSizeTokens,
                       long leaseId, List<LeasedGroup> leased, long revision, String requestId, long operationId,
                       long retryAfterMicros) {
            this(ticket, status, detail, boundaryTokens, pageSizeTokens, leaseId, leased, revision, requestId,
                    operationId, retryAfterMicros, null, null);
        }

        /** Leading whole pages restored for every group (the prefix form's ready_blocks). */
        public int readyBlocks() {
            return pageSizeTokens == 0 ? 0 : (int) (boundaryTokens / pageSizeTokens);
        }
    }

    /** What ending an instance's session released: counts, and the ids of the leases it ended. */
    public record InstanceReleased(int leases, int queries, List<Long> endedLeaseIds) {}

    public record AdmissionStats(long activeLeases, long leasedBytes, long outstandingQueries,
                                 long instanceLeases, long instanceOutstandingQueries) {}

    static final List<Class<?>> MESSAGE_TYPES = List.of(Submit.class, Poll.class, Cancel.class, Release.class,
            ReleaseInstance.class, GetStats.class, Outcome.class, InstanceReleased.class, AdmissionStats.class);
}
