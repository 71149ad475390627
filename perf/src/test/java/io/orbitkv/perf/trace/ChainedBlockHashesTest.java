package io.orbitkv.perf.trace;

import org.junit.jupiter.api.Test;

import java.util.Arrays;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ChainedBlockHashesTest {

    @Test
    void matchesVectorsComputedIndependently() {
        // Python: p = bytes(32); p = hashlib.sha256(p + struct.pack('>q', i)).digest() for i in 0, 1, 2
        byte[][] chain = ChainedBlockHashes.chain(new long[] {0, 1, 2});

        assertThat(Arrays.stream(chain).map(ChainedBlockHashes::toHex)).containsExactly(
                "2c34ce1df23b838c5abf2a7f6437cca3d3067ed509ff25f11df6b11b582b51eb",
                "e8fecd8dcb2e28ad05e0c2b354ec0bda4128826e01e8e4fdbc1069c612680c56",
                "5713993acb0e303505112690bcfb7a5e967b6483d47030c2aa77774985e60841");
        // The id is 8 bytes big-endian, not 4: 2^40 + 7 would collide with 7 if truncated.
        assertThat(ChainedBlockHashes.toHex(ChainedBlockHashes.chain(new long[] {(1L << 40) + 7})[0]))
                .isEqualTo("a3204716120609113ed02ef129c79548ec146d727066fa83c252ce0299ad0bdd");
    }

    @Test
    void equalPrefixesGiveEqualChainsAndTheSuffixDivergesWhereIdsDiffer() {
        byte[][] a = ChainedBlockHashes.chain(new long[] {10, 11, 12, 13});
        byte[][] b = ChainedBlockHashes.chain(new long[] {10, 11, 99, 13});

        assertThat(Arrays.stream(a)).hasSize(4).allSatisfy(hash -> assertThat(hash).hasSize(ChainedBlockHashes.HASH_BYTES));
        assertThat(a[0]).isEqualTo(b[0]);
        assertThat(a[1]).isEqualTo(b[1]);
        assertThat(a[2]).isNotEqualTo(b[2]);
        assertThat(a[3]).as("same id after a different block").isNotEqualTo(b[3]);
    }

    @Test
    void aDifferentFirstIdChangesEveryLaterHash() {
        long[] ids = {1, 2, 3, 4, 5, 6};
        long[] changed = ids.clone();
        changed[0] = 7;

        byte[][] original = ChainedBlockHashes.chain(ids);
        byte[][] altered = ChainedBlockHashes.chain(changed);

        for (int i = 0; i < ids.length; i++) {
            assertThat(altered[i]).as("block %d", i).isNotEqualTo(original[i]);
        }
    }

    @Test
    void continuingAChainEqualsHashingTheWholePrefix() {
        byte[][] whole = ChainedBlockHashes.chain(new long[] {3, 4, 5});
        byte[][] tail = ChainedBlockHashes.chain(whole[0], new long[] {4, 5});

        assertThat(tail[0]).isEqualTo(whole[1]);
        assertThat(tail[1]).isEqualTo(whole[2]);
        assertThat(ChainedBlockHashes.next(ChainedBlockHashes.root(), 3)).isEqualTo(whole[0]);
        assertThat(ChainedBlockHashes.chain(new long[] {3, 4, 5})).as("deterministic").isDeepEqualTo(whole);
    }

    @Test
    void rejectsAPreviousHashOfTheWrongLength() {
        assertThatThrownBy(() -> ChainedBlockHashes.next(new byte[31], 1))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("31 bytes");
    }
}
