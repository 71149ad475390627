package io.orbitkv.perf.trace;

import java.util.Arrays;

/**
 * One request of a Mooncake trace.
 *
 * <p>{@code hashIds} holds one id per {@link #BLOCK_TOKENS}-token prefix block; ids already encode the prefix chain
 * (equal ids at the same position mean equal prefixes up to and including that block). The array is owned by the
 * record: callers must not modify it. Equality compares the array contents, not its identity.
 *
 * @param timestampMs  arrival time in milliseconds from the start of the trace
 * @param inputLength  prompt length in tokens
 * @param outputLength generated length in tokens
 * @param hashIds      prefix block ids, first block first
 */
public record TraceRequest(long timestampMs, int inputLength, int outputLength, long[] hashIds) {

    /** Tokens per hash id in the Mooncake FAST'25 traces (the last block of a prompt is partial). */
    public static final int BLOCK_TOKENS = 512;

    public int blockCount() {
        return hashIds.length;
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof TraceRequest that
                && timestampMs == that.timestampMs
                && inputLength == that.inputLength
                && outputLength == that.outputLength
                && Arrays.equals(hashIds, that.hashIds);
    }

    @Override
    public int hashCode() {
        return Long.hashCode(timestampMs) * 31 * 31 * 31
                + inputLength * 31 * 31
                + outputLength * 31
                + Arrays.hashCode(hashIds);
    }

    @Override
    public String toString() {
        return "TraceRequest[timestampMs=" + timestampMs + ", inputLength=" + inputLength
                + ", outputLength=" + outputLength + ", blocks=" + hashIds.length + "]";
    }
}
