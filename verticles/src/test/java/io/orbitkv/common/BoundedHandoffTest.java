package io.orbitkv.common;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.vertx.core.Context;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The bounded hand-off: at most capacity messages wait; one more is refused, counted and marked; order is kept. */
class BoundedHandoffTest {
    final Vertx vertx = Vertx.vertx();
    final SimpleMeterRegistry registry = new SimpleMeterRegistry();

    @AfterEach
    void close() throws Exception {
        vertx.close().await(10, TimeUnit.SECONDS);
    }

    @Test
    void aFullHandoffRefusesCountsAndMarksTheOverflowAndDeliversTheRestInOrder() throws Exception {
        BoundedHandoff<Integer> handoff = BoundedHandoff.create(vertx, "test", 3, registry);
        assertThat(BoundedHandoff.<Integer>find(vertx, "test")).isSameAs(handoff);
        assertThat(handoff.offer(0)).as("no receiver yet: refused, not counted").isFalse();
        assertThat(handoff.refused()).isZero();
        assertThat(handoff.overflowed()).isTrue();
        List<Integer> received = new ArrayList<>();
        Context receiver = vertx.getOrCreateContext();
        Promise<List<Boolean>> offered = Promise.promise();
        receiver.runOnContext(v -> {
            handoff.open(receiver, received::add);
            // Offered on the receiver's own loop: nothing drains until this task returns, so the queue fills.
            List<Boolean> accepted = new ArrayList<>();
            for (int i = 1; i <= 5; i++) {
                accepted.add(handoff.offer(i));
            }
            offered.complete(accepted);
        });
        assertThat(offered.future().await(10, TimeUnit.SECONDS)).containsExactly(true, true, true, false, false);
        Promise<List<Integer>> drained = Promise.promise();
        receiver.runOnContext(v -> drained.complete(List.copyOf(received)));
        assertThat(drained.future().await(10, TimeUnit.SECONDS)).containsExactly(1, 2, 3);
        assertThat(handoff.refused()).isEqualTo(2);
        assertThat(registry.get("orbitkv.handoff.refused").tag("handoff", "test").functionCounter().count()).isEqualTo(2);
        assertThat(handoff.overflowed()).as("the receiver learns it missed messages").isTrue();
        assertThat(handoff.overflowed()).as("once").isFalse();
        assertThat(handoff.queued()).isZero();
        handoff.close();
        assertThat(handoff.offer(9)).isFalse();
    }
}
