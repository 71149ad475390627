package io.orbitkv.events;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.model.StateKey;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The index of what subscribers were told: repeats are not news, undo restores counts, the key bound holds. */
class KvIndexTest {
    static StateKey key(int namespace, int hash) {
        byte[] ns = new byte[StateKey.NAMESPACE_BYTES];
        ns[0] = (byte) namespace;
        return StateKey.of(ns, 0, new byte[] {(byte) hash, 1});
    }

    @Test
    void repeatsAndUnknownRemovalsChangeNothing() {
        KvIndex index = new KvIndex(100);
        StateKey a = key(1, 1);
        String ns = KvIndex.namespaceHex(a);
        assertThat(index.apply(KvEvent.Medium.CPU, a, true, 10, ns)).isNotNull();
        assertThat(index.apply(KvEvent.Medium.CPU, a, true, 10, ns)).as("stored twice is news once").isNull();
        assertThat(index.apply(KvEvent.Medium.DISK, a, false, 10, ns)).as("never announced on DISK").isNull();
        assertThat(index.apply(KvEvent.Medium.DISK, a, true, 10, ns)).isNotNull();
        assertThat(index.namespaces().get(ns)[0].blocks).isEqualTo(1);
        assertThat(index.namespaces().get(ns)[1].bytes).isEqualTo(10);
        assertThat(index.apply(KvEvent.Medium.CPU, a, false, 10, ns)).isNotNull();
        assertThat(index.apply(KvEvent.Medium.DISK, a, false, 10, ns)).isNotNull();
        assertThat(index.namespaces()).as("an empty namespace is forgotten").isEmpty();
    }

    @Test
    void undoRestoresTheIndexAsSubscribersKnowIt() {
        KvIndex index = new KvIndex(100);
        StateKey a = key(1, 1);
        StateKey b = key(1, 2);
        String ns = KvIndex.namespaceHex(a);
        index.apply(KvEvent.Medium.CPU, a, true, 10, ns);
        List<KvIndex.Applied> batch = new ArrayList<>();
        batch.add(index.apply(KvEvent.Medium.CPU, a, false, 10, ns));
        batch.add(index.apply(KvEvent.Medium.CPU, b, true, 20, ns));
        index.undo(batch);
        assertThat(index.contains(KvEvent.Medium.CPU, a)).isTrue();
        assertThat(index.contains(KvEvent.Medium.CPU, b)).isFalse();
        assertThat(index.namespaces().get(ns)[0].blocks).isEqualTo(1);
        assertThat(index.namespaces().get(ns)[0].bytes).isEqualTo(10);
    }

    @Test
    void keysBeyondTheBoundAreCountedNotAnnounced() {
        KvIndex index = new KvIndex(2);
        for (int i = 0; i < 5; i++) {
            StateKey k = key(2, i);
            index.apply(KvEvent.Medium.DISK, k, true, 1, KvIndex.namespaceHex(k));
        }
        assertThat(index.size(KvEvent.Medium.DISK)).isEqualTo(2);
        assertThat(index.untracked()).isEqualTo(3);
    }
}
