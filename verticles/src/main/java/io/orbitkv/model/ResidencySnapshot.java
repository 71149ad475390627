package io.orbitkv.model;

import java.util.List;

/** The answer of {@link #residencySnapshot}: every key resident at {@code sequence}. */
public record ResidencySnapshot(long incarnation, long sequence, List<ResidentKey> dram, List<ResidentKey> ssd) {}
