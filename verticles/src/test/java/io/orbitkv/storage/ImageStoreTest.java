package io.orbitkv.storage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.orbitkv.common.OrbitException;
import io.orbitkv.protocol.engine.ErrorReason;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import io.orbitkv.model.StateKey;
import io.orbitkv.model.ImageState;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.SlotGrant;
import io.orbitkv.model.AllocateResult;
import io.orbitkv.model.PositionedKey;
import io.orbitkv.model.GroupProbe;
import io.orbitkv.model.GroupPresence;
import io.orbitkv.model.ExactPin;
import io.orbitkv.model.SsdCopy;
import io.orbitkv.model.Materialization;
import io.orbitkv.model.KeyGeneration;
import io.orbitkv.model.SsdReservation;
import io.orbitkv.model.ResidencyEvent;
import io.orbitkv.model.ResidencyPage;

/** The storage role's state machine, driven directly (no event bus). */
class ImageStoreTest {
    static final long PAGE = 1 << 20;
    static final byte[] NS = new byte[16];
    final Arena arena = Arena.ofConfined();
    final MemorySegment pool = arena.allocate(8 * PAGE, 4096);
    final List<ImageRef> evicted = new ArrayList<>();
    final ResidencyStream residency = new ResidencyStream(7, 1024);
    final ImageStore store = new ImageStore(new PoolAllocator(8 * PAGE, 2 * PAGE), pool, 6 * PAGE, residency,
            new ImageStore.Listener() {
                @Override
                public void onEvicted(ImageRef image) {
                    evicted.add(image);
                }
            });

    @AfterEach
    void close() {
        arena.close();
    }

    static StateKey key(int i) {
        return StateKey.of(NS, 0, new byte[] {(byte) i, 1});
    }

    static List<StateKey> keys(int from, int to) {
        List<StateKey> keys = new ArrayList<>();
        for (int i = from; i < to; i++) {
            keys.add(key(i));
        }
        return keys;
    }

    AllocateResult publish(int from, int to) {
        List<StateKey> keys = keys(from, to);
        AllocateResult r = store.allocate(1, keys, Collections.nCopies(keys.size(), PAGE));
        store.seal(1, r.publishId(), List.of(), List.of());
        return r;
    }

    @Test
    void lruEvictsTheLeastRecentlyUsedUnpinnedImageFirstAndTheStreamSaysSo() {
        publish(0, 4);
        publish(4, 8);
        // Touch 0 so that 1 becomes the eldest.
        store.unpin(store.pinExact(List.of(keys(0, 1))).pinned());
        publish(8, 9);
        assertThat(evicted).extracting(ImageRef::key).containsExactly(key(1));
        assertThat(store.stateOf(key(1))).isNull();
        assertThat(store.stateOf(key(0))).isEqualTo(ImageState.SEALED);
        ResidencyPage events = residency.since(0, 100);
        assertThat(events.events()).extracting(ResidencyEvent::change).contains(ResidencyEvent.Change.DRAM_REMOVED);
        assertThat(events.lastSequence()).isEqualTo(10); // 9 adds + 1 removal
    }

    @Test
    void pinnedAndWritingImagesAreNeverEvicted() {
        publish(0, 4);
        ExactPin pinned = store.pinExact(List.of(keys(0, 4)));
        assertThat(pinned.complete()).isTrue();
        assertThat(pinned.pinned().get(0)).hasSize(4);
        AllocateResult writing = store.allocate(2, keys(4, 6), List.of(PAGE, PAGE));
        // 6 of 8 pages are pinned or being written; two more fit, the third must fail without evicting them.
        AllocateResult more = store.allocate(3, keys(6, 8), List.of(PAGE, PAGE));
        assertThatThrownBy(() -> store.allocate(3, keys(8, 9), List.of(PAGE)))
                .isInstanceOfSatisfying(OrbitException.class, e -> assertThat(e.reason()).isEqualTo(ErrorReason.POOL_EXHAUSTED));
        assertThat(evicted).isEmpty();
        store.unpin(pinned.pinned());
        store.abort(2, writing.publishId());
        store.abort(3, more.publishId());
        assertThat(store.pinnedImages()).isZero();
        assertThat(store.allocator().requestedBytes()).isEqualTo(4 * PAGE);
    }

    static List<PositionedKey> positioned(int from, int to) {
        List<PositionedKey> keys = new ArrayList<>();
        for (int i = from; i < to; i++) {
            keys.add(new PositionedKey(i, key(i)));
        }
        return keys;
    }

