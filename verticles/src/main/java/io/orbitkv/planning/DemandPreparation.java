package io.orbitkv.planning;

import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.recovery.GroupAvailability;
import io.orbitkv.recovery.GroupRanges;
import io.orbitkv.recovery.RecoveryContract;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.Optional;
import java.util.function.Supplier;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.plan.DemandView;
import io.orbitkv.model.plan.Plan;
import io.orbitkv.model.plan.PlanningException;
import io.orbitkv.model.plan.PlanningFailure;
import io.orbitkv.model.plan.PreparationResult;
import io.orbitkv.model.plan.PreparationCallbacks;
import io.orbitkv.model.plan.DemandEvidence;
import io.orbitkv.model.plan.PlannedPage;
import io.orbitkv.model.plan.PlannedSegment;
import io.orbitkv.model.plan.SegmentLease;

/**
 * One demand's preparation, decided and executed here: plan, admit the plan's bytes (asked of admission), execute,
 * replan, re-check the boundary on what was acquired, run the device copy of an engine-restore plan, or take over
 * what the speculative preparation it replaces prepared.
 *
 * <p>Design note (ownership): while it runs, the executor owns the segment leases ({@link PlanExecutor}); once
 * host-ready this preparation holds them ({@link #held}) until admission releases or cancels its id. Admission owns
 * the bytes charged for it and the lease it hands the engine. A preparation this one replaces belongs to it from the
 * start: taken over when {@link TakeOverRule} allows (a running one is promoted to demand reads and waited for),
 * otherwise cancelled and drained before the first plan.
 *
 * <p>Replans: a plan that failed before any payload moved, or whose submitted transfer failed (the executor completes
 * only once every submitted transfer is terminal, so that work is fenced), is planned again from fresh discovery, at
 * most {@value PlanningRole#MAX_PLAN_ATTEMPTS} plans in all; peer records found stale are left out of later plans (a
 * lagging directory may still advertise them; local discovery reads the store itself). Other failures end it.
 *
 * <p>Short hit path: a plan all in local DRAM for host-ready ({@link PlanExecutor#isLocalHit}) moves nothing, so it
 * is pinned in one step ({@link PlanExecutor#pinHit}): no transfer queue, schedule or progress callback; the exact
 * pins, replans on stale evidence, the legality re-check and the release are those of every plan.
 *
 * <p>Cancel: queued transfers of a payload-moving plan are dropped and submitted ones drain (a plan that only pins
 * DRAM completes at once anyway), a running device copy is told to stop and drains; what it then holds is released
 * (quarantined when the engine's session ended). Timeout: the demand's waiting deadline bounds waiting for writes and
 * replans, and each acquisition is told what is left of it. Confined to the planning role's loop.
 */
final class DemandPreparation {
    /** Where a preparation is; EXECUTING goes back to PLANNING on a replan. */
    enum State { AFTER_PREVIOUS, PLANNING, EXECUTING, HELD, COPYING, ENDED }

    private final PlanningCommands.Prepare command;
    private final PlanningRole role;
    private final Supplier<Future<Boolean>> dramTight;
    private final Runnable onEnd;
    private final Promise<PreparationResult> result = Promise.promise();
    /** Peer records owners found stale in earlier attempts. */
    private final List<PlannedPage> stalePeerRecords = new ArrayList<>();
    private State state = State.PLANNING;
    private DemandPreparation previous;
    private Plan executingPlan;
    private PlanExecutor.Preparation executing;
    private PreparedPlan held;
    private boolean cancelled;
    /** A real demand took this hint over while it ran: its transfers are demand reads and it does not replan. */
    private boolean promoted;
    private boolean waitSpent;
    private Future<Integer> cancelling;

    DemandPreparation(PlanningCommands.Prepare command, PlanningRole role, Supplier<Future<Boolean>> dramTight,
                      Runnable onEnd) {
        this.command = command;
        this.role = role;
        this.dramTight = dramTight;
        this.onEnd = onEnd;
    }

    Future<PreparationResult> result() {
        return result.future();
    }

    State state() {
        return state;
    }

    private DemandView demand() {
        return command.demand();
    }

