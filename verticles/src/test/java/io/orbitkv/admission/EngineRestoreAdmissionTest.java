package io.orbitkv.admission;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.admission.AdmissionCommands.DemandPlan;
import io.orbitkv.admission.AdmissionCommands.DemandState;
import io.orbitkv.admission.AdmissionCommands.Outcome;
import io.orbitkv.admission.AdmissionCommands.Status;
import io.orbitkv.common.OrbitException;
import io.orbitkv.protocol.engine.ErrorReason;
import io.orbitkv.protocol.engine.RestoreRoute;
import io.orbitkv.model.plan.EngineDestination;
import io.orbitkv.planning.RestoreOwner;
import io.orbitkv.model.plan.Restored;
import io.orbitkv.restore.RestoreCommands.SourcePage;
import io.orbitkv.model.plan.RestoreTarget;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The engine-restore completion target, driven directly: the real image store
 * ({@link io.orbitkv.storage.ImageStoreFixture}) harness of {@link DemandAdmissionTest}, the planning role's handlers,
 * and a restore owner (the device copy: the plan's last execution step) whose restores complete only when the test
 * says (the restore role's contract: a restore's future completes once every copy is terminal). Proves the ordering: READY only after the restore; the sources (lease, pins)
 * end only after the copies drained, on cancel, revision, session end and failure.
 */
class EngineRestoreAdmissionTest {
    final DemandAdmissionTest harness = new DemandAdmissionTest();

    /** Restores in flight, completed by the test; cancel hints recorded. */
    final Deque<Promise<Restored>> running = new ArrayDeque<>();
    final List<Long> cancelHints = new ArrayList<>();
    final List<List<SourcePage>> sourcesSeen = new ArrayList<>();
    DemandAdmission admission;

    @BeforeEach
    void start() {
        admission = harness.admission(8, new RestoreOwner() {
            @Override
            public Future<Restored> restore(EngineDestination destination, List<SourcePage> sources) {
                Promise<Restored> copies = Promise.promise();
                running.add(copies);
                sourcesSeen.add(sources);
                return copies.future();
            }

            @Override
            public void cancel(EngineDestination destination) {
                cancelHints.add(destination.ticket());
            }
        });
        // Four attention pages and the recurrent checkpoint at four pages: the boundary is 4 pages, 5 pages leased.
        harness.publish(0, DemandAdmissionTest.range(4), true);
        harness.publish(2, List.of(3), true);
    }

    @AfterEach
    void nothingLeft() {
        assertThat(admission.activeLeases()).isZero();
        assertThat(harness.store.pinnedImages()).as("pinned images").isZero();
        harness.release();
    }

    static DemandPlan restorePlan(long revision) {
        RestoreTarget target = new RestoreTarget(1, RestoreRoute.HOST_REGION, List.of(
                new RestoreTarget.GroupPages(0, DemandAdmissionTest.range(4), List.of(3, 2, 1, 0)),
                new RestoreTarget.GroupPages(2, DemandAdmissionTest.range(4), List.of(4, 5, 6, 7))));
        return DemandAdmissionTest.plan("r", revision, 9, 4, 4).withEngineRestore(target);
    }

    static final Restored FIVE_PAGES = new Restored(RestoreRoute.HOST_REGION, 5, 5 * DemandAdmissionTest.PAGE);

    @Test
    void answersPendingResidentWhileCopyingAndReadyWithoutALeaseOnlyOnceEveryCopyIsTerminal() {
        Outcome submitted = admission.submit(1, restorePlan(0)).result();
        assertThat(submitted.status()).isEqualTo(Status.PENDING);
        assertThat(submitted.detail()).isEqualTo(DemandState.RESIDENT);
        assertThat(admission.activeLeases()).as("the sources stay leased while copying").isEqualTo(1);
        assertThat(sourcesSeen.getFirst()).extracting(SourcePage::groupId).containsExactly(0, 0, 0, 0, 2);
        assertThat(admission.poll(1, submitted.ticket()).result().status()).isEqualTo(Status.PENDING);

        running.poll().complete(FIVE_PAGES);
        Outcome ready = admission.poll(1, submitted.ticket()).result();
        assertThat(ready.status()).isEqualTo(Status.READY);
        assertThat(ready.boundaryTokens()).isEqualTo(4L * DemandAdmissionTest.P);
        assertThat(ready.leaseId()).as("no lease handed over").isZero();
        assertThat(ready.restored()).isEqualTo(FIVE_PAGES);
        assertThat(admission.outstanding()).isZero();
    }

    @Test
    void cancelStopsTheRestoreAndReleasesTheSourcesOnlyAfterTheSubmittedCopiesDrained() {
        Outcome submitted = admission.submit(1, restorePlan(0)).result();
        Future<Integer> cancelled = admission.cancel(1, submitted.ticket());
        assertThat(cancelHints).containsExactly(submitted.ticket());
        assertThat(cancelled.isComplete()).as("cancel answered with copies in flight").isFalse();
        assertThat(admission.activeLeases()).isEqualTo(1);
        assertThat(harness.store.pinnedImages()).isEqualTo(5);

        running.poll().fail(new OrbitException(ErrorReason.RESTORE_FAILED, "cancelled; submitted copies drained"));
        assertThat(cancelled.result()).isEqualTo(5);
    }

    @Test
    void aRevisionDrainsTheRunningRestoreBeforeTheOldLeaseEndsThenRestoresAgain() {
        Outcome first = admission.submit(1, restorePlan(0)).result();
        Future<Outcome> revised = admission.submit(1, restorePlan(1));
        assertThat(cancelHints).containsExactly(first.ticket());
        assertThat(revised.isComplete()).isFalse();
        assertThat(admission.activeLeases()).as("the old sources are still being read").isEqualTo(1);

        running.poll().fail(new OrbitException(ErrorReason.RESTORE_FAILED, "cancelled"));
        assertThat(revised.result().status()).isEqualTo(Status.PENDING);
        assertThat(running).as("the revision's own restore").hasSize(1);
        running.poll().complete(FIVE_PAGES);
        Outcome ready = admission.poll(1, first.ticket()).result();
        assertThat(ready.status()).isEqualTo(Status.READY);
        assertThat(ready.revision()).isEqualTo(1);
    }

    @Test
    void aFailedRestoreEndsTheLeaseAndTheNextPollAnswersRestoreFailedOnce() {
        Outcome submitted = admission.submit(1, restorePlan(0)).result();
        running.poll().fail(new OrbitException(ErrorReason.RESTORE_FAILED, "a copy failed"));
        assertThat(admission.activeLeases()).isZero();
        Throwable failure = admission.poll(1, submitted.ticket()).cause();
        assertThat(failure).isInstanceOf(OrbitException.class);
        assertThat(((OrbitException) failure).reason()).isEqualTo(ErrorReason.RESTORE_FAILED);
        OrbitException gone = org.assertj.core.api.Assertions.catchThrowableOfType(OrbitException.class,
                () -> admission.poll(1, submitted.ticket()));
        assertThat(gone.reason()).isEqualTo(ErrorReason.UNKNOWN_TICKET);
    }

    @Test
    void theSessionsEndWaitsForTheCopiesBeforeItsLeasesEndIntoQuarantine() {
        admission.submit(1, restorePlan(0)).result();
        Future<AdmissionCommands.InstanceReleased> released = admission.releaseInstance(1);
        assertThat(cancelHints).hasSize(1);
        assertThat(released.isComplete()).isFalse();
        assertThat(admission.activeLeases()).isEqualTo(1);

        running.poll().fail(new OrbitException(ErrorReason.RESTORE_FAILED, "cancelled"));
        assertThat(released.result().leases()).isEqualTo(1);
        assertThat(released.result().queries()).isEqualTo(1);
    }

    @Test
    void shutdownCancelsTheRestoreAndEndsItsLeaseOnlyAfterTheCopiesDrained() {
        admission.submit(1, restorePlan(0)).result();
        Future<Void> stopped = admission.shutdown();
        assertThat(cancelHints).hasSize(1);
        assertThat(stopped.isComplete()).isFalse();
        assertThat(admission.activeLeases()).isEqualTo(1);

        running.poll().fail(new OrbitException(ErrorReason.RESTORE_FAILED, "cancelled"));
        assertThat(stopped.succeeded()).isTrue();
    }
}
