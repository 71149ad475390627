package io.orbitkv.perf.trace;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

/** Finds the shared Mooncake trace: {@code shared/traces/} beside or above the repository (e.g. /work/shared). */
public final class SharedTraces {

    public static final String SYNTHETIC = "synthetic_trace.jsonl";
    static final String SYNTHETIC_SHA256 = "bd070915a98fc0ed264d7cfef2ce746002eb3076a695ec31ba2674c0111ec131";

    private SharedTraces() {
    }

    /** Walks up from the working directory (surefire runs in the module directory) looking for shared/traces/NAME. */
    public static Optional<Path> find(String name) {
        for (Path dir = Path.of("").toAbsolutePath(); dir != null; dir = dir.getParent()) {
            Path candidate = dir.resolve("shared").resolve("traces").resolve(name);
            if (Files.isRegularFile(candidate)) {
                return Optional.of(candidate);
            }
        }
        return Optional.empty();
    }

    /** The synthetic trace, or skips the test when this checkout has no shared traces next to it. */
    public static Path syntheticOrSkip() {
        Optional<Path> trace = find(SYNTHETIC);
        assumeTrue(trace.isPresent(), "no shared/traces/" + SYNTHETIC + " above " + Path.of("").toAbsolutePath());
        return trace.get();
    }
}
