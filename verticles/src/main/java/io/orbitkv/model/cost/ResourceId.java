package io.orbitkv.model.cost;

import java.util.Objects;
import io.orbitkv.model.cost.ResourceKind;

/**
 * Identity of an execution resource inside a cost key: kind, stable name and incarnation. The incarnation (for a
 * store: its open time; for a peer: its membership incarnation) keeps evidence from a previous life of the same name
 * from being reused after a restart. Never exported as a metric label.
 */
public record ResourceId(ResourceKind kind, String name, long incarnation) {

    public ResourceId {
        Objects.requireNonNull(kind, "kind");
        Objects.requireNonNull(name, "name");
        if (name.isEmpty()) {
            throw new IllegalArgumentException("resource name must not be empty");
        }
    }

    // Plain equals and hashCode with an identity short cut: keys of one resource share its instance.
    @Override
    public boolean equals(Object o) {
        return o == this || o instanceof ResourceId other && other.kind == kind && other.incarnation == incarnation
                && other.name.equals(name);
    }

    @Override
    public int hashCode() {
        return (kind.ordinal() * 31 + name.hashCode()) * 31 + Long.hashCode(incarnation);
    }
}