    /** Starts with the preparation this one replaces (null: none). */
    void start(DemandPreparation replaced) {
        if (replaced == null) {
            attempt(PlanningRole.MAX_PLAN_ATTEMPTS);
            return;
        }
        previous = replaced;
        state = State.AFTER_PREVIOUS;
        if (replaced.state == State.HELD && TakeOverRule.allows(replaced.demand(), demand(), replaced.held.plan())) {
            adopt(PreparationResult.TakeOver.RESIDENT);
        } else if (replaced.state == State.EXECUTING
                && TakeOverRule.allows(replaced.demand(), demand(), replaced.executingPlan)) {
            replaced.promote();
            replaced.result.future().onComplete(ar -> {
                if (!cancelled && replaced.state == State.HELD) {
                    adopt(PreparationResult.TakeOver.IN_FLIGHT);
                } else {
                    afterPrevious(replaced.cancel(false));
                }
            });
        } else {
            afterPrevious(replaced.cancel(false));
        }
    }

    private void afterPrevious(Future<Integer> drained) {
        drained.onComplete(ar -> {
            if (cancelled) {
                fail(cancelledFailure());
            } else {
                attempt(PlanningRole.MAX_PLAN_ATTEMPTS);
            }
        });
    }

    /** Takes over what the replaced hint prepared: its plan's bytes are admitted for this demand, nothing is read. */
    private void adopt(PreparationResult.TakeOver from) {
        Plan plan = previous.held.plan();
        if (!TakeOverRule.allows(previous.demand(), demand(), plan)) {
            afterPrevious(previous.cancel(false));
            return;
        }
        command.admission().admit(plan).onComplete(admitted -> {
            if (cancelled || admitted.failed() || !admitted.result()) {
                // Refused (its budgets) or cancelled: release the hint's pages, then plan as any demand would.
                afterPrevious(previous.cancel(false));
                return;
            }
            held = previous.held;
            previous.held = null;
            previous.end();
            previous = null;
            state = State.HELD;
            result.tryComplete(new PreparationResult(PreparationResult.Kind.HOST_READY, plan, heldGroups(held),
                    Optional.of(from), null, false));
        });
    }

    private void attempt(int attemptsLeft) {
        state = State.PLANNING;
        role.planWithWrites(demand(), this::withoutStale).onComplete(planned -> {
            if (cancelled) {
                fail(cancelledFailure());
                return;
            }
            if (planned.failed()) {
                fail(planned.cause());
                return;
            }
            Plan plan = planned.result().plan();
            boolean later = planned.result().waitingFor().isPresent();
            if (later && waitLeft()) {
                finish(PreparationResult.Kind.WAITING_FOR_WRITES, plan);
                return;
            }
            waitSpent |= later;
            if (plan.isRecompute()) {
                finish(PreparationResult.Kind.RECOMPUTE, plan);
                return;
            }
            command.admission().admit(plan).onComplete(admitted -> {
                if (cancelled || admitted.failed()) {
                    fail(cancelled ? cancelledFailure() : admitted.cause());
                } else if (!admitted.result()) {
                    finish(PreparationResult.Kind.RECOMPUTE, plan);
                } else {
                    execute(plan, attemptsLeft);
                }
            });
        });
    }

    private void execute(Plan plan, int attemptsLeft) {
        state = State.EXECUTING;
        executingPlan = plan;
        if (PlanExecutor.isLocalHit(plan)) {
            pinHit(plan, attemptsLeft);
            return;
        }
        Future<Boolean> tight = demand().speculative() ? dramTight.get().otherwise(false)
                : Future.succeededFuture(false);
        tight.onComplete(isTight -> {
            if (cancelled) {
                fail(cancelledFailure());
                return;
            }
            PlanExecutor.Preparation preparation;
            try {
                preparation = role.execute(demand(), plan, isTight.result());
            } catch (RuntimeException e) {
                fail(e);
                return;
            }
            executing = preparation;
            if (promoted) {
                role.promote(preparation);
            }
            if (plan.movesPayloadToHost()) {
                // A peer segment's source lease is asked of another Manager: CANDIDATE until every lease is held.
                boolean peer = plan.segments().stream().anyMatch(s -> s.route().medium().isPeer());
                command.admission().moving(peer ? PreparationCallbacks.Stage.CANDIDATE
                        : PreparationCallbacks.Stage.RESERVED);
                if (peer) {
                    preparation.acquired().onSuccess(all -> {
                        if (all && executing == preparation && !cancelled) {
                            command.admission().moving(PreparationCallbacks.Stage.RESERVED);
                        }
                    });
                }
            }
            preparation.result().onComplete(ar -> {
                executing = null;
                if (ar.succeeded()) {
                    prepared(ar.result());
                } else {
                    executionFailed(plan, ar.cause(), attemptsLeft);
                }
            });
        });
    }

