package io.orbitkv.model;

/** Committed SSD evidence of a key: the exact extent generation and the payload length. */
public record SsdCopy(long generation, long lengthBytes) {}
