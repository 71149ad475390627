package io.orbitkv.planning;

import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.common.Ticker;
import io.orbitkv.model.cost.CompletionTarget;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.OptionalLong;
import io.orbitkv.model.plan.Plan;
import io.orbitkv.model.plan.PlanningException;
import io.orbitkv.model.plan.PlanningFailure;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.model.plan.AttemptWindow;
import io.orbitkv.model.plan.ExecutionOwner;
import io.orbitkv.model.plan.PlannedSegment;
import io.orbitkv.model.plan.SegmentLease;

/**
 * Runs plans against the execution owners: acquire every segment in plan order, queue the segments that move payload
 * in the per-medium {@link TransferScheduler}, submit them as the scheduler allows, and hand the caller a
 * {@link PreparedPlan} holding every segment's lease once all are host-ready (or at their target).
 *
 * <p>Design note (ownership): a {@link Preparation} owns its segments' leases until it succeeds (then the
 * {@link PreparedPlan} owns them until {@link PreparedPlan#release}) or stops: on the first failure, a cancel, or a
 * dropped speculative transfer. Stopping drops its queued transfers, hints owners to cancel submitted ones, waits until
 * no acquire or submit of it is outstanding (submitted I/O keeps its buffers until its completion), then releases every
 * lease; its result completes after those releases. So a failure before payload leaves nothing held, and a submitted
 * segment is fenced before its pages may be tried again. Acquisition is sequential in plan order, so a stale segment
 * stops the rest before they take anything. {@link Preparation#acquired()} completes when the last lease is held,
 * before any transfer is queued (a peer plan is RESERVED from then on). A local DRAM hit ({@link #pinHit}) takes the
 * same all-or-nothing acquisition without the scheduler.
 *
 * <p>Engine-restore plans: the route owners take every segment to host-ready; the device copy is the prepared plan's
 * last step ({@link PreparedPlan#restore}), owned by the restore role through {@link RestoreOwner}, and its sources
 * stay leased until every copy is terminal.
 *
 * <p>Concurrency: confined to the planning role's event loop; owners complete their futures on it.
 */
public final class PlanExecutor {

    /** Arms a one-shot timer on the planning role's loop (speculative transfers waiting for their start time). */
    @FunctionalInterface
    public interface Timers {
        void schedule(long delayNanos, Runnable task);
    }

    /** How a plan's transfers are queued. */
    public record Schedule(TransferScheduler.TransferClass transferClass, long latestStartNanos, long notBeforeNanos,
                           int priority) {
        public Schedule {
            Objects.requireNonNull(transferClass, "transferClass");
        }

        /** A demand read due now. */
        public static Schedule demandNow(long nowNanos) {
            return new Schedule(TransferScheduler.TransferClass.DEMAND, nowNanos, Long.MIN_VALUE, 0);
        }
    }

    private final Map<RouteTemplate, ExecutionOwner> owners;
    private final RestoreOwner restoreOwner;
    private final TransferScheduler<Transfer> scheduler;
    private final Ticker ticker;
    private final Timers timers;
    private long armedAtNanos = Long.MAX_VALUE;
    private boolean armed;
    private long heldLeases;
    private int livePreparations;

    public PlanExecutor(Map<RouteTemplate, ExecutionOwner> owners, TransferScheduler.Settings settings, Ticker ticker,
                        MeterRegistry registry, Timers timers) {
        this(owners, null, settings, ticker, registry, timers);
    }

    /** @param restoreOwner the owner of engine-restore plans' device copy (the restore role); null: none here */
    public PlanExecutor(Map<RouteTemplate, ExecutionOwner> owners, RestoreOwner restoreOwner,
                        TransferScheduler.Settings settings, Ticker ticker, MeterRegistry registry, Timers timers) {
        EnumMap<RouteTemplate, ExecutionOwner> copy = new EnumMap<>(RouteTemplate.class);
        copy.putAll(owners);
        this.owners = copy;
        this.restoreOwner = restoreOwner;
        this.ticker = Objects.requireNonNull(ticker, "ticker");
        this.timers = Objects.requireNonNull(timers, "timers");
        this.scheduler = new TransferScheduler<>(settings, ticker, registry, transfer -> transfer.preparation.onDropped(transfer));
    }

    /** Starts preparing {@code plan} without a waiting deadline; see {@link #prepare(Plan, Schedule, long)}. */
    public Preparation prepare(Plan plan, Schedule schedule) {
        return prepare(plan, schedule, Long.MAX_VALUE);
    }

