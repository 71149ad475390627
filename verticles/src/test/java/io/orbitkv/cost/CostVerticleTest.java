package io.orbitkv.cost;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.vertx.core.Vertx;
import io.vertx.core.eventbus.DeliveryOptions;
import io.vertx.junit5.Timeout;
import io.vertx.junit5.VertxExtension;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.StreamSupport;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import io.orbitkv.model.cost.CostEstimateKey;
import io.orbitkv.model.cost.CostPath;
import io.orbitkv.model.cost.ObservationOutcome;
import io.orbitkv.model.cost.ObservationRecord;
import io.orbitkv.model.cost.ObservedBytes;
import io.orbitkv.model.cost.CostEstimate;
import io.orbitkv.model.cost.CostEstimateResult;
import io.orbitkv.model.cost.ShadowAlternative;
import io.orbitkv.model.cost.ShadowRequest;
import io.orbitkv.model.cost.CostMessage;
import io.orbitkv.model.cost.EstimateQuery;

/** Full path through the real local event bus. Futures are joined with hard timeouts; nothing sleeps. */
@ExtendWith(VertxExtension.class)
@Timeout(value = 15, timeUnit = TimeUnit.SECONDS)
class CostVerticleTest {

    private static final long WAIT_S = 10;

    private Vertx vertx;
    private SimpleMeterRegistry registry;
    private final ManualClock clock = new ManualClock();

    @BeforeEach
    void setUp() {
        vertx = Vertx.vertx();
        registry = new SimpleMeterRegistry();
    }

    @AfterEach
    void tearDown() throws Exception {
        vertx.close().toCompletionStage().toCompletableFuture().get(WAIT_S, TimeUnit.SECONDS);
    }

    private CostVerticle deploy(CostSettings settings) throws Exception {
        CostVerticle verticle = new CostVerticle(settings, registry, clock);
        vertx.deployVerticle(verticle).toCompletionStage().toCompletableFuture().get(WAIT_S, TimeUnit.SECONDS);
        return verticle;
    }

    private <T> T join(io.vertx.core.Future<T> future) throws Exception {
        return future.toCompletionStage().toCompletableFuture().get(WAIT_S, TimeUnit.SECONDS);
    }

    private double count(String name, String... tags) {
        var counter = registry.find(name).tags(tags).counter();
        return counter == null ? 0 : counter.count();
    }

