package io.orbitkv.model;

/** One resident key as the residency snapshot reports it. */
public record ResidentKey(StateKey key, long generation, long lengthBytes) {}
