package io.orbitkv.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.orbitkv.common.OrbitException;
import io.orbitkv.model.AllocateResult;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.ProducerState;
import io.orbitkv.model.SlotGrant;
import io.orbitkv.model.StateKey;
import io.orbitkv.protocol.engine.ErrorReason;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** The engine role's producer evidence, driven directly: what satisfies a consumer, what does not, its bounds. */
class ProducerSealsTest {
    static final byte[] NAMESPACE = new byte[StateKey.NAMESPACE_BYTES];
    final Set<List<Long>> live = new HashSet<>(List.of(List.of(1L, 11L), List.of(2L, 22L)));
    final ProducerSeals seals = new ProducerSeals((instance, epoch) -> live.contains(List.of(instance, epoch)), 2, 6);

    static List<StateKey> keys(String seed, int n) {
        List<StateKey> keys = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            keys.add(StateKey.of(NAMESPACE, 0, (seed + i).getBytes()));
        }
        return keys;
    }

    static AllocateResult allocated(long publishId, int n, boolean written) {
        List<SlotGrant> slots = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            slots.add(written ? new SlotGrant(true, new ImageRef(null, i * 4096L, 4096, i)) : new SlotGrant(false, null));
        }
        return new AllocateResult(publishId, slots);
    }

    @Test
    void onlyTheNamedSessionsSealUnderTheNamedRequestSatisfies() {
        List<StateKey> keys = keys("a", 3);
        assertThat(seals.status(1, 11, "r", keys)).isEqualTo(ProducerState.WAITING);
        seals.allocated(2, 22, "r", keys, allocated(7, 3, true)); // another session, same keys and request id
        seals.sealed(7);
        assertThat(seals.status(1, 11, "r", keys)).isEqualTo(ProducerState.WAITING);
        seals.allocated(1, 11, "other-request", keys, allocated(8, 3, true));
        seals.sealed(8);
        assertThat(seals.status(1, 11, "r", keys)).as("another request of the producer").isEqualTo(ProducerState.WAITING);
        seals.allocated(1, 11, "r", keys.subList(0, 2), allocated(9, 2, true));
        assertThat(seals.status(1, 11, "r", keys)).as("allocated, not sealed").isEqualTo(ProducerState.WAITING);
        seals.sealed(9);
        assertThat(seals.status(1, 11, "r", keys)).as("two of three").isEqualTo(ProducerState.WAITING);
        // The third page was already present: a publish with nothing to write counts at once.
        seals.allocated(1, 11, "r", keys.subList(2, 3), allocated(10, 1, false));
        assertThat(seals.status(1, 11, "r", keys)).isEqualTo(ProducerState.SEALED);
        assertThat(seals.status(1, 12, "r", keys)).as("another epoch of the instance").isEqualTo(ProducerState.ENDED);
    }

    @Test
    void anAbortedPublishCountsNothingAndAnEndedSessionForgetsEverything() {
        List<StateKey> keys = keys("b", 2);
        seals.allocated(1, 11, "r", keys, allocated(1, 2, true));
        seals.aborted(1);
        seals.sealed(1);
        assertThat(seals.status(1, 11, "r", keys)).isEqualTo(ProducerState.WAITING);
        seals.allocated(1, 11, "r", keys, allocated(2, 2, true));
        seals.sealed(2);
        assertThat(seals.status(1, 11, "r", keys)).isEqualTo(ProducerState.SEALED);
        live.remove(List.of(1L, 11L));
        assertThat(seals.status(1, 11, "r", keys)).isEqualTo(ProducerState.ENDED);
        seals.ended(1);
        assertThat(seals.recorded(1, 11, "r")).isEmpty();
        assertThat(seals.recordedKeys()).isZero();
        assertThat(seals.taggedPublishes()).isZero();
    }

    @Test
    void aSealAfterItsSessionEndedIsNotRecorded() {
        List<StateKey> keys = keys("c", 1);
        seals.allocated(2, 22, "r", keys, allocated(3, 1, true));
        live.remove(List.of(2L, 22L));
        seals.sealed(3);
        assertThat(seals.recorded(2, 22, "r")).isEmpty();
    }

    @Test
    void boundsRefuseOneTaggedPublishTooManyAndDropTheOldestRecords() {
        seals.allocated(1, 11, "r1", keys("d", 1), allocated(1, 1, true));
        seals.allocated(1, 11, "r2", keys("e", 1), allocated(2, 1, true));
        assertThatThrownBy(seals::requireRoom).isInstanceOfSatisfying(OrbitException.class,
                e -> assertThat(e.reason()).isEqualTo(ErrorReason.TOO_MANY_OUTSTANDING));
        seals.aborted(1);
        seals.aborted(2);
        seals.requireRoom();
        seals.allocated(1, 11, "old", keys("f", 4), allocated(3, 4, false));
        seals.allocated(2, 22, "new", keys("g", 4), allocated(4, 4, false)); // 8 keys > 6: the oldest record goes
        assertThat(seals.recorded(1, 11, "old")).isEmpty();
        assertThat(seals.status(2, 22, "new", keys("g", 4))).isEqualTo(ProducerState.SEALED);
        assertThat(seals.recordedKeys()).isEqualTo(4);
        assertThat(seals.recordsDropped()).isEqualTo(1);
    }
}