    /**
     * Starts preparing {@code plan}; every route it uses must have an owner here.
     *
     * @param waitDeadlineNanos when the demand's waiting budget ends, on this executor's ticker
     *                          ({@link Long#MAX_VALUE}: none); each acquisition tells its owner what is left of it
     *                          ({@link AttemptWindow})
     */
    public Preparation prepare(Plan plan, Schedule schedule, long waitDeadlineNanos) {
        for (PlannedSegment segment : plan.segments()) {
            if (!owners.containsKey(segment.route())) {
                throw new PlanningException(PlanningFailure.INVALID_INPUT, "no execution owner for " + segment.route());
            }
        }
        if (plan.target().intent() == CompletionTarget.Intent.ENGINE_RESTORE && restoreOwner == null) {
            throw new PlanningException(PlanningFailure.TARGET_UNAVAILABLE, "no restore owner for an engine-restore plan");
        }
        Preparation preparation = new Preparation(plan, schedule, waitDeadlineNanos);
        livePreparations++;
        preparation.start();
        return preparation;
    }

    /**
     * Whether {@code plan} is a local DRAM hit: host-ready, every segment on {@link RouteTemplate#LOCAL_DRAM} (nothing
     * moves, so nothing is queued). Such a plan may be pinned through {@link #pinHit}.
     */
    public static boolean isLocalHit(Plan plan) {
        if (plan.target().intent() != CompletionTarget.Intent.HOST_READY || plan.segments().isEmpty()) {
            return false;
        }
        for (PlannedSegment segment : plan.segments()) {
            if (segment.route() != RouteTemplate.LOCAL_DRAM) {
                return false;
            }
        }
        return true;
    }

    /**
     * The short path of a local DRAM hit ({@link #isLocalHit}): acquires every segment from its owner in plan order,
     * all or nothing, and hands back the {@link PreparedPlan} plan; the transfer scheduler never sees it (there is nothing
     * to queue, time or cancel). A failed acquisition releases what the earlier segments got before the result fails
     * with the owner's typed failure, as {@link #prepare} does.
     */
    public Pinning pinHit(Plan plan) {
        if (!isLocalHit(plan)) {
            throw new PlanningException(PlanningFailure.INVALID_INPUT, "not a local DRAM hit: " + plan.segments());
        }
        ExecutionOwner owner = owners.get(RouteTemplate.LOCAL_DRAM);
        if (owner == null) {
            throw new PlanningException(PlanningFailure.INVALID_INPUT, "no execution owner for LOCAL_DRAM");
        }
        Pinning pinning = new Pinning(plan, owner);
        livePreparations++;
        pinning.acquire(0);
        return pinning;
    }

    /** One local DRAM hit being pinned ({@link #pinHit}); completes once, after a failure's releases. */
    public final class Pinning {
        private final Plan plan;
        private final ExecutionOwner owner;
        private final List<SegmentLease> leases;
        private final Promise<PreparedPlan> result = Promise.promise();

        private Pinning(Plan plan, ExecutionOwner owner) {
            this.plan = plan;
            this.owner = owner;
            this.leases = new ArrayList<>(plan.segments().size());
        }

        public Future<PreparedPlan> result() {
            return result.future();
        }

        private void acquire(int index) {
            Future<SegmentLease> acquired;
            try {
                acquired = owner.acquire(plan.segments().get(index));
            } catch (RuntimeException e) {
                acquired = Future.failedFuture(e);
            }
            acquired.onComplete(ar -> {
                if (ar.failed()) {
                    fail(ar.cause());
                    return;
                }
                heldLeases++;
                leases.add(ar.result());
                if (index + 1 < plan.segments().size()) {
                    acquire(index + 1);
                } else {
                    livePreparations--;
                    result.complete(new PreparedPlan(plan, leases, restoreOwner, PlanExecutor.this::release));
                }
            });
        }

        private void fail(Throwable cause) {
            List<Future<Boolean>> releases = new ArrayList<>(leases.size());
            for (SegmentLease lease : leases) {
                releases.add(release(lease));
            }
            Future.join(releases).onComplete(ar -> {
                livePreparations--;
                result.fail(cause);
            });
        }
    }

    /** Leases acquired and not yet released, across all preparations and prepared plans. */
    public long heldLeases() {
        return heldLeases;
    }

    /** Preparations not yet finished. */
    public int livePreparations() {
        return livePreparations;
    }

    public TransferScheduler<?> scheduler() {
        return scheduler;
    }

    private void pump() {
        for (Transfer transfer : scheduler.dispatch()) {
            transfer.preparation.submit(transfer);
        }
        OptionalLong next = scheduler.nextStartNanos();
        if (next.isPresent() && (!armed || next.getAsLong() < armedAtNanos)) {
            armed = true;
            armedAtNanos = next.getAsLong();
            timers.schedule(Math.max(0, next.getAsLong() - ticker.nanos()), () -> {
                armed = false;
                armedAtNanos = Long.MAX_VALUE;
                pump();
            });
        }
    }

