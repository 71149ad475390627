package io.orbitkv.recovery;

/**
 * What state a layer group needs to resume computing at a boundary; mirrors {@code GroupKind} in engine.proto.
 *
 * <pre>
 *   boundary b ───────────────────────────────────────────────┐
 *   FULL_ATTENTION  every page from the valid origin up to b  │
 *   SLIDING_WINDOW  the pages covering the last W tokens      │
 *   RECURRENT       one checkpoint taken exactly at b ────────┘
 * </pre>
 */
public enum GroupKind {
    /** Attends to every earlier token: needs every page in {@code [origin, b)}. */
    FULL_ATTENTION,
    /** Attends to the last {@code W} tokens: needs the pages covering {@code [max(origin, b - W), b)}. */
    SLIDING_WINDOW,
    /** Carries a fixed-size state (SSM, conv): needs the checkpoint saved after the block ending exactly at b. */
    RECURRENT
}
