package io.orbitkv.model.plan;

import io.orbitkv.protocol.engine.RestoreRoute;

public record Restored(RestoreRoute route, int pages, long bytes) {}
