package io.orbitkv.model;

import java.util.List;

/** The keys of one group to probe, at their block positions. */
public record GroupProbe(int groupId, List<PositionedKey> keys) {}
