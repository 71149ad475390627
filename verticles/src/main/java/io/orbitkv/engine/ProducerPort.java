package io.orbitkv.engine;

import io.orbitkv.model.ProducerRef;
import io.orbitkv.model.ProducerState;
import io.orbitkv.model.StateKey;
import io.vertx.core.Future;
import java.util.List;

/** Where a named producer session stands for a consumer's keys (P/D); {@link ProducerProxy} implements it. */
public interface ProducerPort {
    Future<ProducerState> status(ProducerRef producer, List<StateKey> keys);
}
