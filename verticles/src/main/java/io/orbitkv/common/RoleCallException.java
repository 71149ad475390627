package io.orbitkv.common;

/** A call between roles that failed as {@link #failure()} says; no stack trace (expected control flow). */
public final class RoleCallException extends RuntimeException implements TypedFailure {
    private final RoleCallFailure failure;

    public RoleCallException(RoleCallFailure failure, String message) {
        super(failure.name() + ": " + message, null, false, false);
        this.failure = failure;
    }

    public RoleCallFailure failure() {
        return failure;
    }

    @Override
    public int failureCode() {
        return failure.code();
    }

    @Override
    public String detail() {
        String message = getMessage();
        int colon = message.indexOf(": ");
        return colon < 0 ? message : message.substring(colon + 2);
    }
}
