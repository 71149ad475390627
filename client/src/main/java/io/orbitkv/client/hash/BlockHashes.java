package io.orbitkv.client.hash;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.List;

/**
 * Chained block hashes exactly as vLLM computes them with its {@code sha256_cbor} prefix-cache hash, and as the Python
 * client ({@code clients/python/orbitkv/hashing.py}) does, so a Java tool and a Python engine address the same pages:
 *
 * <pre>
 *   NONE_HASH   = SHA-256(CBOR(seed))                          seed = the string value of PYTHONHASHSEED
 *   hash(i)     = SHA-256(CBOR([parent, [token, ...], extra]))  parent = hash(i-1), or NONE_HASH for block 0
 * </pre>
 *
 * where CBOR is the canonical (shortest-form) encoding {@code cbor2.dumps(value, canonical=True)} produces for these
 * types, {@code extra} is null unless the block carries extra keys, and only full blocks are hashed. Followed from
 * vLLM's {@code vllm/utils/hashing.py} and {@code vllm/v1/core/kv_cache_utils.py} (commit 003df2961dd8). Golden
 * vectors are asserted here and in {@code clients/python/tests/test_hashing.py}.
 */
public final class BlockHashes {
    private BlockHashes() {}

    /** The parent of block 0 for a given {@code PYTHONHASHSEED} value. */
    public static byte[] noneHash(String seed) {
        return sha256(Cbor.encode(seed));
    }

    /**
     * One block's hash. {@code extraKeys} is null or a list of CBOR-encodable values (String, Long/Integer, byte[],
     * List, null) that vLLM puts in the block's extra keys (LoRA name, multimodal identifiers, cache salt).
     */
    public static byte[] hashBlock(byte[] parent, int[] tokens, int from, int to, List<?> extraKeys) {
        List<Object> tokenList = new ArrayList<>(to - from);
        for (int i = from; i < to; i++) {
            tokenList.add((long) tokens[i]);
        }
        List<Object> triple = new ArrayList<>(3);
        triple.add(parent);
        triple.add(tokenList);
        triple.add(extraKeys);
        return sha256(Cbor.encode(triple));
    }

    /** The hashes of every full block of {@code tokens}; {@code extraKeys} (nullable) gives each block's extra keys. */
    public static List<byte[]> chain(int[] tokens, int blockSize, String seed, List<? extends List<?>> extraKeys) {
        if (blockSize <= 0) {
            throw new IllegalArgumentException("block size must be positive, got " + blockSize);
        }
        List<byte[]> hashes = new ArrayList<>(tokens.length / blockSize);
        byte[] parent = noneHash(seed);
        for (int block = 0; block < tokens.length / blockSize; block++) {
            List<?> extra = extraKeys != null && block < extraKeys.size() ? extraKeys.get(block) : null;
            parent = hashBlock(parent, tokens, block * blockSize, (block + 1) * blockSize, extra);
            hashes.add(parent);
        }
        return hashes;
    }

    public static List<byte[]> chain(int[] tokens, int blockSize, String seed) {
        return chain(tokens, blockSize, seed, null);
    }

    private static byte[] sha256(byte[] input) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(input);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JDK has SHA-256", e);
        }
    }

    /** The canonical CBOR subset block hashing needs: unsigned/negative integers, byte and text strings, arrays, null. */
    static final class Cbor {
        private Cbor() {}

        static byte[] encode(Object value) {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            write(out, value);
            return out.toByteArray();
        }

        private static void write(ByteArrayOutputStream out, Object value) {
            switch (value) {
                case null -> out.write(0xf6);
                case Boolean b -> out.write(b ? 0xf5 : 0xf4);
                case Long l -> writeInteger(out, l);
                case Integer i -> writeInteger(out, i);
                case byte[] bytes -> {
                    head(out, 2, bytes.length);
                    out.writeBytes(bytes);
                }
                case String s -> {
                    byte[] utf8 = s.getBytes(StandardCharsets.UTF_8);
                    head(out, 3, utf8.length);
                    out.writeBytes(utf8);
                }
                case List<?> list -> {
                    head(out, 4, list.size());
                    for (Object element : list) {
                        write(out, element);
                    }
                }
                default -> throw new IllegalArgumentException("no canonical CBOR encoding for " + value.getClass().getName());
            }
        }

        private static void writeInteger(ByteArrayOutputStream out, long value) {
            if (value >= 0) {
                head(out, 0, value);
            } else {
                head(out, 1, -1 - value);
            }
        }

        /** Major type and argument in the shortest form (canonical CBOR, RFC 8949 section 4.2.1). */
        private static void head(ByteArrayOutputStream out, int major, long argument) {
            int type = major << 5;
            if (argument < 24) {
                out.write(type | (int) argument);
            } else if (argument < 0x100) {
                out.write(type | 24);
                out.write((int) argument);
            } else if (argument < 0x10000) {
                out.write(type | 25);
                out.write((int) (argument >>> 8));
                out.write((int) argument & 0xff);
            } else if (argument < 0x1_0000_0000L) {
                out.write(type | 26);
                for (int shift = 24; shift >= 0; shift -= 8) {
                    out.write((int) (argument >>> shift) & 0xff);
                }
            } else {
                out.write(type | 27);
                for (int shift = 56; shift >= 0; shift -= 8) {
                    out.write((int) (argument >>> shift) & 0xff);
                }
            }
        }
    }
}
