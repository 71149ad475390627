package io.orbitkv.model.cost;

/**
 * Coarse family of the payload representation being moved. Different families have different byte counts and
 * decode work for the same logical state, so their evidence is kept apart.
 */
public enum RepresentationFamily {
    RAW,
    LOSSLESS_CODEC,
    LOSSY_CODEC
}