    /**
     * A plan all in local DRAM for host-ready moves nothing: its pages are pinned in one step, without the transfer
     * queues, a schedule or progress callbacks (it is never PENDING). Stale pins replan as on the long path; the
     * legality re-check and the release are the same.
     */
    private void pinHit(Plan plan, int attemptsLeft) {
        Future<PreparedPlan> pinned;
        try {
            pinned = role.pinHit(plan).result();
        } catch (RuntimeException e) {
            fail(e);
            return;
        }
        pinned.onComplete(ar -> {
            if (ar.succeeded()) {
                prepared(ar.result());
            } else {
                executionFailed(plan, ar.cause(), attemptsLeft);
            }
        });
    }

    private void executionFailed(Plan plan, Throwable failure, int attemptsLeft) {
        PlanningFailure cause = PlanningException.failureOf(failure);
        if (cancelled) {
            fail(cancelledFailure());
            return;
        }
        if (cause == null) {
            fail(failure);
            return;
        }
        switch (cause) {
            case STALE_EVIDENCE, SOURCE_REJECTED, TRANSFER_FAILED -> {
                if (promoted) {
                    // The demand that took this hint over plans for itself now.
                    finish(PreparationResult.Kind.RETRY_LATER, plan);
                    return;
                }
                boolean again = attemptsLeft > 1;
                role.planFailed(cause, again);
                if (again) {
                    ((PlanningException) failure).page().filter(p -> p.evidence().peerOwner().isPresent())
                            .ifPresent(stalePeerRecords::add);
                    attempt(attemptsLeft - 1);
                } else {
                    // Sources kept refusing or failing: wait while budget is left, else recompute.
                    finish(waitLeft() ? PreparationResult.Kind.RETRY_LATER : PreparationResult.Kind.RECOMPUTE, plan);
                }
            }
            case QUEUE_FULL, CANCELLED -> finish(PreparationResult.Kind.RETRY_LATER, plan);
            case SPECULATION_DROPPED -> finish(PreparationResult.Kind.RECOMPUTE, plan);
            default -> fail(failure);
        }
    }

    private void prepared(PreparedPlan prepared) {
        held = prepared;
        state = State.HELD;
        if (cancelled) {
            fail(cancelledFailure()); // what it holds is released by the cancel
            return;
        }
        Plan plan = prepared.plan();
        List<PreparationResult.HeldGroup> groups = heldGroups(prepared);
        if (!legal(plan, groups)) {
            held = null;
            prepared.release().onComplete(v -> fail(new IllegalStateException(
                    "acquired pages do not make boundary " + plan.boundaryTokens() + " legal")));
            return;
        }
        if (plan.target().intent() == CompletionTarget.Intent.ENGINE_RESTORE && !demand().speculative()
                && command.destination().isPresent()) {
            // The plan's last step: the restore role copies the host pages into the engine's destination.
            state = State.COPYING;
            command.admission().copying(plan, groups);
            prepared.restore(command.destination().get()).onComplete(copied -> {
                state = State.HELD;
                if (copied.failed()) {
                    fail(copied.cause());
                } else {
                    result.tryComplete(new PreparationResult(PreparationResult.Kind.RESTORED, plan, groups,
                            Optional.empty(), copied.result(), waitSpent));
                }
            });
            return;
        }
        result.tryComplete(new PreparationResult(PreparationResult.Kind.HOST_READY, plan, groups, Optional.empty(),
                null, waitSpent));
    }