    @Test
    void probeTellsSealedFromWritingAndPinExactIsAllOrNothing() {
        publish(0, 3);
        AllocateResult writing = store.allocate(1, keys(3, 4), List.of(PAGE));
        GroupPresence presence = store.probe(List.of(new GroupProbe(0, positioned(0, 6)))).get(0);
        assertThat(presence.sealed().cardinality()).isEqualTo(3);
        assertThat(presence.sealed().nextClearBit(0)).isEqualTo(3);
        assertThat(presence.writing().stream().boxed().toList()).containsExactly(3);
        assertThat(store.pinnedImages()).as("a probe pins nothing").isZero();
        ExactPin partial = store.pinExact(List.of(keys(0, 4)));
        assertThat(partial.complete()).isFalse();
        assertThat(partial.missing()).isEqualTo(key(3));
        assertThat(store.pinnedImages()).as("all or nothing").isZero();
        ExactPin three = store.pinExact(List.of(keys(0, 3)));
        assertThat(three.pinnedBytes()).isEqualTo(3 * PAGE);
        store.unpin(three.pinned());
        store.seal(1, writing.publishId(), List.of(), List.of());
        GroupPresence after = store.probe(List.of(new GroupProbe(0, positioned(0, 6)))).get(0);
        assertThat(after.sealed().cardinality()).isEqualTo(4);
        assertThat(after.writing().isEmpty()).isTrue();
        ExactPin four = store.pinExact(List.of(keys(0, 4)));
        assertThat(four.complete()).isTrue();
        store.unpin(four.pinned());
        assertThat(store.pinnedImages()).isZero();
    }

    @Test
    void aResyncOfTheSsdMirrorForgetsWhatTheSsdRoleNoLongerHas() {
        store.ssdAdded(key(1), 11, PAGE);
        store.ssdAdded(key(2), 12, PAGE);
        store.ssdAdded(key(3), 13, PAGE);
        long before = residency.lastSequence();
        // A missed SSD_REMOVED of keys 1 and 3 (the hand-off was full): the resync names only key 2.
        store.ssdRetainOnly(Set.of(key(2)));
        assertThat(store.ssdKeys()).isEqualTo(1);
        assertThat(store.ssdCopyOf(key(2))).isNotNull();
        assertThat(residency.since(before, 10).events()).extracting(ResidencyEvent::change)
                .containsExactly(ResidencyEvent.Change.SSD_REMOVED, ResidencyEvent.Change.SSD_REMOVED);
    }

    @Test
    void unpinningAListIsAllOrNothing() {
        publish(0, 3);
        ExactPin pin = store.pinExact(List.of(keys(0, 3)));
        assertThat(store.pinnedImages()).isEqualTo(3);
        // Injected failure: the list names a reference that is not pinned (an older generation of key 2) after two
        // good ones. Today's failure mode would drop the first two pins and then throw.
        ImageRef stale = new ImageRef(key(2), pin.pinned().get(0).get(2).offset(), PAGE,
                pin.pinned().get(0).get(2).generation() + 1);
        List<ImageRef> bad = List.of(pin.pinned().get(0).get(0), pin.pinned().get(0).get(1), stale);
        assertThatThrownBy(() -> store.unpin(List.of(bad))).isInstanceOf(IllegalStateException.class);
        assertThat(store.pinnedImages()).as("a failed unpin drops no pin").isEqualTo(3);
        // Naming one image more often than it is pinned fails the same way.
        List<ImageRef> twice = List.of(pin.pinned().get(0).get(0), pin.pinned().get(0).get(0));
        assertThatThrownBy(() -> store.unpin(List.of(twice))).isInstanceOf(IllegalStateException.class);
        assertThat(store.pinnedImages()).isEqualTo(3);
        store.unpin(pin.pinned());
        assertThat(store.pinnedImages()).isZero();
    }