    @Test
    void fullIntakeDropsAndCountsWhileReportReturnsImmediately() throws Exception {
        int capacity = 8;
        int extra = 100;
        CostVerticle verticle = deploy(CostSettings.observing(capacity));
        CostProxy proxy = verticle.proxy();

        // Make the cost role busy: its event loop waits on a latch this test thread holds.
        CountDownLatch busy = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        verticle.runOnCostLoop(() -> {
            busy.countDown();
            try {
                release.await(WAIT_S, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        assertThat(busy.await(WAIT_S, TimeUnit.SECONDS)).isTrue();

        ObservationRecord record = TestKeys.succeeded(TestKeys.ssdRead(4096), 1_000);
        for (int i = 0; i < capacity + extra; i++) {
            proxy.report(record); // would deadlock this test if it waited for the blocked loop
        }
        assertThat(verticle.intake().inFlight()).isEqualTo(capacity);
        assertThat(count("orbitkv.cost.updates.dropped", "message", "observation")).isEqualTo(extra);
        assertThat(count("orbitkv.cost.operations")).isZero();

        release.countDown();
        await().atMost(WAIT_S, TimeUnit.SECONDS).untilAsserted(() ->
                assertThat(count("orbitkv.cost.operations", "path", "ssd_read", "outcome", "succeeded"))
                        .isEqualTo(capacity));
        await().atMost(WAIT_S, TimeUnit.SECONDS).until(() -> verticle.intake().inFlight() == 0);
        // Capacity is free again: the next report is accepted, not dropped.
        proxy.report(record);
        await().atMost(WAIT_S, TimeUnit.SECONDS).untilAsserted(() ->
                assertThat(count("orbitkv.cost.operations", "path", "ssd_read", "outcome", "succeeded"))
                        .isEqualTo(capacity + 1));
        assertThat(count("orbitkv.cost.updates.dropped", "message", "observation")).isEqualTo(extra);
    }

    @Test
    void anEstimateAskedOnTheCostLoopIsAnsweredInPlaceAfterWhatWasReportedBeforeIt() throws Exception {
        CostVerticle verticle = deploy(CostSettings.observing(64));
        CostProxy proxy = verticle.proxy();
        CostEstimateKey key = TestKeys.ssdRead(4096);
        CompletableFuture<io.vertx.core.Future<CostEstimateResult>> asked = new CompletableFuture<>();
        verticle.runOnCostLoop(() -> {
            for (int i = 0; i < CostEstimator.WARMUP_SAMPLES; i++) {
                proxy.report(TestKeys.succeeded(key, 1_000));
            }
            asked.complete(proxy.estimate(key)); // the reports are still queued when it is asked
        });
        io.vertx.core.Future<CostEstimateResult> answer = asked.get(WAIT_S, TimeUnit.SECONDS);
        assertThat(answer.isComplete()).as("answered in place, without a bus round trip").isTrue();
        assertThat(answer.result()).isInstanceOf(CostEstimateResult.Usable.class);
        assertThat(verticle.intake().inFlight()).isZero();
    }

    @Test
    void inPlaceEstimatesAnswerOnTheCostLoopAfterQueuedReportsAndReadEachKeyOnce() throws Exception {
        CostVerticle verticle = deploy(CostSettings.observing(64));
        CostProxy proxy = verticle.proxy();
        CostEstimateKey key = TestKeys.ssdRead(4096);
        CostEstimateKey unknown = TestKeys.ssdRead(1 << 20);
        assertThat(proxy.estimatesInPlace()).as("off the cost loop: fetch instead").isNull();
        CompletableFuture<List<CostEstimateResult>> asked = new CompletableFuture<>();
        verticle.runOnCostLoop(() -> {
            for (int i = 0; i < CostEstimator.WARMUP_SAMPLES; i++) {
                proxy.report(TestKeys.succeeded(key, 1_000));
            }
            var lookup = proxy.estimatesInPlace(); // the reports are still queued when it is asked
            asked.complete(List.of(lookup.apply(key), lookup.apply(key), lookup.apply(unknown)));
        });
        List<CostEstimateResult> answers = asked.get(WAIT_S, TimeUnit.SECONDS);
        assertThat(answers.get(0).usable()).hasValue(new CostEstimate(1_000, 0, CostEstimator.WARMUP_SAMPLES, 0));
        assertThat(answers.get(1)).isSameAs(answers.get(0));
        assertThat(answers.get(2)).isEqualTo(new CostEstimateResult.Unavailable(CostEstimateResult.Reason.NO_ENTRY, 0));
        assertThat(registry.find("orbitkv.cost.estimate.age").timer().count()).as("one read per key asked").isEqualTo(1);
        assertThat(verticle.intake().inFlight()).isZero();

        proxy.setObservationsEnabled(false);
        CompletableFuture<Boolean> offAnswers = new CompletableFuture<>();
        verticle.runOnCostLoop(() -> offAnswers.complete(proxy.estimatesInPlace() == null));
        assertThat(offAnswers.get(WAIT_S, TimeUnit.SECONDS)).as("observation off: nothing in place").isTrue();
    }

    @Test
    void reportsTrainEstimatesAndShadowAnswersThroughTheProxy() throws Exception {
        CostProxy proxy = deploy(CostSettings.observing(64)).proxy();
        CostEstimateKey uring = TestKeys.restore(CostPath.SSD_RESTORE_ROUTE, TestKeys.GPU0);
        CostEstimateKey cufile = TestKeys.restore(CostPath.SSD_CUFILE_RESTORE_ROUTE, TestKeys.GPU0);
        for (int i = 0; i < 4; i++) {
            proxy.report(TestKeys.succeeded(uring, 2_000_000));
            proxy.report(TestKeys.succeeded(cufile, 500_000));
        }
        // The intake is FIFO on one loop: a query sent after the reports sees them all.
        CostEstimateResult estimate = join(proxy.estimate(uring));
        assertThat(estimate.usable()).hasValue(new CostEstimate(2_000_000, 0, 4, 0));
        assertThat(join(proxy.estimate(TestKeys.restore(CostPath.SSD_RESTORE_ROUTE, TestKeys.GPU1))))
                .isEqualTo(new CostEstimateResult.Unavailable(CostEstimateResult.Reason.NO_ENTRY, 0));

        ShadowResult shadow = join(proxy.shadow(new ShadowRequest(uring,
                List.of(ShadowAlternative.when(cufile, () -> true)))));
        assertThat(shadow.decision()).isEqualTo(ShadowDecision.SUGGEST_ALTERNATIVE);
        assertThat(shadow.suggested()).hasValue(cufile);
        assertThat(count("orbitkv.cost.shadow.decisions", "decision", "suggest_alternative")).isEqualTo(1);
        assertThat(proxy.selectionEnabled()).isFalse();
    }

    @Test
    void onlyTheOwnerFinishesAnInFlightObservationAndOnlyOnce() throws Exception {
        CostVerticle verticle = deploy(CostSettings.observing(64));
        CostProxy proxy = verticle.proxy();
        CostEstimateKey key = TestKeys.ssdRead(1 << 20);

        InFlightObservation observation = proxy.start(key); // enqueued at t0
        clock.advanceNanos(3_000);
        observation.markSubmitted(); // queue 3 us
        clock.advanceNanos(40_000);
        assertThat(observation.finish(ObservationOutcome.SUCCEEDED, ObservedBytes.of(1 << 20, 1 << 20))).isTrue();
        assertThat(observation.finish(ObservationOutcome.FAILED, ObservedBytes.UNKNOWN)).isFalse();
        assertThat(observation.finish(ObservationOutcome.SUCCEEDED, ObservedBytes.UNKNOWN)).isFalse();
        assertThat(count("orbitkv.cost.finish.duplicates", "path", "ssd_read")).isEqualTo(2);

        for (int i = 0; i < 3; i++) {
            InFlightObservation next = proxy.start(key);
            clock.advanceNanos(40_000);
            next.finish(ObservationOutcome.SUCCEEDED, ObservedBytes.of(1 << 20, 1 << 20));
        }
        // Service time only (40 us), never queue + service.
        assertThat(join(proxy.estimate(key)).usable().orElseThrow().predictedNanos()).isEqualTo(40_000);
        var service = registry.find("orbitkv.cost.stage").tags("stage", "service", "path", "ssd_read").timer();
        var queue = registry.find("orbitkv.cost.stage").tags("stage", "queue", "path", "ssd_read").timer();
        assertThat(service.count()).isEqualTo(4);
        assertThat(queue.count()).isEqualTo(1);
        assertThat(queue.totalTime(TimeUnit.NANOSECONDS)).isEqualTo(3_000);
    }

    @Test
    void routeTimeoutIsCensoredAndNeverTrains() throws Exception {
        CostProxy proxy = deploy(CostSettings.observing(64)).proxy();
        CostEstimateKey route = TestKeys.restore(CostPath.SSD_RESTORE_ROUTE, TestKeys.GPU0);
        for (int i = 0; i < 6; i++) {
            InFlightObservation observation = proxy.start(route);
            clock.advanceNanos(1_000_000);
            observation.markAdmitted();
            clock.advanceNanos(9_000_000);
            observation.finish(ObservationOutcome.TIMED_OUT, ObservedBytes.UNKNOWN);
        }
        assertThat(join(proxy.estimate(route)))
                .isEqualTo(new CostEstimateResult.Unavailable(CostEstimateResult.Reason.NO_ENTRY, 0));
        assertThat(count("orbitkv.cost.operations", "outcome", "timed_out")).isEqualTo(6);
        assertThat(registry.find("orbitkv.cost.stage").tags("stage", "total").timer()).isNull();
        assertThat(registry.find("orbitkv.cost.stage").tags("stage", "admission").timer().count()).isEqualTo(6);
    }

    @Test
    void disabledIsACounterFreeNoOp() throws Exception {
        CostVerticle verticle = deploy(CostSettings.disabled());
        CostProxy proxy = verticle.proxy();
        CostEstimateKey key = TestKeys.ssdRead(4096);
        proxy.report(TestKeys.succeeded(key, 1_000));
        InFlightObservation observation = proxy.start(key);
        assertThat(observation.finish(ObservationOutcome.SUCCEEDED, ObservedBytes.UNKNOWN)).isFalse();
        assertThat(observation.finish(ObservationOutcome.SUCCEEDED, ObservedBytes.UNKNOWN)).isFalse();
        assertThat(join(proxy.shadow(new ShadowRequest(key, List.of()))).decision())
                .isEqualTo(ShadowDecision.UNKNOWN);
        assertThat(join(proxy.estimate(key)))
                .isEqualTo(new CostEstimateResult.Unavailable(CostEstimateResult.Reason.DISABLED, 0));
        registry.getMeters().forEach(meter -> meter.measure().forEach(m ->
                assertThat(m.getValue()).as(meter.getId().toString()).isZero()));
        assertThat(verticle.intake().inFlight()).isZero();
    }

    @Test
    void reportsBeforeDeploymentAreDroppedNotLeaked() {
        CostVerticle verticle = new CostVerticle(CostSettings.observing(4), registry, clock);
        verticle.proxy().report(TestKeys.succeeded(TestKeys.ssdRead(1), 1));
        assertThat(verticle.intake().inFlight()).isZero();
        assertThat(count("orbitkv.cost.updates.dropped", "message", "observation")).isEqualTo(1);
    }

    @Test
    void localCodecRegistersOnceAndHandsOverTheSameObject() throws Exception {
        CostVerticle.registerCodecs(vertx);
        CostVerticle.registerCodecs(vertx);
        ObservationRecord sent = TestKeys.succeeded(TestKeys.ssdRead(1), 1);
        CompletableFuture<Object> received = new CompletableFuture<>();
        vertx.eventBus().<ObservationRecord>localConsumer("codec-test", message -> received.complete(message.body()))
                .completion().toCompletionStage().toCompletableFuture().get(WAIT_S, TimeUnit.SECONDS);
        vertx.eventBus().send("codec-test", sent, new DeliveryOptions().setLocalOnly(true));
        assertThat(received.get(WAIT_S, TimeUnit.SECONDS)).isSameAs(sent);
    }

    @Test
    void drainedCompletesOnlyOnceEveryReportedObservationWasHandled() throws Exception {
        CostVerticle verticle = deploy(CostSettings.observing(4096));
        CostProxy proxy = verticle.proxy();
        // Hold the cost loop so that everything reported next is still queued when drained() is asked.
        CountDownLatch busy = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        verticle.runOnCostLoop(() -> {
            busy.countDown();
            try {
                release.await(WAIT_S, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        assertThat(busy.await(WAIT_S, TimeUnit.SECONDS)).isTrue();
        ObservationRecord record = TestKeys.succeeded(TestKeys.ssdRead(4096), 1_000);
        int reports = 500;
        for (int i = 0; i < reports; i++) {
            proxy.report(record);
        }
        CompletableFuture<Void> drained = proxy.drained().toCompletionStage().toCompletableFuture();
        assertThat(drained).isNotDone();
        release.countDown();
        drained.get(WAIT_S, TimeUnit.SECONDS);
        // Drained means handled: every report is counted by the time the future completes, none dropped.
        assertThat(count("orbitkv.cost.operations", "outcome", "succeeded")).isEqualTo(reports);
        assertThat(verticle.intake().inFlight()).isZero();
    }

    /**
     * The intake hands records over in batches, and from a thread other than the cost loop lazily (no wake-up per
     * batch): the role must still see exactly the records reported, in order. The same seeded sequence of
     * observations and shadow records goes once through the intake from a foreign thread (interleaved with bursts
     * reported on the cost loop itself) and once straight into a {@link CostRole}: every meter and every estimate
     * must come out identical, nothing dropped, nothing left queued.
     */
    @Test
    void batchedAndLazyHandOverRecordsExactlyTheSamplesReported() throws Exception {
        CostVerticle verticle = deploy(CostSettings.observing(1 << 16));
        CostProxy proxy = verticle.proxy();
        long seed = 20261201L;
        Random random = new Random(seed);
        List<CostMessage> sequence = new ArrayList<>();
        CostEstimateKey[] keys = {TestKeys.ssdRead(4096), TestKeys.ssdRead(1 << 20),
                TestKeys.restore(CostPath.SSD_RESTORE_ROUTE, TestKeys.GPU0),
                TestKeys.restore(CostPath.SSD_CUFILE_RESTORE_ROUTE, TestKeys.GPU0)};
        ObservationOutcome[] outcomes = ObservationOutcome.values();
        for (int i = 0; i < 3_000; i++) {
            CostEstimateKey key = keys[random.nextInt(keys.length)];
            if (random.nextInt(8) == 0) {
                sequence.add(new ShadowRequest(keys[2], List.of(new ShadowAlternative(keys[3], random.nextBoolean()))));
            } else {
                ObservationOutcome outcome = random.nextInt(10) == 0 ? outcomes[random.nextInt(outcomes.length)]
                        : ObservationOutcome.SUCCEEDED;
                sequence.add(TestKeys.outcome(key, outcome, 1_000 + random.nextInt(1_000_000)));
            }
        }
        // One producer at a time keeps the order defined: bursts alternate between a foreign thread and the loop.
        int burst = 0;
        for (int from = 0; from < sequence.size(); from += 100, burst++) {
            List<CostMessage> part = sequence.subList(from, Math.min(sequence.size(), from + 100));
            CompletableFuture<Void> sent = new CompletableFuture<>();
            Runnable send = () -> {
                for (CostMessage message : part) {
                    switch (message) {
                        case ObservationRecord record -> proxy.report(record);
                        case ShadowRequest request -> proxy.recordShadow(request);
                        case EstimateQuery query -> throw new AssertionError(query);
                    }
                }
                sent.complete(null);
            };
            if (burst % 2 == 0) {
                Thread.ofPlatform().start(send);
            } else {
                verticle.runOnCostLoop(send);
            }
            sent.get(WAIT_S, TimeUnit.SECONDS);
        }
        join(proxy.drained());
        assertThat(verticle.intake().inFlight()).as("seed %d", seed).isZero();

        SimpleMeterRegistry direct = new SimpleMeterRegistry();
        CostRole reference = new CostRole(clock, new CostMetrics(direct));
        for (CostMessage message : sequence) {
            switch (message) {
                case ObservationRecord record -> reference.onObservation(record);
                case ShadowRequest request -> reference.onShadow(request);
                case EstimateQuery query -> throw new AssertionError(query);
            }
        }
        assertThat(meters(registry)).as("seed %d", seed).isEqualTo(meters(direct));
        for (CostEstimateKey key : keys) {
            assertThat(join(proxy.estimate(key))).as("seed %d", seed)
                    .isEqualTo(reference.onEstimate(new EstimateQuery(key)));
        }
        assertThat(count("orbitkv.cost.updates.dropped")).isZero();
    }

    @Test
    void aReportFromAnotherThreadReachesAnIdleLoopWithoutAnyOtherWork() throws Exception {
        CostVerticle verticle = deploy(CostSettings.observing(64));
        // Nothing else runs on the cost loop: the lazily queued drain must still run (the periodic backstop).
        Thread.ofPlatform().start(() -> verticle.proxy().report(TestKeys.succeeded(TestKeys.ssdRead(4096), 1_000)))
                .join();
        await().atMost(WAIT_S, TimeUnit.SECONDS).untilAsserted(() ->
                assertThat(count("orbitkv.cost.operations", "path", "ssd_read", "outcome", "succeeded")).isEqualTo(1));
        assertThat(verticle.intake().inFlight()).isZero();
    }

    /** Every meter's id and measurements, for comparing two registries fed the same records. */
    private static Map<String, List<String>> meters(MeterRegistry registry) {
        Map<String, List<String>> all = new TreeMap<>();
        registry.getMeters().forEach(meter -> all.put(meter.getId().toString(),
                StreamSupport.stream(meter.measure().spliterator(), false)
                        .map(m -> m.getStatistic() + "=" + m.getValue()).toList()));
        return all;
    }
}
