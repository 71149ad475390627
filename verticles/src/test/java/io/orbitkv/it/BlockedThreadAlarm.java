package io.orbitkv.it;

import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.AppenderBase;
import java.util.ArrayList;
import java.util.List;

/**
 * A logback appender (see logback-test.xml) that records Vert.x's blocked-thread warnings ("Thread ... has been
 * blocked for ... ms, time limit is ..."), logged by {@code io.vertx.core.impl.BlockedThreadChecker} when an event loop
 * runs one task longer than {@code maxEventLoopExecuteTime} (2 s by default). {@link BlockedThreadWatch} fails the
 * test during which one was recorded: nothing heavy may run on an event loop.
 */
public final class BlockedThreadAlarm extends AppenderBase<ILoggingEvent> {
    private static final List<String> WARNINGS = new ArrayList<>();

    @Override
    protected void append(ILoggingEvent event) {
        String message = event.getFormattedMessage();
        if (message != null && message.contains("has been blocked for")) {
            synchronized (WARNINGS) {
                WARNINGS.add("[" + event.getThreadName() + "] " + message);
            }
        }
    }

    /** The warnings recorded since the last call, oldest first. */
    static List<String> drain() {
        synchronized (WARNINGS) {
            List<String> recorded = List.copyOf(WARNINGS);
            WARNINGS.clear();
            return recorded;
        }
    }
}