    private Future<Boolean> release(SegmentLease lease) {
        return release(lease, false);
    }

    Future<Boolean> release(SegmentLease lease, boolean quarantine) {
        return owners.get(lease.segment().route()).release(lease, quarantine).onComplete(ar -> heldLeases--);
    }

    /** A segment's queued or submitted transfer. */
    private static final class Transfer {
        final Preparation preparation;
        final Slot slot;
        TransferScheduler.Entry<Transfer> entry;

        Transfer(Preparation preparation, Slot slot) {
            this.preparation = preparation;
            this.slot = slot;
        }
    }

    private enum Phase { WAITING, ACQUIRING, HELD, QUEUED, SUBMITTED, READY }

    private static final class Slot {
        final PlannedSegment segment;
        final ExecutionOwner owner;
        SegmentLease lease;
        Phase phase = Phase.WAITING;
        Transfer transfer;

        Slot(PlannedSegment segment, ExecutionOwner owner) {
            this.segment = segment;
            this.owner = owner;
        }
    }

    /** One plan being prepared. */
    public final class Preparation {
        private final Plan plan;
        /** How its transfers are queued; a take-over by a real demand turns it into a demand read once. */
        private Schedule schedule;
        /** When the demand's waiting budget ends (this executor's ticker); {@link Long#MAX_VALUE}: none. */
        private final long waitDeadlineNanos;
        private final List<Slot> slots = new ArrayList<>();
        private final Promise<PreparedPlan> result = Promise.promise();
        /** Completes true once every segment's lease is held (before any transfer), false if it stopped first. */
        private final Promise<Boolean> allAcquired = Promise.promise();
        private Throwable failure;
        private boolean cancelRequested;
        private boolean finishing;

        private Preparation(Plan plan, Schedule schedule, long waitDeadlineNanos) {
            this.plan = plan;
            this.schedule = schedule;
            this.waitDeadlineNanos = waitDeadlineNanos;
            for (PlannedSegment segment : plan.segments()) {
                slots.add(new Slot(segment, owners.get(segment.route())));
            }
        }

        public Plan plan() {
            return plan;
        }

        /** Completes with the prepared plan, or fails typed ({@link PlanningException}) after everything drained. */
        public Future<PreparedPlan> result() {
            return result.future();
        }

        /**
         * Completes true as soon as every segment's lease is held (source leases granted, destinations allocated)
         * and before any of its transfers is submitted: the plan is RESERVED from then on; false when the
         * preparation stopped before that. Never fails.
         */
        public Future<Boolean> acquired() {
            return allAcquired.future();
        }

        /**
         * Revokes interest now; completes when every submitted transfer is terminal and every lease released. A
         * preparation that already succeeded is not undone (its {@link PreparedPlan} is the caller's to release).
         */
        public Future<Void> cancel() {
            if (!result.future().isComplete()) {
                cancelRequested = true;
                stop();
                finishIfQuiet();
            }
            return result.future().<Void>mapEmpty().otherwiseEmpty();
        }

        /**
         * A real demand took over this speculative preparation: from now on it is a demand read due by {@code demand}'s
         * latest start. Its queued transfers move to the demand queue (no longer droppable, no longer waiting for a
         * start time); those not yet queued are queued as demand reads; submitted ones run on. No-op once finished or
         * when it already is a demand read.
         */
        public void promote(Schedule demand) {
            if (result.future().isComplete() || stopping()
                    || schedule.transferClass() == TransferScheduler.TransferClass.DEMAND) {
                return;
            }
            schedule = demand;
            for (Slot slot : slots) {
                if (slot.phase == Phase.QUEUED) {
                    scheduler.promote(slot.transfer.entry, demand.latestStartNanos())
                            .ifPresent(entry -> slot.transfer.entry = entry);
                }
            }
            pump();
        }

        private void start() {
            if (slots.isEmpty()) {
                succeed();
                return;
            }
            acquire(0);
        }

        private boolean stopping() {
            return cancelRequested || failure != null;
        }

        private void acquire(int index) {
            if (stopping()) {
                finishIfQuiet();
                return;
            }
            Slot slot = slots.get(index);
            slot.phase = Phase.ACQUIRING;
            Future<SegmentLease> acquired;
            try {
                acquired = slot.owner.acquire(slot.segment, window());
            } catch (RuntimeException e) {
                acquired = Future.failedFuture(e);
            }
            acquired.onComplete(ar -> {
                if (ar.succeeded()) {
                    heldLeases++;
                    slot.lease = ar.result();
                    slot.phase = Phase.HELD;
                    if (!stopping() && index + 1 < slots.size()) {
                        acquire(index + 1);
                        return;
                    }
                    if (!stopping()) {
                        allAcquired.tryComplete(true);
                        queueTransfers();
                    }
                } else {
                    slot.phase = Phase.WAITING;
                    fail(ar.cause());
                }
                finishIfQuiet();
            });
        }

