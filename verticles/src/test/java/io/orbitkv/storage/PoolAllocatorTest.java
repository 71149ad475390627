package io.orbitkv.storage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

class PoolAllocatorTest {
    static final long MiB = 1 << 20;

    @Test
    void sizeClassesWasteAtMostAnEighthBeyondPageAlignment() {
        for (long length = 1; length < 64 * MiB; length += 4093 + length / 7) {
            long cls = PoolAllocator.sizeClassOf(length);
            long aligned = (length + 4095) / 4096 * 4096;
            assertThat(cls).isGreaterThanOrEqualTo(aligned);
            assertThat((double) (cls - aligned) / cls).as("waste for %d", length).isLessThanOrEqualTo(0.125);
            assertThat(cls % 4096).isZero();
        }
    }

    @Test
    void slotsNeverOverlapAndFreeingEverythingReturnsThePoolWhole() {
        PoolAllocator allocator = new PoolAllocator(256 * MiB, 2 * MiB);
        Random random = new Random(42);
        List<PoolAllocator.Slot> live = new ArrayList<>();
        long[] sizes = {4096, 60_000, 256 * 1024, 2 * MiB, 2 * MiB + 4096, 1_100_000, 40 * MiB};
        for (int step = 0; step < 20_000; step++) {
            if (live.isEmpty() || random.nextInt(3) != 0) {
                PoolAllocator.Slot slot = allocator.allocate(sizes[random.nextInt(sizes.length)]);
                if (slot != null) {
                    live.add(slot);
                }
            } else {
                allocator.free(live.remove(random.nextInt(live.size())));
            }
            if (step % 997 == 0) {
                assertDisjoint(live, allocator.poolBytes());
                assertThat(allocator.spanBytes() + allocator.freeBytes()).isEqualTo(allocator.poolBytes());
                assertThat(allocator.requestedBytes()).isLessThanOrEqualTo(allocator.slotBytes());
                assertThat(allocator.slotBytes()).isLessThanOrEqualTo(allocator.spanBytes());
            }
        }
        live.forEach(allocator::free);
        assertThat(allocator.spanBytes()).isZero();
        assertThat(allocator.requestedBytes()).isZero();
        assertThat(allocator.liveSlots()).isZero();
        assertThat(allocator.largestFreeRunBytes()).isEqualTo(256 * MiB);
    }

    private static void assertDisjoint(List<PoolAllocator.Slot> live, long poolBytes) {
        TreeMap<Long, Long> byOffset = new TreeMap<>();
        for (PoolAllocator.Slot s : live) {
            assertThat(s.offset() % 4096).isZero();
            assertThat(s.offset() + s.slotBytes()).isLessThanOrEqualTo(poolBytes);
            assertThat(byOffset.put(s.offset(), s.offset() + s.slotBytes())).isNull();
        }
        long end = 0;
        for (var e : byOffset.entrySet()) {
            assertThat(e.getKey()).isGreaterThanOrEqualTo(end);
            end = e.getValue();
        }
    }

    @Test
    void uniformPagesFillThePoolWithBoundedFragmentation() {
        PoolAllocator allocator = new PoolAllocator(64 * MiB, 2 * MiB);
        long page = 1_100_000; // an odd size: class 1.125 MiB, spans of 3 chunks hold 5 slots
        List<PoolAllocator.Slot> slots = new ArrayList<>();
        PoolAllocator.Slot slot;
        while ((slot = allocator.allocate(page)) != null) {
            slots.add(slot);
        }
        assertThat(allocator.fragmentation()).isLessThan(0.25);
        assertThat((double) slots.size() * page / allocator.poolBytes()).isGreaterThan(0.75);
        assertThat(slots.stream().map(PoolAllocator.Slot::generation).distinct().count()).isEqualTo(slots.size());
    }

    @Test
    void exhaustionReturnsNullAndAFreedSlotIsReusedUnderANewGeneration() {
        PoolAllocator allocator = new PoolAllocator(4 * MiB, 2 * MiB);
        PoolAllocator.Slot a = allocator.allocate(2 * MiB);
        PoolAllocator.Slot b = allocator.allocate(2 * MiB);
        assertThat(allocator.allocate(4096)).isNull();
        allocator.free(a);
        PoolAllocator.Slot c = allocator.allocate(2 * MiB);
        assertThat(c.offset()).isEqualTo(a.offset());
        assertThat(c.generation()).isNotEqualTo(a.generation());
        assertThatThrownBy(() -> allocator.free(a)).isInstanceOf(IllegalStateException.class);
        allocator.free(b);
        allocator.free(c);
        assertThat(allocator.freeBytes()).isEqualTo(4 * MiB);
    }

    @Test
    void badGeometryIsRefused() {
        assertThatThrownBy(() -> new PoolAllocator(3 * MiB, 2 * MiB)).hasMessageContaining("multiple");
        assertThatThrownBy(() -> new PoolAllocator(4 * MiB, 1000)).hasMessageContaining("4096");
        assertThatThrownBy(() -> new PoolAllocator(4 * MiB, 2 * MiB).allocate(0)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void strandedBytesAreMeasured() {
        PoolAllocator allocator = new PoolAllocator(16 * MiB, 2 * MiB);
        List<PoolAllocator.Slot> small = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            small.add(allocator.allocate(256 * 1024));
        }
        allocator.free(small.get(3));
        assertThat(allocator.strandedFreeBytes()).isEqualTo(256 * 1024);
    }
}
