package io.orbitkv.common;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

class RateLimitedLogTest {
    private final AtomicLong now = new AtomicLong(1_000);
    private final Logger logger = (Logger) LoggerFactory.getLogger("io.orbitkv.test.rate-limited-" + System.nanoTime());
    private final ListAppender<ILoggingEvent> seen = new ListAppender<>();
    private RateLimitedLog log;

    @BeforeEach
    void capture() {
        seen.start();
        logger.addAppender(seen);
        logger.setAdditive(false);
        log = new RateLimitedLog(logger, now::get, Duration.ofSeconds(10));
    }

    @AfterEach
    void release() {
        logger.detachAppender(seen);
    }

    private void advanceSeconds(long s) {
        now.addAndGet(TimeUnit.SECONDS.toNanos(s));
    }

    @Test
    void theFirstOccurrenceIsOneWarnLineWithKindAndMember() {
        assertThat(log.warn("timeout", "manager-2", "the attempt's bound passed")).isTrue();
        assertThat(seen.list).hasSize(1);
        assertThat(seen.list.getFirst().getLevel()).isEqualTo(Level.WARN);
        assertThat(seen.list.getFirst().getFormattedMessage())
                .isEqualTo("timeout (member manager-2): the attempt's bound passed");
    }

    @Test
    void aBurstIsOneLineThenOneSummaryWhenTheIntervalHasPassed() {
        for (int i = 0; i < 10; i++) {
            log.warn("inventory-snapshot-failed", "manager-3", "not a current member");
            advanceSeconds(0); // the same instant: a burst
        }
        assertThat(seen.list).hasSize(1);
        assertThat(log.suppressed("inventory-snapshot-failed", "manager-3")).isEqualTo(9);
        advanceSeconds(5);
        assertThat(log.flushDue()).as("nothing is due within the interval").isZero();
        advanceSeconds(6);
        assertThat(log.flushDue()).isEqualTo(1);
        assertThat(log.flushDue()).as("a summary is written once").isZero();
        assertThat(seen.list).hasSize(2);
        assertThat(seen.list.get(1).getLevel()).isEqualTo(Level.WARN);
        assertThat(seen.list.get(1).getFormattedMessage())
                .startsWith("inventory-snapshot-failed (member manager-3): 9 more since the last line 11.0 s ago")
                .endsWith("the latest: not a current member");
        assertThat(log.suppressed("inventory-snapshot-failed", "manager-3")).isZero();
    }

    @Test
    void theNextOccurrenceAfterTheIntervalCarriesTheCountSuppressedBeforeIt() {
        log.warn("unreachable", "manager-1", "connection refused");
        advanceSeconds(1);
        log.warn("unreachable", "manager-1", "connection refused");
        log.warn("unreachable", "manager-1", "connection refused");
        advanceSeconds(10);
        assertThat(log.warn("unreachable", "manager-1", "connection refused")).isTrue();
        assertThat(seen.list).hasSize(2);
        assertThat(seen.list.get(1).getFormattedMessage())
                .isEqualTo("unreachable (member manager-1): connection refused (2 more since the last line 11.0 s ago)");
        assertThat(log.flushDue()).isZero();
    }

    @Test
    void pairsAreLimitedIndependently() {
        log.warn("timeout", "manager-1", "x");
        log.warn("timeout", "manager-2", "x");
        log.warn("transfer_failed", "manager-1", "x");
        log.warn("timeout", "manager-1", "x");
        assertThat(seen.list).extracting(ILoggingEvent::getFormattedMessage).containsExactly(
                "timeout (member manager-1): x", "timeout (member manager-2): x", "transfer_failed (member manager-1): x");
    }

    @Test
    void madeUpMembersBeyondTheBoundShareOnePair() {
        for (int i = 0; i < RateLimitedLog.MAX_KEYS + 50; i++) {
            log.warn("tls-refused", "m-" + i, "x");
        }
        assertThat(seen.list).hasSize(RateLimitedLog.MAX_KEYS + 1);
        assertThat(log.suppressed("tls-refused", RateLimitedLog.OVERFLOW_MEMBER)).isEqualTo(49);
    }

    @Test
    void aMissingMemberIsLoggedAsUnknown() {
        log.warn("tls-refused", null, "no certificate");
        assertThat(seen.list.getFirst().getFormattedMessage()).isEqualTo("tls-refused (member (unknown)): no certificate");
    }
}
