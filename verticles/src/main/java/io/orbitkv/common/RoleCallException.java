package io.orbitkv.common;

/** A call between roles that failed as {@link #failure()} says. */
public final class RoleCallException extends KindedException {
    public RoleCallException(RoleCallFailure failure, String message) {
        super(failure, message);
    }

    @Override
    public RoleCallFailure failure() {
        return (RoleCallFailure) super.failure();
    }
}
