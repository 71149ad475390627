package io.orbitkv.model;

import java.util.Objects;

/**
 * The producer a consumer's demand waits for (P/D): an engine session, named by its instance id and session epoch on
 * the Manager it registered with ({@code member} null: this Manager; otherwise that Manager's cluster member id), and
 * the request its pages were published under. {@code requestId} is a correlation key: never logged, never a metric
 * label ({@link #toString} leaves it out).
 */
public record ProducerRef(String member, long instanceId, long sessionEpoch, String requestId) {
    public ProducerRef {
        Objects.requireNonNull(requestId, "requestId");
    }

    /** Registered with this Manager. */
    public boolean local() {
        return member == null;
    }

    @Override
    public String toString() {
        return "ProducerRef[" + (member == null ? "" : member + "/") + Long.toUnsignedString(instanceId) + "."
                + Long.toUnsignedString(sessionEpoch) + "]";
    }
}
