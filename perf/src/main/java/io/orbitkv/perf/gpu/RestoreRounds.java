package io.orbitkv.perf.gpu;

import com.google.protobuf.ByteString;
import io.orbitkv.perf.report.KeyedContent;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * The round protocol of {@code bench gpu-restore}, apart from the copies, so that it runs (and is tested) without a
 * device. Per round both sides run once, the Manager-executed restore first in even rounds and the engine's own
 * lease-then-copy first in odd ones. Before each side the destination is poisoned and read back: a page that still
 * holds its expected bytes after the poison could not fail its check, so it is counted as a poison failure and not as
 * verified. After each side the destination is read back and every byte of every page is compared with the bytes
 * derived from the page's key ({@link KeyedContent}): a side that copied nothing, or the wrong pages, mismatches in
 * every round, not only the first.
 *
 * <p>{@code verified_pages} in the result counts exactly the pages compared after a poison that took; mismatches are
 * counted per side. A side that throws ends the rounds with its message as the result's error.
 */
final class RestoreRounds {
    /** What the destination holds after a poison: never a valid page. */
    static final byte POISON = (byte) 0xA5;

    /** The destination (device memory in the bench, host memory in the tests). */
    interface Destination {
        /** Overwrites the whole destination with {@link #POISON}. */
        void poison();

        /** Copies the whole destination into {@code host} (same size). */
        void readBack(MemorySegment host);
    }

    /** One side of a round; returns its timed nanoseconds. */
    @FunctionalInterface
    interface Side {
        long run(int round) throws Exception;
    }

    /** What the rounds measured and found; {@link #toJson} is what the engine process prints. */
    record Result(List<Long> restoreNanos, List<Long> baselineNanos, long verifiedPages, long restoreMismatches,
                  long baselineMismatches, long poisonFailures, int restoreFirstRounds, List<String> details,
                  String error) {
        JsonObject toJson() {
            JsonObject json = new JsonObject().put("restore_nanos", new JsonArray(restoreNanos))
                    .put("baseline_nanos", new JsonArray(baselineNanos)).put("verified_pages", verifiedPages)
                    .put("restore_mismatches", restoreMismatches).put("baseline_mismatches", baselineMismatches)
                    .put("poison_failures", poisonFailures).put("restore_first_rounds", restoreFirstRounds)
                    .put("mismatch_details", new JsonArray(details));
            return error == null ? json : json.put("error", error);
        }
    }

    /** At most this many mismatch descriptions are kept (the counts are complete). */
    private static final int MAX_DETAILS = 8;

    private RestoreRounds() {}

    /** The restore goes first in even rounds, the baseline in odd ones. */
    static boolean restoreFirst(int round) {
        return round % 2 == 0;
    }

    /**
     * Runs {@code rounds} rounds over {@code chain} (page p of the destination, {@code pageBytes} long, must hold the
     * bytes of {@code chain.get(p)}), reading back into {@code host} (the destination's size).
     */
    static Result run(int rounds, List<ByteString> chain, long pageBytes, Destination destination, MemorySegment host,
                      Side restore, Side baseline) {
        List<Long> restoreNanos = new ArrayList<>();
        List<Long> baselineNanos = new ArrayList<>();
        List<String> details = new ArrayList<>();
        long verified = 0;
        long poisonFailures = 0;
        long[] mismatches = new long[2];
        int restoreFirstRounds = 0;
        String error = null;
        rounds:
        for (int round = 0; round < rounds; round++) {
            restoreFirstRounds += restoreFirst(round) ? 1 : 0;
            for (int step = 0; step < 2; step++) {
                boolean isRestore = (step == 0) == restoreFirst(round);
                String name = isRestore ? "restore" : "baseline";
                destination.poison();
                destination.readBack(host);
                boolean[] poisoned = new boolean[chain.size()];
                for (int p = 0; p < chain.size(); p++) {
                    poisoned[p] = KeyedContent.firstMismatch(page(host, p, pageBytes), chain.get(p)) >= 0;
                    if (!poisoned[p]) {
                        poisonFailures++;
                        keep(details, "round " + (round + 1) + ", before the " + name + ": page " + p
                                + " still held its expected bytes after the poison");
                    }
                }
                long nanos;
                try {
                    nanos = (isRestore ? restore : baseline).run(round);
                } catch (Exception e) {
                    error = "round " + (round + 1) + ", " + name + ": " + e.getMessage();
                    break rounds;
                }
                (isRestore ? restoreNanos : baselineNanos).add(nanos);
                destination.readBack(host);
                for (int p = 0; p < chain.size(); p++) {
                    long wrong = KeyedContent.firstMismatch(page(host, p, pageBytes), chain.get(p));
                    if (wrong >= 0) {
                        mismatches[isRestore ? 0 : 1]++;
                        keep(details, "round " + (round + 1) + ", after the " + name + ": page " + p
                                + " differs from the bytes published under its key at byte " + wrong);
                    }
                    if (poisoned[p]) {
                        verified++;
                    }
                }
            }
        }
        return new Result(restoreNanos, baselineNanos, verified, mismatches[0], mismatches[1], poisonFailures,
                restoreFirstRounds, details, error);
    }

    private static MemorySegment page(MemorySegment host, int p, long pageBytes) {
        return host.asSlice(p * pageBytes, pageBytes);
    }

    private static void keep(List<String> details, String detail) {
        if (details.size() < MAX_DETAILS) {
            details.add(detail);
        }
    }
}
