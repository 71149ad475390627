package io.orbitkv.engine;

import io.orbitkv.common.OrbitException;
import io.orbitkv.protocol.engine.ErrorReason;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.OptionalInt;
import java.util.Set;

/**
 * Who may call the engine API, whatever the door.
 *
 * <p>Design note: every call presents the engine token (compared in constant time). A door that knows its caller's
 * operating-system identity (the Unix socket, by {@code SO_PEERCRED}) also says so, and that uid must be one of the
 * allowed uids (default: the Manager's own effective uid); a door that cannot read the credentials it should have
 * fails closed. The peer is checked before the token, so a user who may not connect learns nothing about the token.
 * TCP callers (loopback by default) carry no credentials and are checked by the token alone. Stateless after
 * construction; safe on any thread.
 */
final class EngineAuthenticator {
    /**
     * A caller as its door saw it.
     *
     * @param presentedToken          the token it presented, or null
     * @param peerCredentialsRequired whether this door must know the caller's uid (the Unix socket)
     * @param peerUid                 the caller's uid when the door read it
     */
    public record Caller(String presentedToken, boolean peerCredentialsRequired, OptionalInt peerUid) {
        /** A caller on a door without peer credentials (TCP). */
        public static Caller withoutPeer(String presentedToken) {
            return new Caller(presentedToken, false, OptionalInt.empty());
        }

        /** A caller on the Unix socket: its uid, or empty when the credentials could not be read. */
        public static Caller unixPeer(String presentedToken, OptionalInt peerUid) {
            return new Caller(presentedToken, true, peerUid);
        }
    }

    private final byte[] token;
    private final Set<Integer> allowedUids;

    /** @param allowedUids users allowed on doors with peer credentials; never empty (callers default it) */
    public EngineAuthenticator(String token, Set<Integer> allowedUids) {
        if (allowedUids.isEmpty()) {
            throw new IllegalArgumentException("at least one uid must be allowed on the Unix socket");
        }
        this.token = token.getBytes(StandardCharsets.UTF_8);
        this.allowedUids = Set.copyOf(allowedUids);
    }

    /** Refuses the caller with PEER_NOT_ALLOWED or UNAUTHENTICATED_CALLER, or returns. */
    public void check(Caller caller) {
        if (caller.peerCredentialsRequired()) {
            if (caller.peerUid().isEmpty()) {
                throw new OrbitException(ErrorReason.PEER_NOT_ALLOWED, "the caller's peer credentials could not be read");
            }
            int uid = caller.peerUid().getAsInt();
            if (!allowedUids.contains(uid)) {
                throw new OrbitException(ErrorReason.PEER_NOT_ALLOWED, "uid " + Integer.toUnsignedString(uid)
                        + " may not use the engine socket (grpc.allowed-uids)");
            }
        }
        String presented = caller.presentedToken();
        if (presented == null || !MessageDigest.isEqual(token, presented.getBytes(StandardCharsets.UTF_8))) {
            throw new OrbitException(ErrorReason.UNAUTHENTICATED_CALLER, "missing or wrong engine token");
        }
    }

    public Set<Integer> allowedUids() {
        return allowedUids;
    }
}
