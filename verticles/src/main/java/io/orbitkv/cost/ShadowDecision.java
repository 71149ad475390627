package io.orbitkv.cost;

import java.util.Locale;

/** What a shadow comparison concluded. It is recorded and returned; it never changes execution. */
enum ShadowDecision {
    /** An alternative is faster by more than both errors plus the declared margin. */
    SUGGEST_ALTERNATIVE,
    /** The current path is the best known (or the only eligible one). */
    AGREE,
    /** An alternative looks faster, but not by more than the errors plus the margin. */
    WITHIN_MARGIN,
    /** The alternatives do not describe the same work (target, resource, representation or shape differ). */
    INCOMPARABLE,
    /** The current path or a comparable alternative has no usable estimate. */
    UNKNOWN;

    private final String label = name().toLowerCase(Locale.ROOT);

    public String label() {
        return label;
    }
}