    @Test
    void aChecksumMismatchAbortsThePublishAndAMatchSeals() {
        AllocateResult r = store.allocate(1, keys(0, 1), List.of(PAGE));
        MemorySegment slot = pool.asSlice(r.slots().get(0).ref().offset(), PAGE);
        slot.fill((byte) 9);
        CRC32C crc = new CRC32C();
        crc.update(slot.asByteBuffer());
        assertThatThrownBy(() -> store.seal(1, r.publishId(), List.of((int) crc.getValue() + 1), List.of()))
                .isInstanceOfSatisfying(OrbitException.class, e -> assertThat(e.reason()).isEqualTo(ErrorReason.MALFORMED_REQUEST));
        assertThat(store.stateOf(key(0))).isNull();
        assertThat(store.allocator().spanBytes()).isZero();
        AllocateResult again = store.allocate(1, keys(0, 1), List.of(PAGE));
        MemorySegment slot2 = pool.asSlice(again.slots().get(0).ref().offset(), PAGE);
        slot2.fill((byte) 9);
        assertThat(store.seal(1, again.publishId(), List.of((int) crc.getValue()), List.of()).sealedPages()).isEqualTo(1);
    }

    @Test
    void budgetsOwnershipAndDeparturesAreEnforced() {
        assertThatThrownBy(() -> store.allocate(1, keys(0, 7), Collections.nCopies(7, PAGE)))
                .isInstanceOfSatisfying(OrbitException.class, e -> assertThat(e.reason()).isEqualTo(ErrorReason.BUDGET_EXCEEDED));
        assertThat(store.allocator().spanBytes()).as("a refused publish leaves nothing behind").isZero();
        AllocateResult r = store.allocate(1, keys(0, 2), List.of(PAGE, PAGE));
        assertThatThrownBy(() -> store.seal(2, r.publishId(), List.of(), List.of()))
                .isInstanceOfSatisfying(OrbitException.class, e -> assertThat(e.reason()).isEqualTo(ErrorReason.UNKNOWN_PUBLISH));
        // Same keys again while being written: nothing to write.
        assertThat(store.allocate(2, keys(0, 2), List.of(PAGE, PAGE)).slots()).noneMatch(SlotGrant::allocated);
        assertThat(store.releaseInstance(1, 100)).isEqualTo(1);
        assertThat(store.stateOf(key(0))).as("the key leaves the index at once").isNull();
        assertThat(store.quarantinedBytes()).as("the departed writer's slots are held").isEqualTo(2 * PAGE);
        store.endQuarantine(99);
        assertThat(store.allocator().requestedBytes()).isEqualTo(2 * PAGE);
        store.endQuarantine(100);
        assertThat(store.quarantinedBytes()).isZero();
        assertThat(store.allocator().spanBytes()).isZero();
        assertThatThrownBy(() -> store.seal(1, r.publishId(), List.of(), List.of()))
                .isInstanceOfSatisfying(OrbitException.class, e -> assertThat(e.reason()).isEqualTo(ErrorReason.UNKNOWN_PUBLISH));
    }

