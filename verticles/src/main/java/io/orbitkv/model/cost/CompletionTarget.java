package io.orbitkv.model.cost;

import java.util.Objects;
import java.util.Optional;
import io.orbitkv.model.cost.ResourceId;

/**
 * The declared completion target a sample or estimate is measured to. Two routes are only comparable when they end at
 * the same target: host readiness has no engine resource, an engine restore names its destination device, a save
 * completion names the source whose pages become reusable. Operation samples end at their own completion.
 */
public record CompletionTarget(Intent intent, Optional<ResourceId> resource) {

    public enum Intent {
        /** The operation's own completion (operation samples only). */
        OPERATION_COMPLETE,
        /** State resident in local DRAM; no engine resource. */
        HOST_READY,
        /** State restored into the engine; names the destination device. */
        ENGINE_RESTORE,
        /** Saved pages durable enough to be reused; names the source. */
        SAVE_COMPLETION
    }

    private static final CompletionTarget OPERATION = new CompletionTarget(Intent.OPERATION_COMPLETE, Optional.empty());
    private static final CompletionTarget HOST = new CompletionTarget(Intent.HOST_READY, Optional.empty());

    public CompletionTarget {
        Objects.requireNonNull(intent, "intent");
        Objects.requireNonNull(resource, "resource");
        boolean needsResource = intent == Intent.ENGINE_RESTORE || intent == Intent.SAVE_COMPLETION;
        if (needsResource != resource.isPresent()) {
            throw new IllegalArgumentException(intent + (needsResource ? " needs" : " takes no") + " resource");
        }
    }

    // Plain equals and hashCode with an identity short cut: most keys share one of a few target instances.
    @Override
    public boolean equals(Object o) {
        return o == this || o instanceof CompletionTarget other && other.intent == intent
                && other.resource.equals(resource);
    }

    @Override
    public int hashCode() {
        return intent.ordinal() * 31 + resource.map(ResourceId::hashCode).orElse(0);
    }

    public static CompletionTarget operationComplete() {
        return OPERATION;
    }

    public static CompletionTarget hostReady() {
        return HOST;
    }

    public static CompletionTarget engineRestore(ResourceId destinationDevice) {
        return new CompletionTarget(Intent.ENGINE_RESTORE, Optional.of(destinationDevice));
    }

    public static CompletionTarget saveCompletion(ResourceId source) {
        return new CompletionTarget(Intent.SAVE_COMPLETION, Optional.of(source));
    }
}