        /** What is left of the demand's waiting budget now, and the plan's expected time, for an acquisition. */
        private AttemptWindow window() {
            if (waitDeadlineNanos == Long.MAX_VALUE) {
                return new AttemptWindow(Long.MAX_VALUE, plan.stateReady());
            }
            long remaining = Math.min(Long.MAX_VALUE - 1, waitDeadlineNanos - ticker.nanos());
            return new AttemptWindow(remaining, plan.stateReady());
        }

        private void queueTransfers() {
            for (Slot slot : slots) {
                // The route owners take every segment to host-ready; an engine-restore plan's device copy is its
                // prepared plan's last step (PreparedPlan#restore), not a transfer of one segment.
                if (!slot.segment.movesPayloadToHost()) {
                    slot.phase = Phase.READY;
                    continue;
                }
                Transfer transfer = new Transfer(this, slot);
                try {
                    transfer.entry = scheduler.enqueue(new TransferScheduler.Request<>(slot.segment.medium(),
                            slot.segment.bytes(), schedule.transferClass(), schedule.latestStartNanos(),
                            schedule.notBeforeNanos(), schedule.priority(), transfer));
                } catch (PlanningException full) {
                    fail(full);
                    return;
                }
                slot.transfer = transfer;
                slot.phase = Phase.QUEUED;
            }
            pump();
        }

        private void submit(Transfer transfer) {
            Slot slot = transfer.slot;
            slot.phase = Phase.SUBMITTED;
            Future<SegmentLease> submitted;
            try {
                submitted = slot.owner.submit(slot.lease);
            } catch (RuntimeException e) {
                submitted = Future.failedFuture(e);
            }
            submitted.onComplete(ar -> {
                scheduler.completed(transfer.entry);
                if (ar.succeeded()) {
                    slot.lease = ar.result();
                    slot.phase = Phase.READY;
                } else {
                    slot.phase = Phase.HELD;
                    fail(ar.cause() instanceof PlanningException ? ar.cause()
                            : new PlanningException(PlanningFailure.TRANSFER_FAILED, slot.segment.route() + ": "
                            + ar.cause().getMessage()));
                }
                pump();
                finishIfQuiet();
            });
        }

        private void onDropped(Transfer transfer) {
            transfer.slot.phase = Phase.HELD;
            fail(new PlanningException(PlanningFailure.SPECULATION_DROPPED,
                    "a demand read needed the queue slot before this speculative transfer was submitted"));
            finishIfQuiet();
        }

        private void fail(Throwable cause) {
            if (failure == null) {
                failure = cause;
            }
            stop();
        }

        /** Drops queued transfers (their leases stay held until the release below) and hints submitted ones. */
        private void stop() {
            for (Slot slot : slots) {
                if (slot.phase == Phase.QUEUED && scheduler.drop(slot.transfer.entry)) {
                    slot.phase = Phase.HELD;
                } else if (slot.phase == Phase.SUBMITTED) {
                    slot.owner.cancel(slot.lease);
                }
            }
        }

        private void finishIfQuiet() {
            if (finishing) {
                return;
            }
            for (Slot slot : slots) {
                if (slot.phase == Phase.ACQUIRING || slot.phase == Phase.SUBMITTED
                        || (slot.phase == Phase.QUEUED && !stopping())) {
                    return;
                }
            }
            if (!stopping()) {
                if (slots.stream().allMatch(s -> s.phase == Phase.READY)) {
                    succeed();
                }
                return;
            }
            finishing = true;
            List<Future<Boolean>> releases = new ArrayList<>();
            for (Slot slot : slots) {
                if (slot.lease != null) {
                    releases.add(release(slot.lease));
                    slot.lease = null;
                }
            }
            allAcquired.tryComplete(false);
            Throwable cause = failure != null ? failure
                    : new PlanningException(PlanningFailure.CANCELLED, "the preparation was cancelled");
            Future.join(releases).onComplete(ar -> {
                livePreparations--;
                result.fail(cause);
            });
        }

        private void succeed() {
            allAcquired.tryComplete(true);
            finishing = true;
            livePreparations--;
            List<SegmentLease> leases = new ArrayList<>(slots.size());
            for (Slot slot : slots) {
                leases.add(slot.lease);
            }
            result.complete(new PreparedPlan(plan, leases, restoreOwner, PlanExecutor.this::release));
        }
    }
}
