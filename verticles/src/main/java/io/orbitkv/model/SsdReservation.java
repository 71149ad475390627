package io.orbitkv.model;

import java.util.List;

/** Slots reserved by {@link #reserveFromSsd}: all of them, or none and why ({@code missing}: a stale key). */
public record SsdReservation(List<Materialization> reserved, StateKey missing) {
    public boolean complete() {
        return !reserved.isEmpty();
    }
}
