package io.orbitkv.engine;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;

/** The engine role's memory of leases that ended with their session, on a hand-stepped clock. */
class LeaseTombstonesTest {
    long now = 1_000;
    final LeaseTombstones tombstones = new LeaseTombstones(() -> now, 500, 3);

    @Test
    void aSessionEndIsAnsweredAsEndedFromTheMomentItBeginsUntilTheRetentionTimePassed() {
        tombstones.sessionEnding(7);
        assertThat(tombstones.endedWithSession(7, 99)).as("any lease of an instance whose end is in progress").isTrue();
        assertThat(tombstones.endedWithSession(8, 99)).isFalse();
        tombstones.sessionEnded(7, List.of(1L, 2L));
        assertThat(tombstones.endedWithSession(7, 1)).isTrue();
        assertThat(tombstones.endedWithSession(7, 99)).as("once known, only its own leases").isFalse();
        assertThat(tombstones.endedWithSession(8, 1)).as("another instance's claim").isFalse();
        now += 500;
        assertThat(tombstones.endedWithSession(7, 2)).as("kept for the whole retention time").isTrue();
        now += 1;
        assertThat(tombstones.endedWithSession(7, 2)).isFalse();
        assertThat(tombstones.size()).isZero();
    }

    @Test
    void theTableIsBoundedEldestFirstAndCountsWhatItDropped() {
        tombstones.sessionEnding(1);
        tombstones.sessionEnded(1, List.of(10L, 11L));
        tombstones.sessionEnding(2);
        tombstones.sessionEnded(2, List.of(20L, 21L));
        assertThat(tombstones.size()).isEqualTo(3);
        assertThat(tombstones.dropped()).isEqualTo(1);
        assertThat(tombstones.endedWithSession(1, 10)).isFalse();
        assertThat(tombstones.endedWithSession(1, 11)).isTrue();
        assertThat(tombstones.endedWithSession(2, 21)).isTrue();
    }
}
