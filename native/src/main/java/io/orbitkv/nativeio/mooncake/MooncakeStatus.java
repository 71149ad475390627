package io.orbitkv.nativeio.mooncake;

/**
 * What {@code /health} says about the Transfer Engine: whether the library loaded, from where, and if not, why.
 *
 * @param loaded  whether the library loaded and every symbol linked
 * @param origin  where it was loaded from (a path or a class-path resource), or null
 * @param cause   why it did not load, or null
 */
public record MooncakeStatus(boolean loaded, String origin, String cause) {}