    /** The boundary must be legal on what was acquired, not only on the evidence. */
    private boolean legal(Plan plan, List<PreparationResult.HeldGroup> groups) {
        List<GroupAvailability> acquired = new ArrayList<>(groups.size());
        for (PreparationResult.HeldGroup group : groups) {
            BitSet bits = new BitSet();
            group.positions().forEach(bits::set);
            acquired.add(GroupAvailability.of(group.groupId(), bits));
        }
        return RecoveryContract.isLegal(demand().rules(), acquired, demand().validPrefixTokens(),
                plan.boundaryTokens());
    }

    /**
     * The prepared plan's host pages per group, in the plan's required order (groups and positions ascending). The
     * plan's segments tile its required ranges in that order ({@link Plan}'s constructor checks it), and the leases
     * are in segment order, so one pass over them fills each group in turn.
     */
    private static List<PreparationResult.HeldGroup> heldGroups(PreparedPlan prepared) {
        List<GroupRanges> required = prepared.plan().required();
        List<SegmentLease> leases = prepared.leases();
        List<PreparationResult.HeldGroup> groups = new ArrayList<>(required.size());
        int next = 0;
        for (GroupRanges ranges : required) {
            List<Integer> positions = new ArrayList<>((int) ranges.pageCount());
            List<ImageRef> refs = new ArrayList<>((int) ranges.pageCount());
            while (next < leases.size() && leases.get(next).segment().groupId() == ranges.groupId()) {
                SegmentLease lease = leases.get(next++);
                List<PlannedPage> pages = lease.segment().pages();
                for (int i = 0; i < pages.size(); i++) {
                    positions.add(pages.get(i).position());
                    refs.add(lease.hostPages().get(i));
                }
            }
            groups.add(new PreparationResult.HeldGroup(ranges.groupId(), positions, refs));
        }
        if (next != leases.size()) {
            throw new IllegalStateException("a lease of group " + leases.get(next).segment().groupId()
                    + " lies outside the plan's required order");
        }
        return groups;
    }

    /** A real demand took this hint over while it runs: its transfers become demand reads due now. */
    private void promote() {
        promoted = true;
        if (executing != null) {
            role.promote(executing);
        }
    }

    /**
     * Revokes interest; completes once it drained, with how many pages were released because of it (the pages it
     * held, and those of a preparation it replaced). A repeated cancel answers 0 when the first is done.
     */
    Future<Integer> cancel(boolean quarantine) {
        if (cancelling != null) {
            return cancelling.map(n -> 0);
        }
        cancelled = true;
        Future<Integer> replaced = previous == null ? Future.succeededFuture(0) : previous.cancel(quarantine);
        if (state == State.EXECUTING && executing != null && executingPlan.movesPayloadToHost()) {
            executing.cancel();
        } else if (state == State.COPYING) {
            held.cancelRestore();
        }
        cancelling = result.future().transform(ar -> release(quarantine)).compose(n -> replaced.map(m -> n + m));
        return cancelling;
    }

    /** Ends what the preparation holds, once; answers the pages released (0 when it held nothing). */
    Future<Integer> release(boolean quarantine) {
        PreparedPlan prepared = held;
        if (prepared == null) {
            end();
            return Future.succeededFuture(0);
        }
        held = null;
        return prepared.release(quarantine).map(n -> {
            end();
            return n > 0 ? prepared.plan().pages() : 0;
        });
    }

    private void finish(PreparationResult.Kind kind, Plan plan) {
        end();
        result.tryComplete(PreparationResult.nothingHeld(kind, plan, waitSpent));
    }

    private void fail(Throwable failure) {
        if (held == null && state != State.COPYING) {
            end();
        }
        result.tryFail(failure);
    }

    private void end() {
        if (state != State.ENDED && held == null) {
            state = State.ENDED;
            onEnd.run();
        }
    }

    private boolean waitLeft() {
        return demand().waitDeadlineNanos().isEmpty() || role.nanos() - demand().waitDeadlineNanos().getAsLong() < 0;
    }

    private DemandEvidence withoutStale(DemandEvidence found) {
        for (PlannedPage page : stalePeerRecords) {
            found = found.withoutStale(page.key(), page.evidence());
        }
        return found;
    }

    private static PlanningException cancelledFailure() {
        return new PlanningException(PlanningFailure.CANCELLED, "the demand was cancelled");
    }
}
