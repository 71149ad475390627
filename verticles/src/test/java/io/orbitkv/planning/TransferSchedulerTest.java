package io.orbitkv.planning;

import static io.orbitkv.planning.TransferScheduler.TransferClass.DEMAND;
import static io.orbitkv.planning.TransferScheduler.TransferClass.SPECULATIVE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import io.orbitkv.model.plan.PlanningException;
import io.orbitkv.model.plan.PlanningFailure;
import io.orbitkv.model.plan.Medium;

class TransferSchedulerTest {
    private static final long MB = 1 << 20;

    private final ManualTicker ticker = new ManualTicker();
    private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    private final List<String> droppedWork = new ArrayList<>();

    private TransferScheduler<String> scheduler(long limitBytes, double speculativeFraction, int maxQueued) {
        return new TransferScheduler<>(TransferScheduler.Settings.uniform(limitBytes, speculativeFraction, maxQueued),
                ticker, registry, droppedWork::add);
    }

    private static TransferScheduler.Request<String> demand(String name, long bytes, long latestStart, int priority) {
        return new TransferScheduler.Request<>(Medium.LOCAL_SSD, bytes, DEMAND, latestStart, Long.MIN_VALUE, priority,
                name);
    }

    private static TransferScheduler.Request<String> speculative(String name, long bytes, long latestStart,
                                                                   long notBefore) {
        return new TransferScheduler.Request<>(Medium.LOCAL_SSD, bytes, SPECULATIVE, latestStart, notBefore, 0, name);
    }

    @Test
    void demandReadsGoBySlackThenPriorityThenArrival() {
        TransferScheduler<String> s = scheduler(MB, 0.5, 16);
        // Occupy the medium so everything queues, then release it.
        TransferScheduler.Entry<String> blocker = s.enqueue(demand("blocker", MB, 0, 0));
        assertThat(s.dispatch()).containsExactly("blocker");
        s.enqueue(demand("late", MB / 4, 5_000, 0));
        s.enqueue(demand("urgent", MB / 4, 1_000, 0));
        s.enqueue(demand("urgent-high", MB / 4, 1_000, 9));
        s.enqueue(demand("urgent-second", MB / 4, 1_000, 0));
        assertThat(s.dispatch()).isEmpty();
        s.completed(blocker);
        assertThat(s.dispatch()).containsExactly("urgent-high", "urgent", "urgent-second", "late");
    }

    @Test
    void withSlackOrderOffDemandReadsGoByArrivalOnly() {
        TransferScheduler<String> s = new TransferScheduler<>(
                TransferScheduler.Settings.uniform(MB, 0.5, 16).withSlackOrder(false), ticker, registry, droppedWork::add);
        TransferScheduler.Entry<String> blocker = s.enqueue(demand("blocker", MB, 0, 0));
        assertThat(s.dispatch()).containsExactly("blocker");
        s.enqueue(demand("late", MB / 4, 5_000, 0));
        s.enqueue(demand("urgent-high", MB / 4, 1_000, 9));
        s.completed(blocker);
        assertThat(s.dispatch()).containsExactly("late", "urgent-high");
    }

    @Test
    void aPromotedSpeculativeReadStopsWaitingForItsStartAndCanNoLongerBeDropped() {
        TransferScheduler<String> s = scheduler(4 * MB, 0.25, 2);
        long later = ticker.nanos() + 10_000;
        var hint = s.enqueue(speculative("hint", MB, later, later));
        assertThat(s.dispatch()).as("waiting for its start time").isEmpty();
        var promoted = s.promote(hint, ticker.nanos()).orElseThrow();
        assertThat(promoted.request().transferClass()).isEqualTo(DEMAND);
        assertThat(s.promote(hint, 0)).as("the old entry is gone").isEmpty();
        assertThat(s.promote(promoted, 0)).as("already a demand read").isEmpty();
        assertThat(s.queued(Medium.LOCAL_SSD)).isEqualTo(1);
        // A demand read at a full queue finds nothing speculative to drop.
        s.enqueue(demand("other", MB, later, 0));
        assertThatThrownBy(() -> s.enqueue(demand("third", MB, later, 0))).isInstanceOf(PlanningException.class);
        assertThat(droppedWork).isEmpty();
        assertThat(s.dispatch()).containsExactly("hint", "other");
        assertThat(s.speculativeOutstandingBytes(Medium.LOCAL_SSD)).isZero();
        s.completed(promoted);
        assertThat(s.outstandingBytes(Medium.LOCAL_SSD)).isEqualTo(MB);
        assertThat(registry.get("orbitkv.planning.speculation.dropped").tag("reason", "cancelled").counter().count())
                .as("a promotion is not a dropped speculation").isZero();
    }

