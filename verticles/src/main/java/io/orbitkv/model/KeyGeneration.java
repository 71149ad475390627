package io.orbitkv.model;

/** A key at one exact generation (a DRAM slot generation or an SSD extent generation, by context). */
public record KeyGeneration(StateKey key, long generation) {}
