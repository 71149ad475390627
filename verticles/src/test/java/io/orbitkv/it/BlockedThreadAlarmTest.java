package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The alarm behind BlockedThreadWatch hears Vert.x's blocked-thread warning (an event loop blocked on purpose). */
class BlockedThreadAlarmTest {
    @Test
    void aBlockedEventLoopIsRecorded() throws Exception {
        Vertx vertx = Vertx.vertx(new VertxOptions().setMaxEventLoopExecuteTime(50).setMaxEventLoopExecuteTimeUnit(TimeUnit.MILLISECONDS)
                .setBlockedThreadCheckInterval(20).setBlockedThreadCheckIntervalUnit(TimeUnit.MILLISECONDS));
        try {
            CountDownLatch release = new CountDownLatch(1);
            vertx.runOnContext(v -> {
                try {
                    release.await(10, TimeUnit.SECONDS); // the injected fault: a loop that waits
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            await().atMost(Duration.ofSeconds(10)).until(() -> !BlockedThreadAlarm.drain().isEmpty());
            release.countDown();
        } finally {
            vertx.close().await(10, TimeUnit.SECONDS);
        }
        assertThat(BlockedThreadAlarm.drain()).as("drained by this test").allMatch(w -> w.contains("has been blocked for"));
        BlockedThreadAlarm.drain();
    }
}
