package io.orbitkv.model;

/** One slot of an allocate request: null ref = already present (nothing to write). */
public record SlotGrant(boolean allocated, ImageRef ref) {}
