package io.orbitkv.model.plan;

import io.orbitkv.common.TypedFailure;
import java.util.Objects;
import io.orbitkv.model.plan.PlannedPage;
import io.orbitkv.model.plan.PlanningFailure;

/** A typed planning failure; no stack trace (expected control flow). */
public final class PlanningException extends RuntimeException implements TypedFailure {
    private final PlanningFailure failure;
    private final PlannedPage page;

    public PlanningException(PlanningFailure failure, String detail) {
        this(failure, detail, null);
    }

    /** A failure about one page of a plan (the evidence an owner found stale), so the next pass can drop it. */
    public PlanningException(PlanningFailure failure, String detail, PlannedPage page) {
        super(Objects.requireNonNull(failure, "failure").name() + ": " + detail, null, false, false);
        this.failure = failure;
        this.page = page;
    }

    /** The page the failure is about, when the owner named one. */
    public java.util.Optional<PlannedPage> page() {
        return java.util.Optional.ofNullable(page);
    }

    public PlanningFailure failure() {
        return failure;
    }

    @Override
    public int failureCode() {
        return failure.code();
    }

    @Override
    public String detail() {
        String message = getMessage();
        return message.substring(message.indexOf(": ") + 2);
    }

    /** The planning failure behind {@code t}, or null. */
    public static PlanningFailure failureOf(Throwable t) {
        return t instanceof PlanningException p ? p.failure() : null;
    }
}
