package io.orbitkv.model;

import java.util.List;

/** A page of residency events after a sequence; {@code gap} means events were lost to the stream's ring bound. */
public record ResidencyPage(List<ResidencyEvent> events, boolean gap, long lastSequence) {}
