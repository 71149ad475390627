package io.orbitkv.peer;

import io.vertx.core.Context;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Map;

/**
 * The requester's idle transfer connections, per source endpoint (at most {@value #MAX_PER_ENDPOINT} each; the socket's
 * own idle timeout closes them after {@value #IDLE_SECONDS} s), so that a lease costs no connect or TLS handshake. A
 * connection is offered only after a transfer that received exactly its granted bytes, and taken only by a receive on
 * the same context (its loop). Thread-safe: the loops of one transport share it.
 */
final class IdleConnections {
    static final int MAX_PER_ENDPOINT = 4;
    static final int IDLE_SECONDS = 30;

    private final Map<String, ArrayDeque<TransferConnection>> idle = new HashMap<>();

    /** An open idle connection to {@code endpoint} on {@code context}, or null; closed ones met on the way go. */
    TransferConnection take(String endpoint, Context context) {
        synchronized (idle) {
            ArrayDeque<TransferConnection> pooled = idle.get(endpoint);
            while (pooled != null && !pooled.isEmpty()) {
                TransferConnection c = pooled.pollLast();
                if (!c.closed && c.context == context) {
                    return c;
                }
                c.socket.close();
            }
            return null;
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
