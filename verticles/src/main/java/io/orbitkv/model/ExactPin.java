package io.orbitkv.model;

import java.util.List;

/**
 * The result of {@link #pinExact}: when {@code complete}, {@code pinned} holds one ref per requested key, group by
 * group in request order, and the caller owns those pins; otherwise nothing is pinned and {@code missing} names
 * the first key that is not sealed any more.
 */
public record ExactPin(boolean complete, List<List<ImageRef>> pinned, long pinnedBytes, StateKey missing) {}
