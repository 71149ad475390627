package io.orbitkv.engine;

import io.orbitkv.admission.AdmissionCommands.InstanceReleased;
import io.orbitkv.admission.AdmissionProxy;
import io.orbitkv.storage.StorageProxy;
import io.vertx.core.Future;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;

/**
 * Ends what a session held when it ends (unregister, resume, ttl lapse).
 *
 * <p>Design note: cleanup is a fixed list of steps, each owned by another role: the admission role ends the session's
 * leases (their slots quarantined, their ids remembered as {@link LeaseTombstones}) and forgets its tickets, draining
 * work in flight; the storage role ends its unsealed publishes (slots quarantined). The steps run in that order (a
 * lease is never ended after the slots it names were touched) and <em>every</em> step runs even when an earlier one
 * failed: a failed step leaves its own holdings, never another's. The result fails when any step failed, with one
 * {@link CleanupException} naming every failed step. Runs on the engine role's context.
 */
public final class SessionCleanup {
    /** The cleanup steps, in the order they run. */
    public enum Step { LEASES_AND_QUERIES, UNSEALED_PUBLISHES }

    /** Test seam: a failure reported for a step after it ran (so nothing is actually left behind). */
    @FunctionalInterface
    public interface Faults {
        Faults NONE = step -> null;

        /** The failure to report for {@code step} once it ran, or null for its real outcome. */
        Throwable after(Step step);
    }

    /** What a session end released. */
    record Released(int leases, int queries, int abortedPublishes) {}

    /** One or more cleanup steps failed; each failure is a suppressed exception, the first is the cause. */
    public static final class CleanupException extends RuntimeException {
        CleanupException(long instance, List<Step> steps, List<Throwable> failures) {
            super("ending the session of instance " + instance + " failed in " + steps + ": " + describe(steps, failures),
                    failures.getFirst());
            failures.forEach(this::addSuppressed);
        }

        private static String describe(List<Step> steps, List<Throwable> failures) {
            List<String> parts = new ArrayList<>();
            for (int i = 0; i < steps.size(); i++) {
                parts.add(steps.get(i) + ": " + failures.get(i).getMessage());
            }
            return String.join("; ", parts);
        }
    }

    private final AdmissionProxy admission;
    private final StorageProxy storage;
    private final LeaseTombstones tombstones;
    private final Faults faults;

    SessionCleanup(AdmissionProxy admission, StorageProxy storage, LeaseTombstones tombstones, Faults faults) {
        this.admission = admission;
        this.storage = storage;
        this.tombstones = tombstones;
        this.faults = faults;
    }

    /** Runs every step for the instance whose session just ended; fails when any step failed. */
    Future<Released> release(long instance) {
        tombstones.sessionEnding(instance);
        Future<InstanceReleased> leases = step(Step.LEASES_AND_QUERIES, () -> admission.releaseInstance(instance))
                .andThen(ar -> tombstones.sessionEnded(instance, ar.succeeded() ? ar.result().endedLeaseIds() : List.of()));
        return leases.transform(first -> step(Step.UNSEALED_PUBLISHES, () -> storage.releaseInstance(instance))
                .transform(second -> {
                    List<Step> failedSteps = new ArrayList<>();
                    List<Throwable> failures = new ArrayList<>();
                    if (first.failed()) {
                        failedSteps.add(Step.LEASES_AND_QUERIES);
                        failures.add(first.cause());
                    }
                    if (second.failed()) {
                        failedSteps.add(Step.UNSEALED_PUBLISHES);
                        failures.add(second.cause());
                    }
                    if (!failures.isEmpty()) {
                        return Future.failedFuture(new CleanupException(instance, failedSteps, failures));
                    }
                    return Future.succeededFuture(new Released(first.result().leases(), first.result().queries(),
                            second.result()));
                }));
    }

    private <T> Future<T> step(Step step, Supplier<Future<T>> action) {
        Future<T> ran;
        try {
            ran = action.get();
        } catch (RuntimeException e) {
            ran = Future.failedFuture(e);
        }
        return ran.transform(ar -> {
            Throwable injected = faults.after(step);
            if (injected != null) {
                return Future.failedFuture(injected);
            }
            return ar.succeeded() ? Future.succeededFuture(ar.result()) : Future.failedFuture(ar.cause());
        });
    }
}
