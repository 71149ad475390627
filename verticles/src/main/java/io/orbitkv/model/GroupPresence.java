package io.orbitkv.model;

import java.util.BitSet;

/**
 * What {@link #probe} found for one group: the probed positions whose image is sealed, and those being written.
 * The bit sets are fresh and handed over; neither side mutates them afterwards.
 */
public record GroupPresence(int groupId, BitSet sealed, BitSet writing, BitSet onSsd) {
    public GroupPresence(int groupId, BitSet sealed, BitSet writing) {
        this(groupId, sealed, writing, new BitSet());
    }
}
