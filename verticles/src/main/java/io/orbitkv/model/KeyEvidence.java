package io.orbitkv.model;

/**
 * What this store knows of one key, metadata only (pins nothing, LRU order unchanged): the sealed DRAM image's
 * slot generation ({@code -1}: none), whether a slot for it is being written (a publish or an SSD read), and the
 * committed SSD extent's generation and length ({@code -1}: none), observed at residency sequence
 * {@code residencySequence}.
 */
public record KeyEvidence(StateKey key, long dramGeneration, long dramBytes, boolean writing, long ssdGeneration,
                          long ssdBytes, long residencySequence) {}
