package io.orbitkv.model;

/** A key at a block position of its group's chain. */
public record PositionedKey(int position, StateKey key) {}
