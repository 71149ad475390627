package io.orbitkv.it;

import java.util.List;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * Fails a test during which Vert.x reported a blocked event loop ({@link BlockedThreadAlarm}). Registered for every
 * test of this module by JUnit's extension auto-detection (junit-platform.properties, META-INF/services), so the
 * whole suite — integration tests with one and with four event loops included — holds the rule that nothing heavy
 * runs on an event loop.
 */
public final class BlockedThreadWatch implements BeforeEachCallback, AfterEachCallback {
    @Override
    public void beforeEach(ExtensionContext context) {
        // A warning of an earlier test's stray work (the checker samples once a second) is not this test's.
        BlockedThreadAlarm.drain();
    }

    @Override
    public void afterEach(ExtensionContext context) {
        List<String> warnings = BlockedThreadAlarm.drain();
        if (!warnings.isEmpty() && context.getExecutionException().isEmpty()) {
            throw new AssertionError("an event loop was blocked during this test:\n" + String.join("\n", warnings));
        }
    }
}
