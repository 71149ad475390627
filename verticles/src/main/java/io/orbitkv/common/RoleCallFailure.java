package io.orbitkv.common;

/**
 * Why a call between roles failed before or without the receiving role's answer; the same on the direct path and the
 * event bus (see {@link RoleProxies}). Codes are disjoint from engine.proto ErrorReason numbers and the roles' own.
 */
public enum RoleCallFailure implements FailureKind {
    /** No answer within the call's send timeout; the role may still finish the work (its slot stays taken until then). */
    TIMEOUT(6001),
    /** The role already had its bound of calls in flight at this address; nothing was done. */
    IN_FLIGHT_LIMIT(6002);

    private final int code;

    RoleCallFailure(int code) {
        this.code = code;
    }

    public int code() {
        return code;
    }

    /** The failure for {@code code}, or null when the code is not a role-call failure. */
    public static RoleCallFailure forCode(int code) {
        for (RoleCallFailure failure : values()) {
            if (failure.code == code) {
                return failure;
            }
        }
        return null;
    }
}
