package io.orbitkv.planning;

import java.util.Random;
import java.util.stream.LongStream;

/**
 * Seeded-random property runs (JUnit 5 parameterized tests): each case gets its own seed, shown in the test name and in
 * the failure message. Reproduce a failing case with {@code -Dorbitkv.seed=SEED}: that seed then runs first.
 */
final class Seeded {
    static final long BASE = Long.getLong("orbitkv.seed", 0x0A11_5EEDL);

    private Seeded() {
    }

    static LongStream seeds(int count) {
        return LongStream.range(0, count).map(i -> BASE + i);
    }

    interface Body {
        void run(Random random) throws Exception;
    }

    static void check(long seed, Body body) {
        try {
            body.run(new Random(seed));
        } catch (Throwable failure) {
            throw new AssertionError("property failed for seed " + seed + " (rerun with -Dorbitkv.seed=" + seed + "): "
                    + failure.getMessage(), failure);
        }
    }
}
