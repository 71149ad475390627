package io.orbitkv.peer;

import io.vertx.core.Context;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Map;

/**
 * The requester's idle transfer connections, per source endpoint (at most {@value #MAX_PER_ENDPOINT} each; the socket's
 * own idle timeout closes them after {@value #IDLE_SECONDS} s), so that a lease costs no connect or TLS handshake. A
 * connection is offered only after a transfer that received exactly its granted bytes (or, opened ahead of need by
 * {@link TcpPeerTransport#warm}, before any), and taken only by a receive on the same context (its loop); connections
 * of the other loops stay where they are. Thread-safe: the loops of one transport share it.
 */
final class IdleConnections {
    static final int MAX_PER_ENDPOINT = 4;
    static final int IDLE_SECONDS = 30;

    private final Map<String, ArrayDeque<TransferConnection>> idle = new HashMap<>();

    /** An open idle connection to {@code endpoint} on {@code context}, or null; closed ones met on the way go. */
    TransferConnection take(String endpoint, Context context) {
        synchronized (idle) {
            ArrayDeque<TransferConnection> pooled = idle.get(endpoint);
            if (pooled == null) {
                return null;
            }
            for (var it = pooled.descendingIterator(); it.hasNext(); ) {
                TransferConnection c = it.next();
                if (c.closed) {
                    it.remove();
                    c.socket.close();
                } else if (c.context == context) {
                    it.remove();
                    return c;
                }
            }
            return null;
        }
    }

    /** Open idle connections to {@code endpoint} on {@code context}. */
    int idleOn(String endpoint, Context context) {
        synchronized (idle) {
            ArrayDeque<TransferConnection> pooled = idle.get(endpoint);
            return pooled == null ? 0 : (int) pooled.stream().filter(c -> !c.closed && c.context == context).count();
        }
    }

    /** Keeps a clean connection for the next receive, or closes it when full or closed. */
    void offer(TransferConnection c) {
        synchronized (idle) {
            ArrayDeque<TransferConnection> pooled = idle.computeIfAbsent(c.endpoint, k -> new ArrayDeque<>());
            if (!c.closed && pooled.size() < MAX_PER_ENDPOINT) {
                pooled.addLast(c);
                return;
            }
        }
        c.socket.close();
    }

    void forget(TransferConnection c) {
        synchronized (idle) {
            ArrayDeque<TransferConnection> pooled = idle.get(c.endpoint);
            if (pooled != null) {
                pooled.remove(c);
            }
        }
    }

    /** Closes every idle connection. */
    void closeAll() {
        synchronized (idle) {
            idle.values().forEach(pooled -> pooled.forEach(c -> c.socket.close()));
            idle.clear();
        }
    }
}
