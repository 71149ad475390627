package io.orbitkv.common;

import java.util.Objects;

/**
 * A typed failure of one kind enum ({@link RoleCallException}, the SSD role's and planning's): the message is
 * {@code KIND: detail}, and the code travels on the event bus so that the caller's proxy rebuilds the same exception.
 * No stack trace: these are expected control flow. (Java allows no generic Throwable, so each subclass narrows
 * {@link #failure()} to its own enum.)
 */
public abstract class KindedException extends RuntimeException implements TypedFailure {
    private final FailureKind failure;

    protected KindedException(FailureKind failure, String detail) {
        super(Objects.requireNonNull(failure, "failure").name() + ": " + detail, null, false, false);
        this.failure = failure;
    }

    public FailureKind failure() {
        return failure;
    }

    @Override
    public final int failureCode() {
        return failure.code();
    }

    /** The message without the kind's name. */
    @Override
    public final String detail() {
        String message = getMessage();
        int colon = message.indexOf(": ");
        return colon < 0 ? message : message.substring(colon + 2);
    }
}
