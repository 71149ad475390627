package io.orbitkv.model.plan;

import io.orbitkv.model.plan.RestoreTarget;
import java.util.Objects;

/**
 * Where an engine-restore plan's last step copies to: the demand's validated restore target, and the instance and
 * ticket the restore role keys the copies by (its cancel names them).
 */
public record EngineDestination(long instance, long ticket, RestoreTarget target) {
    public EngineDestination {
        Objects.requireNonNull(target, "target");
    }
}
