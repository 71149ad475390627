package io.orbitkv.perf.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The replay's and cost-overhead's SSD write backlog: counts settled writes since creation, waits only past its bound. */
class SsdWriteBacklogTest {

    private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    private final Counter committed = Counter.builder("orbitkv.ssd.writes.committed").register(registry);
    private final Counter dropped = Counter.builder("orbitkv.ssd.writes.dropped").tag("reason", "SOURCE_EVICTED")
            .register(registry);

    @Test
    void settledCountsCommittedAndDroppedSinceCreationOnly() {
        committed.increment(5);
        SsdWriteBacklog backlog = new SsdWriteBacklog(registry, 4);
        assertThat(backlog.settled()).isZero();
        committed.increment(2);
        dropped.increment(1);
        assertThat(backlog.settled()).isEqualTo(3);
    }

    @Test
    void withinItsBoundItNeverWaits() {
        SsdWriteBacklog backlog = new SsdWriteBacklog(registry, 4);
        backlog.bound(4);
        assertThat(backlog.waits()).isZero();
    }

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void pastItsBoundItWaitsUntilHalfTheBoundIsUnsettled() throws Exception {
        SsdWriteBacklog backlog = new SsdWriteBacklog(registry, 4);
        CompletableFuture<Void> bounded = new CompletableFuture<>();
        Thread waiter = Thread.ofPlatform().start(() -> {
            backlog.bound(10);
            bounded.complete(null);
        });
        // 10 sealed, nothing settled, bound 4: it waits (parks between reads) until 10 - 4/2 = 8 are settled.
        await().atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(1))
                .until(() -> waiter.getState() == Thread.State.TIMED_WAITING || bounded.isDone());
        committed.increment(7);
        assertThat(bounded).as("7 of the 8 it needs").isNotDone();
        dropped.increment(1);
        bounded.get(20, TimeUnit.SECONDS);
        assertThat(backlog.waits()).isEqualTo(1);
    }

    @Test
    void aDrainThatNeverSettlesFailsWithTheCounts() {
        SsdWriteBacklog backlog = new SsdWriteBacklog(registry, 4);
        assertThatThrownBy(() -> backlog.drain(3, Duration.ofMillis(50)))
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("0 of 3");
        assertThatThrownBy(() -> new SsdWriteBacklog(registry, 0)).isInstanceOf(IllegalArgumentException.class);
    }
}
