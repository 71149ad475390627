package io.orbitkv.peer;

import io.orbitkv.protocol.peer.PeerGrant;
import io.vertx.core.Future;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.List;

/**
 * How payload moves between Managers once a source lease is granted: a small seam so that another transport (for
 * instance Mooncake's Transfer Engine through FFM over its C API, where that library is installed) can replace the
 * built-in TCP one. {@link TcpPeerTransport} is the built-in one; {@link MooncakePeerTransport} moves the bytes over
 * Mooncake's Transfer Engine.
 *
 * <p>Contract: {@link Receive#completion} completes once every destination holds its page's bytes, or fails; after
 * {@link Receive#fence} completes, the transport writes nothing more into any destination (the requester may then
 * free or reuse the slots). Checksums are the requester's job: a transport may compute each destination's CRC32C
 * over the bytes it placed in the slot, as they land ({@link Receive#receivedChecksums}); the requester's seal then
 * compares those with the source's instead of reading the slots again, and still refuses a mismatch.
 */
public interface PeerTransport {
    /** One page's destination: a slice of the requester's pool (its slot), exactly the page's length. */
    record Destination(MemorySegment slot) {}

    /** An in-flight receive. */
    interface Receive {
        Future<Void> completion();

        /** Stops the receive; completes when no byte can be written into the destinations any more. */
        Future<Void> fence();

        /**
         * After {@link #completion} succeeded: the CRC32C of each destination (grant order), computed by the transport
         * over exactly the bytes it placed in that slot, right after they landed; null when this transport does not
         * compute them (the seal then reads the slots).
         */
        default List<Integer> receivedChecksums() {
            return null;
        }

        /**
         * Whether {@link #fence} may wait on the remote side (one-sided reads that only the source's answer or death
         * ends): the requester then reports the failure at once and frees the slots when the fence completes.
         */
        default boolean fenceWaitsOnPeer() {
            return false;
        }
    }

    /** Opens the transfer of {@code grant} (its endpoint, lease and token; a transport may use more of it). */
    default Receive receive(PeerGrant grant, List<Destination> destinations, Duration timeout) {
        return receive(grant.getTransferEndpoint(), grant.getLeaseId(), grant.getTransferToken().toByteArray(),
                destinations, timeout);
    }

    /**
     * Opens the transfer of a granted lease from {@code endpoint} (host:port) into {@code destinations}, in grant
     * order; fails if it has not completed within {@code timeout} (the caller then fences).
     */
    Receive receive(String endpoint, long leaseId, byte[] token, List<Destination> destinations, Duration timeout);

    /**
     * Opens and verifies up to {@code connections} transfer connections to {@code endpoint} (host:port of member
     * {@code memberId}) ahead of need, where the transport keeps such connections, so that a later {@link #receive}
     * finds one ready; answers how many are ready (idle) now. Fails only when none could be made ready; it never holds
     * up a receive. A transport without reusable connections answers 0.
     */
    default Future<Integer> warm(String endpoint, String memberId, int connections) {
        return Future.succeededFuture(0);
    }

    /** Releases the transport's sockets and servers. */
    Future<Void> close();
}
