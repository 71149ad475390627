package io.orbitkv.client.hash;

import static org.assertj.core.api.Assertions.assertThat;

import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/** Golden vectors shared with clients/python/tests/test_hashing.py: Java and Python name the same pages. */
class BlockHashesTest {
    private static final HexFormat HEX = HexFormat.of();

    private static int[] tokens(int count) {
        return IntStream.range(0, count).toArray();
    }

    @Test
    void cborIsTheCanonicalEncodingVllmHashes() throws Exception {
        byte[] parent = new byte[32];
        for (int i = 0; i < 32; i++) {
            parent[i] = (byte) i;
        }
        int[] tokens = {1, 23, 24, 255, 256, 65536};
        String expected = "835820" + HEX.formatHex(parent) + "86" + "01" + "17" + "1818" + "18ff" + "190100" + "1a00010000" + "f6";
        byte[] encoded = BlockHashes.Cbor.encode(java.util.Arrays.asList(parent, List.of(1L, 23L, 24L, 255L, 256L, 65536L), null));
        assertThat(HEX.formatHex(encoded)).isEqualTo(expected);
        assertThat(BlockHashes.hashBlock(parent, tokens, 0, tokens.length, null))
                .isEqualTo(MessageDigest.getInstance("SHA-256").digest(HEX.parseHex(expected)));
    }

    @Test
    void noneHashIsSha256OfTheSeedString() {
        assertThat(HEX.formatHex(BlockHashes.noneHash("0")))
                .isEqualTo("4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e");
    }

    @Test
    void goldenChain() {
        List<byte[]> chain = BlockHashes.chain(tokens(40), 16, "0");
        assertThat(chain).hasSize(2);
        assertThat(HEX.formatHex(chain.get(0))).isEqualTo("d830de3d42c00f25a2949b5d12d98642664a44872c1614c5b0147556276afc9c");
        assertThat(HEX.formatHex(chain.get(1))).isEqualTo("fedd9e4abebebbe6f6cf96b682f08d316063fe2f22a5c552192dd62904fcccac");
    }

    @Test
    void goldenWithExtraKeys() {
        List<byte[]> chain = BlockHashes.chain(tokens(32), 16, "42", java.util.Arrays.asList(List.of("lora-a", 7L), null));
        assertThat(HEX.formatHex(chain.get(0))).isEqualTo("951234d5b123ec6acae4492ff66bb1092468882a96a37e5a414c8e344c51f951");
        assertThat(HEX.formatHex(chain.get(1))).isEqualTo("6c8e49de3ebef535a8e356734b46b5b96061e74b6a70c803616d1a179b646c82");
    }
}
