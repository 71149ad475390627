package io.orbitkv.model;

import java.util.List;

public record AllocateResult(long publishId, List<SlotGrant> slots) {}