    /** Holds survive any pressure until their time; then the slots are reusable like any other. */
    @Test
    void slotsOfAnEndedSessionAreNotReusedUntilTheirQuarantineEnds() {
        publish(0, 2);
        ExactPin leased = store.pinExact(List.of(keys(0, 2)));
        AllocateResult open = store.allocate(2, keys(2, 3), List.of(PAGE));
        long openOffset = open.slots().get(0).ref().offset();
        // Instance 2's session ends at t=0 with a lease on 0..1 and an open publish of 2: hold until t=1000.
        assertThat(store.unpinIntoQuarantine(leased.pinned(), 1000)).isEqualTo(2);
        assertThat(store.releaseInstance(2, 1000)).isEqualTo(1);
        assertThat(store.pinnedImages()).as("lease pins are gone").isZero();
        assertThat(store.quarantinedSlots()).isEqualTo(3);
        assertThat(store.quarantinedBytes()).isEqualTo(3 * PAGE);
        // Fill the pool over and over: the five free slots cycle, the three held ones never move.
        List<Long> reused = new ArrayList<>();
        for (int round = 0; round < 4; round++) {
            for (int i = 0; i < 5; i++) {
                AllocateResult r = store.allocate(1, keys(10 + round * 5 + i, 11 + round * 5 + i), List.of(PAGE));
                reused.add(r.slots().get(0).ref().offset());
                store.seal(1, r.publishId(), List.of(), List.of());
            }
        }
        assertThat(reused).doesNotContain(leased.pinned().get(0).get(0).offset(), leased.pinned().get(0).get(1).offset(), openOffset);
        assertThat(store.stateOf(key(0))).as("a held image stays resident").isEqualTo(ImageState.SEALED);
        assertThat(store.endQuarantine(999)).isZero();
        assertThat(store.endQuarantine(1000)).isEqualTo(3);
        assertThat(store.quarantinedSlots()).isZero();
        assertThat(store.quarantineEvents()).isEqualTo(3);
        // Now the pool cycles through all eight slots again.
        List<Long> after = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            AllocateResult r = store.allocate(1, keys(50 + i, 51 + i), List.of(PAGE));
            after.add(r.slots().get(0).ref().offset());
            store.seal(1, r.publishId(), List.of(), List.of());
        }
        assertThat(after).contains(leased.pinned().get(0).get(0).offset(), openOffset);
        assertThat(store.stateOf(key(0))).as("evictable again once released").isNull();
    }

    @Test
    void writtenDescriptorsMustMatchAndStayInsideThePool() {
        AllocateResult r = store.allocate(1, keys(0, 1), List.of(PAGE));
        ImageRef granted = r.slots().get(0).ref();
        assertThatThrownBy(() -> store.seal(1, r.publishId(), List.of(),
                List.of(new ImageRef(null, 8 * PAGE, PAGE, granted.generation()))))
                .isInstanceOfSatisfying(OrbitException.class, e -> assertThat(e.reason()).isEqualTo(ErrorReason.DESCRIPTOR_OUTSIDE_POOL));
        assertThatThrownBy(() -> store.seal(1, r.publishId(), List.of(),
                List.of(new ImageRef(null, granted.offset(), PAGE, granted.generation() + 1))))
                .isInstanceOfSatisfying(OrbitException.class, e -> assertThat(e.reason()).isEqualTo(ErrorReason.MALFORMED_REQUEST));
        assertThat(store.seal(1, r.publishId(), List.of(), List.of(granted)).sealedPages()).isEqualTo(1);
    }

    @Test
    void residencyStreamReportsGapsBeyondItsBound() {
        ResidencyStream stream = new ResidencyStream(1, 4);
        for (int i = 0; i < 10; i++) {
            stream.append(ResidencyEvent.Change.DRAM_ADDED, key(i), i);
        }
        ResidencyPage fromStart = stream.since(0, 100);
        assertThat(fromStart.gap()).isTrue();
        assertThat(fromStart.events()).extracting(ResidencyEvent::sequence).containsExactly(7L, 8L, 9L, 10L);
        ResidencyPage recent = stream.since(8, 100);
        assertThat(recent.gap()).isFalse();
        assertThat(recent.events()).extracting(ResidencyEvent::sequence).containsExactly(9L, 10L);
    }

    @Test
    void releasingAPeerStagingFreesTheReadBackPagesNobodyElseHoldsAndKeepsTheirSsdEvidence() {
        store.ssdAdded(key(1), 21, PAGE);
        store.ssdAdded(key(2), 22, PAGE);
        SsdReservation reserved = store.reserveFromSsd(List.of(new KeyGeneration(key(1), 21),
                new KeyGeneration(key(2), 22)));
        assertThat(reserved.complete()).isTrue();
        List<ImageRef> staged = new ArrayList<>();
        for (Materialization m : reserved.reserved()) {
            staged.add(store.finishMaterializationPinned(m.image(), 7));
        }
        assertThat(store.pinnedImages()).isEqualTo(2);
        // Someone else (a local query) pins key 2 meanwhile: it stays, as an ordinary cached image.
        ExactPin other = store.pinExact(List.of(keys(2, 3)));
        assertThat(store.releaseStaged(staged)).isEqualTo(1);
        assertThat(store.stateOf(key(1))).isNull();
        assertThat(store.stateOf(key(2))).isEqualTo(ImageState.SEALED);
        assertThat(store.ssdCopyOf(key(1))).isEqualTo(new SsdCopy(21, PAGE));
        assertThat(store.pinnedImages()).isEqualTo(1);
        // A second release of the same staging is refused and changes nothing.
        assertThatThrownBy(() -> store.releaseStaged(staged)).isInstanceOf(IllegalStateException.class);
        assertThat(store.stateOf(key(2))).isEqualTo(ImageState.SEALED);
        store.unpin(other.pinned());
        assertThat(store.pinnedImages()).isZero();
        // A published (not read-back) image is never freed by a staging release.
        publish(5, 6);
        List<ImageRef> published = store.pinExact(List.of(keys(5, 6))).pinned().getFirst();
        assertThat(store.releaseStaged(published)).isZero();
        assertThat(store.stateOf(key(5))).isEqualTo(ImageState.SEALED);
    }
}
