package io.orbitkv.admission;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.admission.AdmissionCommands.DemandPlan;
import io.orbitkv.admission.AdmissionCommands.DemandState;
import io.orbitkv.admission.AdmissionCommands.Outcome;
import io.orbitkv.admission.AdmissionCommands.Status;
import io.orbitkv.engine.ProducerPort;
import io.orbitkv.model.ProducerRef;
import io.orbitkv.model.ProducerState;
import io.orbitkv.model.StateKey;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Admission's gate for demands that name a producer, driven directly over the real planning role and image store of
 * {@link DemandAdmissionTest} and a producer port whose answers the test holds: a waiting ticket holds nothing, a
 * seal lets it be planned, an ended producer or a spent budget answers MISS, and an answer that arrives after a
 * cancel or a revision changes nothing.
 */
class ProducerWaitsTest {
    static final ProducerRef PRODUCER = new ProducerRef(null, 7, 77, "prefill-1");
    final DemandAdmissionTest harness = new DemandAdmissionTest();
    final Deque<Promise<ProducerState>> asks = new ArrayDeque<>();
    final List<List<StateKey>> askedKeys = new ArrayList<>();
    final ProducerPort port = (producer, keys) -> {
        assertThat(producer).isEqualTo(PRODUCER);
        askedKeys.add(keys);
        Promise<ProducerState> answer = Promise.promise();
        asks.add(answer);
        return answer.future();
    };
    final DemandAdmission admission = new DemandAdmission(DemandAdmissionTest.settings().maxOutstanding(8, 100).build(),
            harness.registry, () -> harness.now, harness.planningPort(null), null, null, port);

    @AfterEach
    void close() {
        harness.release();
    }

    DemandPlan demand(long revision) {
        return DemandAdmissionTest.plan("decode-1", revision, 1, 4, 4).withProducer(PRODUCER);
    }

    double outcome(String outcome) {
        return harness.registry.get("orbitkv.producer.waits").tag("outcome", outcome).counter().count();
    }

    /** Four full-attention pages and the recurrent checkpoint at the fourth: a legal boundary of 4 pages. */
    void publishFourPages() {
        harness.publish(0, DemandAdmissionTest.range(4), true);
        harness.publish(2, List.of(3), true);
    }

    @Test
    void waitsHoldingNothingUntilTheProducerSealsThenIsPlanned() {
        publishFourPages();
        Future<Outcome> submitted = admission.submit(1, demand(0));
        assertThat(askedKeys.getFirst()).as("every key of the demand's ranges").hasSize(8);
        asks.poll().complete(ProducerState.WAITING);
        Outcome waiting = submitted.await();
        assertThat(waiting.status()).isEqualTo(Status.PENDING);
        assertThat(waiting.detail()).isEqualTo(DemandState.WAITING_FOR_PRODUCER);
        assertThat(admission.waitingForProducer()).isEqualTo(1);
        assertThat(admission.activeLeases()).isZero();
        assertThat(admission.budgets().isEmpty()).as("nothing charged while waiting").isTrue();
        assertThat(harness.store.pinnedImages()).isZero();

        Future<Outcome> polled = admission.poll(1, waiting.ticket());
        asks.poll().complete(ProducerState.SEALED);
        Outcome ready = polled.await();
        assertThat(ready.status()).isEqualTo(Status.READY);
        assertThat(ready.boundaryTokens()).isEqualTo(4 * DemandAdmissionTest.P);
        assertThat(outcome("satisfied")).isEqualTo(1);
        assertThat(admission.waitingForProducer()).isZero();
        assertThat(admission.poll(1, ready.ticket()).await()).as("answered: no second ask").isEqualTo(ready);
        assertThat(asks).isEmpty();
        admission.release(1, ready.leaseId()).await();
        harness.assertNothingHeld(admission);
    }

    @Test
    void anEndedProducerOrASpentBudgetIsAMiss() {
        Future<Outcome> submitted = admission.submit(1, demand(0));
        asks.poll().complete(ProducerState.ENDED);
        assertThat(submitted.await().status()).isEqualTo(Status.MISS);
        assertThat(outcome("producer_ended")).isEqualTo(1);

        Future<Outcome> other = admission.submit(1, DemandAdmissionTest.plan("decode-2", 0, 2, 4, 4).withProducer(PRODUCER));
        asks.poll().complete(ProducerState.WAITING);
        Outcome waiting = other.await();
        harness.now += DemandAdmissionTest.WAIT;
        Outcome miss = admission.poll(1, waiting.ticket()).await();
        assertThat(miss.status()).isEqualTo(Status.MISS);
        assertThat(asks).as("a spent budget asks nobody").isEmpty();
        assertThat(outcome("budget_spent")).isEqualTo(1);
        harness.assertNothingHeld(admission);
    }

    @Test
    void anAnswerAfterACancelOrARevisionChangesNothing() {
        publishFourPages();
        Future<Outcome> submitted = admission.submit(1, demand(0));
        Promise<ProducerState> first = asks.poll();
        Future<Outcome> revised = admission.submit(1, demand(1));
        first.complete(ProducerState.SEALED); // for revision 0: stale
        assertThat(submitted.await().status()).isEqualTo(Status.PENDING);
        assertThat(admission.activeLeases()).as("the stale answer planned nothing").isZero();
        asks.poll().complete(ProducerState.WAITING);
        Outcome waiting = revised.await();
        assertThat(waiting.revision()).isEqualTo(1);
        assertThat(waiting.detail()).isEqualTo(DemandState.WAITING_FOR_PRODUCER);

        Future<Outcome> polled = admission.poll(1, waiting.ticket());
        admission.cancel(1, waiting.ticket()).await();
        asks.poll().complete(ProducerState.SEALED);
        polled.await();
        assertThat(admission.liveTickets()).isZero();
        assertThat(outcome("satisfied")).as("stale answers count nothing").isZero();
        harness.assertNothingHeld(admission);
        admission.sweep();
        assertThat(admission.waitingForProducer()).isZero();
    }
}
