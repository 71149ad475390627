package io.orbitkv.admission;

import io.orbitkv.admission.AdmissionCommands.DemandPlan;
import io.orbitkv.admission.AdmissionCommands.DemandState;
import io.orbitkv.admission.AdmissionCommands.LeasedGroup;
import io.orbitkv.admission.AdmissionCommands.Outcome;
import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.model.plan.DemandView;
import io.orbitkv.model.plan.EngineDestination;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalLong;
import java.util.concurrent.TimeUnit;

/**
 * A query ticket of {@link DemandAdmission}: one request's live demand, where its life stands, its answer and the
 * lease handed to its engine. Confined to the admission role's loop.
 *
 * <pre>
 *   PREPARING ──▶ WAITING ──(poll)──▶ PREPARING          a revision starts PREPARING again from any state but ENDED
 *       │  └─────▶ COPYING ──▶ ANSWERED | COPY_FAILED
 *       └────────────────────▶ ANSWERED ──(expiry, eviction)──▶ ENDED       cancel, session end, stop: ENDED
 * </pre>
 */
final class Ticket {

    enum State {
        /** Planning prepares the demand; nothing answered yet (PENDING). */
        PREPARING,
        /** PENDING with nothing running (writes in progress, replans ran out): the next poll prepares again. */
        WAITING,
        /** Host-ready under its lease while planning copies into the engine (PENDING, RESIDENT). */
        COPYING,
        /** Answered READY, RESIDENT or MISS; a lease lives on until released. */
        ANSWERED,
        /** The device copy failed: the next poll answers the failure and forgets the ticket. */
        COPY_FAILED,
        /** Out of every table (cancelled, session ended, expired, failed); its preparation drains. */
        ENDED;

        /** Counted against the outstanding bounds. */
        boolean outstanding() {
            return this == PREPARING || this == WAITING || this == COPYING;
        }
    }

    /**
     * An engine's lease: the pages planning holds under preparation {@code preparation}, and the bytes charged for them.
     */
    record Lease(long id, long instance, Ticket ticket, String tenant, boolean speculative, long preparation,
                 long bytes, int pages, List<LeasedGroup> leased) {}

    final long id;
    final long instance;
    DemandPlan demand;
    long revisedNanos;
    /** Null until the ticket is first admitted. */
    State state;
    DemandState detail = DemandState.MISS;
    Outcome answer;
    long answerExpiresNanos;
    Lease lease;
    /** The evaluation whose outcome the ticket waits for; an earlier one is stale. Null when none runs. */
    Object evaluation;
    /** The id of the ticket's latest preparation in planning (what cancel, release and a revision name). */
    long preparation;
    Throwable copyFailure;
    /** The current revision's producer sealed its pages ({@link ProducerWaits}); reset by a revision. */
    boolean producerSealed;

    /**
     * What planning needs of the demand: its keys, rules, rate, route, first use, the byte cap and the end of its
     * waiting budget (the demand's max wait from its latest revision, capped by the configured one).
     */
    DemandView view(AdmissionVerticle.Settings settings, long poolIncarnation) {
        List<DemandView.GroupKeys> groups = new ArrayList<>(demand.groups().size());
        for (AdmissionCommands.GroupPlan group : demand.groups()) {
            groups.add(new DemandView.GroupKeys(group.groupId(), group.bytesPerPage(), group.keys()));
        }
        OptionalLong firstUse = demand.firstUseMicros() > 0
                ? OptionalLong.of(revisedNanos + TimeUnit.MICROSECONDS.toNanos(demand.firstUseMicros()))
                : OptionalLong.empty();
        OptionalDouble rate = demand.prefillTokensPerSecond() > 0 ? OptionalDouble.of(demand.prefillTokensPerSecond())
                : OptionalDouble.empty();
        // The cap is what the pool can lease at all: a demand longer than that gets the longest legal boundary that
        // fits (reason BUDGET) instead of waiting for the impossible; shares and headroom are checked on the plan.
        CompletionTarget target = demand.engineRestore() == null ? CompletionTarget.hostReady()
                : CompletionTarget.engineRestore(demand.engineRestore().device(poolIncarnation));
        return new DemandView(demand.rules(), demand.validPrefixTokens(), demand.selectedEndTokens(), groups, target,
                demand.requestedRoute(), rate, firstUse, demand.priority(), demand.confidence(), demand.speculative(),
                settings.leaseBudgetBytes(), OptionalLong.of(waitDeadlineNanos(settings)));
    }

    /** The end of the waiting budget: the demand's max wait from its latest revision, capped by the configured one. */
    long waitDeadlineNanos(AdmissionVerticle.Settings settings) {
        long waitBudgetNanos = demand.maxWaitNanos() >= 0
                ? Math.min(settings.waitBudgetNanos(), demand.maxWaitNanos()) : settings.waitBudgetNanos();
        return revisedNanos + waitBudgetNanos;
    }

    /** Where an engine-restore demand's device copy goes; empty for an engine-local (host-ready) restore. */
    Optional<EngineDestination> destination() {
        return demand.engineRestore() == null || demand.speculative() ? Optional.empty()
                : Optional.of(new EngineDestination(instance, id, demand.engineRestore()));
    }

    Ticket(long id, long instance, DemandPlan demand, long now) {
        this.id = id;
        this.instance = instance;
        this.demand = demand;
        this.revisedNanos = now;
    }
}
