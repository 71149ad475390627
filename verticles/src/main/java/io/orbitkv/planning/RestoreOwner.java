package io.orbitkv.planning;

import io.orbitkv.restore.RestoreCommands;
import io.vertx.core.Future;
import java.util.List;
import io.orbitkv.model.plan.EngineDestination;
import io.orbitkv.model.plan.Restored;

/**
 * The execution owner of an engine-restore plan's device copy: the restore role. A plan with the completion target
 * {@link io.orbitkv.model.cost.CompletionTarget.Intent#ENGINE_RESTORE} is first made host-ready by the route owners
 * (pins; reads back into pool slots), then this owner copies the host pages into the engine's destination.
 *
 * <p>Contract: {@link #restore} completes only when every copy it submitted is terminal (succeeded, failed or
 * cancelled), with what was restored or a typed failure ({@link io.orbitkv.common.OrbitException}: ROUTE_UNAVAILABLE,
 * UNKNOWN_DESTINATION or INVALID_DESTINATION before anything moved, RESTORE_FAILED after). The caller keeps the
 * sources pinned until then. {@link #cancel} is a hint: queued copies are dropped, submitted ones drain, and the
 * restore's future completes then. Futures complete on the planning role's event loop.
 */
public interface RestoreOwner {

    Future<Restored> restore(EngineDestination destination, List<RestoreCommands.SourcePage> sources);

    void cancel(EngineDestination destination);
}
