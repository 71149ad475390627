package io.orbitkv.model.plan;

import io.orbitkv.common.KindedException;

/** A typed planning failure, optionally about one page of a plan. */
public final class PlanningException extends KindedException {
    private final PlannedPage page;

    public PlanningException(PlanningFailure failure, String detail) {
        this(failure, detail, null);
    }

    /** A failure about one page of a plan (the evidence an owner found stale), so the next pass can drop it. */
    public PlanningException(PlanningFailure failure, String detail, PlannedPage page) {
        super(failure, detail);
        this.page = page;
    }

    @Override
    public PlanningFailure failure() {
        return (PlanningFailure) super.failure();
    }

    /** The page the failure is about, when the owner named one. */
    public java.util.Optional<PlannedPage> page() {
        return java.util.Optional.ofNullable(page);
    }

    /** The planning failure behind {@code t}, or null. */
    public static PlanningFailure failureOf(Throwable t) {
        return t instanceof PlanningException p ? p.failure() : null;
    }
}