    @Test
    void outstandingBytesStayWithinTheMediumLimitAndAnOversizedTransferRunsAlone() {
        TransferScheduler<String> s = scheduler(MB, 0.5, 16);
        List<TransferScheduler.Entry<String>> entries = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            entries.add(s.enqueue(demand("d" + i, MB / 2, i, 0)));
        }
        assertThat(s.dispatch()).containsExactly("d0", "d1");
        assertThat(s.outstandingBytes(Medium.LOCAL_SSD)).isEqualTo(MB);
        s.completed(entries.get(0));
        var big = s.enqueue(demand("big", 3 * MB, 0, 0));
        // d2 fits beside d1, but "big" has less slack and is the head: it waits for an idle medium.
        assertThat(s.dispatch()).isEmpty();
        s.completed(entries.get(1));
        assertThat(s.dispatch()).containsExactly("big");
        assertThat(s.outstandingBytes(Medium.LOCAL_SSD)).isEqualTo(3 * MB);
        s.completed(big);
        assertThat(s.dispatch()).containsExactly("d2");
        // Other media have their own bounds.
        assertThat(s.outstandingBytes(Medium.PEER_DRAM)).isZero();
    }

    @Test
    void speculationIsCappedAndNeverStarvesDemandReads() {
        TransferScheduler<String> s = scheduler(4 * MB, 0.25, 16);
        var first = s.enqueue(speculative("s1", MB, Long.MAX_VALUE, Long.MIN_VALUE));
        s.enqueue(speculative("s2", MB, Long.MAX_VALUE, Long.MIN_VALUE));
        assertThat(s.dispatch()).containsExactly("s1"); // the speculative share is 1 MB of the 4 MB
        assertThat(s.speculativeOutstandingBytes(Medium.LOCAL_SSD)).isEqualTo(MB);
        s.enqueue(demand("d", 3 * MB, 0, 0));
        assertThat(s.dispatch()).containsExactly("d"); // demand takes the rest of the medium at once
        s.completed(first);
        var waiting = s.enqueue(demand("d-waiting", 4 * MB, 0, 0));
        // While a demand read waits, nothing speculative starts, though s2 would fit the speculative share.
        assertThat(s.dispatch()).isEmpty();
        assertThat(s.queued(Medium.LOCAL_SSD)).isEqualTo(2);
        assertThat(waiting.queued()).isTrue();
    }

    @Test
    void speculationWaitsForItsStartTime() {
        TransferScheduler<String> s = scheduler(4 * MB, 0.5, 16);
        s.enqueue(speculative("later", MB, 9_000_000_000L, ticker.nanos() + 5_000));
        assertThat(s.dispatch()).isEmpty();
        assertThat(s.nextStartNanos()).hasValue(ticker.nanos() + 5_000);
        ticker.advance(5_000);
        assertThat(s.dispatch()).containsExactly("later");
        assertThat(s.nextStartNanos()).isEmpty();
    }

    @Test
    void aDemandReadAtAFullQueueDropsTheSpeculationWithMostSlack() {
        TransferScheduler<String> s = scheduler(MB, 0.5, 3);
        var blocker = s.enqueue(demand("blocker", MB, 0, 0));
        s.dispatch();
        s.enqueue(speculative("soon", MB, 1_000, Long.MIN_VALUE));
        var far = s.enqueue(speculative("far", MB, 9_000, Long.MIN_VALUE));
        s.enqueue(demand("d1", MB, 0, 0));
        assertThat(droppedWork).isEmpty();
        // The queue holds soon, far, d1: full. A demand read makes room by dropping "far" (most slack).
        s.enqueue(demand("d2", MB, 0, 0));
        assertThat(droppedWork).containsExactly("far");
        assertThat(far.queued()).isFalse();
        assertThat(registry.counter("orbitkv.planning.speculation.dropped", "reason", "preempted").count()).isEqualTo(1);
        // A speculative read at a full queue is refused; so is a demand read when nothing speculative is left to drop.
        assertThatThrownBy(() -> s.enqueue(speculative("refused", MB, 0, Long.MIN_VALUE)))
                .isInstanceOfSatisfying(PlanningException.class,
                        e -> assertThat(e.failure()).isEqualTo(PlanningFailure.QUEUE_FULL));
        s.enqueue(demand("d3", MB, 0, 0)); // drops "soon"
        assertThat(droppedWork).containsExactly("far", "soon");
        assertThatThrownBy(() -> s.enqueue(demand("d4", MB, 0, 0)))
                .isInstanceOfSatisfying(PlanningException.class,
                        e -> assertThat(e.failure()).isEqualTo(PlanningFailure.QUEUE_FULL));
        assertThat(registry.counter("orbitkv.planning.speculation.dropped", "reason", "queue_full").count()).isEqualTo(1);
        s.completed(blocker);
        assertThat(s.dispatch()).containsExactly("d1");
    }

    @Test
    void onlyQueuedTransfersCanBeDroppedAndMetricsFollow() {
        TransferScheduler<String> s = scheduler(MB, 0.5, 16);
        var running = s.enqueue(demand("running", MB, 0, 0));
        var queued = s.enqueue(speculative("queued", MB / 2, 0, Long.MIN_VALUE));
        ticker.advance(2_000);
        assertThat(s.dispatch()).containsExactly("running");
        assertThat(s.drop(running)).isFalse();
        assertThat(s.drop(queued)).isTrue();
        assertThat(s.drop(queued)).isFalse();
        assertThat(registry.counter("orbitkv.planning.speculation.dropped", "reason", "cancelled").count()).isEqualTo(1);
        assertThat(registry.get("orbitkv.planning.outstanding.bytes").tag("medium", "local_ssd").gauge().value())
                .isEqualTo(MB);
        assertThat(registry.get("orbitkv.planning.queue.wait").tag("class", "demand").timer()
                .totalTime(TimeUnit.NANOSECONDS)).isEqualTo(2_000);
        s.completed(running);
        assertThat(registry.get("orbitkv.planning.outstanding.bytes").tag("medium", "local_ssd").gauge().value())
                .isZero();
        assertThatThrownBy(() -> s.completed(running)).isInstanceOf(IllegalStateException.class);
    }
}
