package io.orbitkv.perf.load;

import com.google.protobuf.ByteString;
import io.orbitkv.client.sim.SyntheticKv;
import io.orbitkv.perf.engine.SimulatedEngine;
import io.orbitkv.perf.trace.ChainedBlockHashes;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;

/**
 * Requests with partial-prefix reuse: a catalog of shared prefixes (system prompts, documents) whose popularity is
 * Zipf-skewed; each request takes a prefix, shares a leading part of it, and extends it with blocks of its own.
 *
 * <ul>
 *   <li>Prefix choice: Zipf with exponent {@code zipfExponent} over {@code prefixes} entries (rank 1 most popular).
 *   <li>Shared length: with probability {@link #FULL_PREFIX_PROBABILITY} the whole prefix (same document, new question),
 *       otherwise uniform in [1, prefix length] (a conversation that branched early).
 *   <li>Extension: uniform in [uniqueMin, uniqueMax] blocks no other request has (the request's own tokens).
 * </ul>
 *
 * Block hashes chain like an engine's: the prefix's chain is {@link SyntheticKv#chain} of the prefix's seed, and the
 * extension continues from the last shared block's hash ({@link ChainedBlockHashes}), so a block's identity depends on
 * its whole prefix. Page content is SyntheticKv's stream for (prefix seed or request seed, position): any engine can
 * verify a page another engine published.
 *
 * <p>Thread-safe: the catalog is immutable; callers bring their own random source.
 */
final class PrefixWorkload {
    static final double FULL_PREFIX_PROBABILITY = 0.5;
    private static final long PREFIX_SEED_BASE = 0x0B17_0000_0000L;
    private static final long UNIQUE_SEED_BASE = 1L << 56;
    /** Offline-simulation ids: prefix blocks (prefix << 24 | position); unique blocks above {@link #UNIQUE_ID_BASE}. */
    private static final long UNIQUE_ID_BASE = 1L << 62;

    /** One generated request. */
    record Request(long id, int prefix, int sharedBlocks, List<ByteString> chain, long prefixSeed, long uniqueSeed,
                   long[] offlineIds) implements SimulatedEngine.PageSeeds {
        @Override
        public long seedAt(int position) {
            return position < sharedBlocks ? prefixSeed : uniqueSeed;
        }
    }

    private final List<List<ByteString>> prefixChains;
    private final double[] zipfCdf;
    private final int uniqueMin;
    private final int uniqueMax;

    PrefixWorkload(int prefixes, int minBlocks, int maxBlocks, double zipfExponent, int uniqueMin, int uniqueMax, long seed) {
        if (prefixes < 1 || minBlocks < 1 || maxBlocks < minBlocks || uniqueMin < 0 || uniqueMax < uniqueMin) {
            throw new IllegalArgumentException("workload shape: prefixes >= 1, 1 <= min blocks <= max blocks, 0 <= unique min <= unique max");
        }
        SplittableRandom random = new SplittableRandom(seed);
        prefixChains = new ArrayList<>(prefixes);
        for (int p = 0; p < prefixes; p++) {
            int length = minBlocks + random.nextInt(maxBlocks - minBlocks + 1);
            prefixChains.add(List.copyOf(SyntheticKv.chain(PREFIX_SEED_BASE + p, length)));
        }
        zipfCdf = new double[prefixes];
        double sum = 0;
        for (int rank = 1; rank <= prefixes; rank++) {
            sum += 1.0 / Math.pow(rank, zipfExponent);
            zipfCdf[rank - 1] = sum;
        }
        for (int i = 0; i < prefixes; i++) {
            zipfCdf[i] /= sum;
        }
        this.uniqueMin = uniqueMin;
        this.uniqueMax = uniqueMax;
    }

    /** Blocks in the prefix catalog: the shared working set. */
    long catalogBlocks() {
        return prefixChains.stream().mapToLong(List::size).sum();
    }

    /**
     * The first Zipf rank (0-based) of the "cold tail": the most popular prefixes, taken in rank order, whose blocks
     * add up to {@code dramPages} fill the DRAM pool; ranks from the returned one on are those a Zipf stream leaves
     * to be evicted. Returns {@code prefixes - 1} at most, so the tail is never empty.
     */
    int coldTailStart(long dramPages) {
        long blocks = 0;
        for (int rank = 0; rank < prefixChains.size(); rank++) {
            blocks += prefixChains.get(rank).size();
            if (blocks > dramPages) {
                return rank;
            }
        }
        return prefixChains.size() - 1;
    }

    /** Set once before the engines start ({@link LoadBench}); read by {@code next} with a cold mix. */
    int coldTailStart;

    Request next(long requestId, SplittableRandom random) {
        return next(requestId, random, 0, 0);
    }

    /**
     * With probability {@code coldMix} the prefix is drawn uniformly from the cold tail (ranks {@code coldStart} and
     * beyond, see {@link #coldTailStart}), otherwise from the Zipf distribution. {@code coldMix = 0} draws exactly the
     * same stream as {@link #next(long, SplittableRandom)}.
     */
    Request next(long requestId, SplittableRandom random, double coldMix, int coldStart) {
        int prefix;
        if (coldMix > 0 && random.nextDouble() < coldMix) {
            prefix = coldStart + random.nextInt(prefixChains.size() - coldStart);
        } else {
            int index = Arrays.binarySearch(zipfCdf, random.nextDouble());
            prefix = Math.min(prefixChains.size() - 1, index >= 0 ? index : -index - 1);
        }
        List<ByteString> prefixChain = prefixChains.get(prefix);
        int shared = random.nextDouble() < FULL_PREFIX_PROBABILITY ? prefixChain.size() : 1 + random.nextInt(prefixChain.size());
        int unique = uniqueMin + random.nextInt(uniqueMax - uniqueMin + 1);
        List<ByteString> chain = new ArrayList<>(shared + unique);
        chain.addAll(prefixChain.subList(0, shared));
        long[] ids = new long[shared + unique];
        for (int i = 0; i < shared; i++) {
            ids[i] = ((long) prefix << 24) | i;
        }
        long[] uniqueIds = new long[unique];
        for (int j = 0; j < unique; j++) {
            uniqueIds[j] = UNIQUE_ID_BASE + requestId * 4096 + j;
            ids[shared + j] = uniqueIds[j];
        }
        byte[][] tail = ChainedBlockHashes.chain(chain.get(shared - 1).toByteArray(), uniqueIds);
        for (byte[] hash : tail) {
            chain.add(ByteString.copyFrom(hash));
        }
        return new Request(requestId, prefix, shared, chain, PREFIX_SEED_BASE + prefix, UNIQUE_SEED_BASE + requestId, ids);
    }
}
