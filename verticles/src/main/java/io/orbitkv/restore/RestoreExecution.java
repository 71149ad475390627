package io.orbitkv.restore;

import io.orbitkv.model.plan.Restored;
import io.orbitkv.protocol.engine.RestoreRoute;
import io.vertx.core.Promise;
import java.util.Arrays;

/**
 * One restore plan bound to one device lane: its copies (pool offset → destination offset, length), how far
 * submission got ({@link #next}), what is in flight and completed, and why it stopped. Confined to the role's event
 * loop. {@link #done} completes only when nothing of it is in flight.
 */
final class RestoreExecution {
    record Key(long instance, long ticket) {}

    final Key key;
    final DeviceLane lane;
    final DestinationMappings.Destination destination;
    final RestoreRoute route;
    final long[] sources;
    final long[] targets;
    final long[] lengths;
    final long bytes;
    final long startNanos;
    final Promise<Restored> done = Promise.promise();
    int next;
    int inFlight;
    int completed;
    boolean firstCopyStarted;
    boolean cancelled;
    Throwable failure;

    RestoreExecution(Key key, DeviceLane lane, DestinationMappings.Destination destination, RestoreRoute route,
                     long[] sources, long[] targets, long[] lengths, long startNanos) {
        this.key = key;
        this.lane = lane;
        this.destination = destination;
        this.route = route;
        this.sources = sources;
        this.targets = targets;
        this.lengths = lengths;
        this.bytes = Arrays.stream(lengths).sum();
        this.startNanos = startNanos;
    }

    int copies() {
        return lengths.length;
    }

    boolean stopped() {
        return cancelled || failure != null;
    }

    /** Nothing in flight, and either stopped or every copy completed. */
    boolean terminal() {
        return inFlight == 0 && (stopped() || completed == copies());
    }
}
