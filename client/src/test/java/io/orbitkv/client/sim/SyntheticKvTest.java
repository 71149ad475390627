package io.orbitkv.client.sim;

import static org.assertj.core.api.Assertions.assertThat;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

class SyntheticKvTest {
    @Test
    void verifyFindsExactlyTheFirstWrongByteIncludingAnOddTail() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment page = arena.allocate(10_001);
            SyntheticKv.fill(page, 7, 1, 3);
            assertThat(SyntheticKv.verify(page, 7, 1, 3)).isEqualTo(-1);
            assertThat(SyntheticKv.verify(page, 7, 1, 4)).as("another position is another stream").isZero();
            page.set(ValueLayout.JAVA_BYTE, 10_000, (byte) (page.get(ValueLayout.JAVA_BYTE, 10_000) ^ 1));
            assertThat(SyntheticKv.verify(page, 7, 1, 3)).isEqualTo(10_000);
            page.set(ValueLayout.JAVA_BYTE, 4_099, (byte) (page.get(ValueLayout.JAVA_BYTE, 4_099) ^ 1));
            assertThat(SyntheticKv.verify(page, 7, 1, 3)).as("reported at the start of its word").isEqualTo(4_096);
        }
    }

    @Test
    void chainsAreDeterministicAndPrefixStable() {
        assertThat(SyntheticKv.chain(5, 8)).isEqualTo(SyntheticKv.chain(5, 8));
        assertThat(SyntheticKv.chain(5, 8).subList(0, 3)).isEqualTo(SyntheticKv.chain(5, 3));
        assertThat(SyntheticKv.chain(5, 3)).doesNotContainAnyElementsOf(SyntheticKv.chain(6, 3));
    }
}
