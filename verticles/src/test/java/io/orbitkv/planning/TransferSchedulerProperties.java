package io.orbitkv.planning;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import io.orbitkv.model.plan.PlanningException;
import io.orbitkv.model.plan.PlanningFailure;
import io.orbitkv.model.plan.Medium;

/**
 * Scheduler invariants over random enqueues, dispatches, completions, drops and time steps: a transfer starts only
 * within its medium's outstanding limit (or on an idle medium), a speculative one only within its share (or on an idle
 * medium),
 * nothing speculative dispatched while a demand read waits on its medium or before its start time, demand reads
 * dispatched in slack order, and the queue bound.
 */
class TransferSchedulerProperties {
    static final int CASES = 300;

    static java.util.stream.LongStream seeds() {
        return Seeded.seeds(CASES);
    }

    private record Work(int id) {}

    @ParameterizedTest(name = "seed {0}")
    @MethodSource("seeds")
    void boundsAndOrderHold(long seed) {
        Seeded.check(seed, random -> {
            ManualTicker ticker = new ManualTicker();
            long limit = 1 + random.nextInt(1 << 20);
            double fraction = random.nextDouble();
            int maxQueued = 1 + random.nextInt(8);
            List<Work> dropped = new ArrayList<>();
            TransferScheduler<Work> scheduler = new TransferScheduler<>(
                    TransferScheduler.Settings.uniform(limit, fraction, maxQueued), ticker, new SimpleMeterRegistry(),
                    dropped::add);
            long speculativeLimit = (long) Math.floor(limit * fraction);
            List<TransferScheduler.Entry<Work>> live = new ArrayList<>();
            List<TransferScheduler.Entry<Work>> running = new ArrayList<>();
            java.util.Map<Work, TransferScheduler.Entry<Work>> byWork = new java.util.IdentityHashMap<>();
            for (int step = 0; step < 200; step++) {
                switch (random.nextInt(5)) {
                    case 0, 1 -> {
                        Medium medium = Medium.values()[random.nextInt(2)];
                        boolean speculative = random.nextInt(3) == 0;
                        long bytes = random.nextInt((int) Math.min(Integer.MAX_VALUE, 2 * limit));
                        long latest = ticker.nanos() + random.nextInt(1_000_000) - 500_000;
                        long notBefore = speculative && random.nextBoolean()
                                ? ticker.nanos() + random.nextInt(1_000_000) : Long.MIN_VALUE;
                        Work work = new Work(step);
                        TransferScheduler.Request<Work> request = new TransferScheduler.Request<>(medium, bytes,
                                speculative ? TransferScheduler.TransferClass.SPECULATIVE
                                        : TransferScheduler.TransferClass.DEMAND, latest, notBefore,
                                random.nextInt(3), work);
                        try {
                            TransferScheduler.Entry<Work> entry = scheduler.enqueue(request);
                            live.add(entry);
                            byWork.put(work, entry);
                        } catch (PlanningException full) {
                            assertThat(full.failure()).isEqualTo(PlanningFailure.QUEUE_FULL);
                            assertThat(scheduler.queued(medium)).isEqualTo(maxQueued);
                        }
                        assertThat(scheduler.queued(medium)).isLessThanOrEqualTo(maxQueued);
                    }
                    case 2 -> {
                        long[] outstanding = new long[Medium.values().length];
                        long[] speculativeOutstanding = new long[Medium.values().length];
                        for (TransferScheduler.Entry<Work> entry : running) {
                            outstanding[entry.request().medium().ordinal()] += entry.request().bytes();
                            if (entry.request().transferClass() == TransferScheduler.TransferClass.SPECULATIVE) {
                                speculativeOutstanding[entry.request().medium().ordinal()] += entry.request().bytes();
                            }
                        }
                        long[] previousDemandSlack = new long[Medium.values().length];
                        java.util.Arrays.fill(previousDemandSlack, Long.MIN_VALUE);
                        for (Work work : scheduler.dispatch()) {
                            TransferScheduler.Entry<Work> entry = byWork.get(work);
                            TransferScheduler.Request<Work> r = entry.request();
                            int m = r.medium().ordinal();
                            assertThat(entry.dispatched()).isTrue();
                            boolean idle = outstanding[m] == 0;
                            assertThat(idle || outstanding[m] + r.bytes() <= limit)
                                    .as("%d bytes beside %d of %d", r.bytes(), outstanding[m], limit).isTrue();
                            if (r.transferClass() == TransferScheduler.TransferClass.SPECULATIVE) {
                                assertThat(speculativeLimit).as("no speculative share, nothing speculative").isPositive();
                                assertThat(idle || speculativeOutstanding[m] + r.bytes() <= speculativeLimit)
                                        .as("speculative %d beside %d of %d", r.bytes(), speculativeOutstanding[m],
                                                speculativeLimit).isTrue();
                                assertThat(r.notBeforeNanos()).isLessThanOrEqualTo(ticker.nanos());
                                assertThat(live.stream().filter(TransferScheduler.Entry::queued)
                                        .noneMatch(e -> e.request().medium() == r.medium() && e.request()
                                                .transferClass() == TransferScheduler.TransferClass.DEMAND))
                                        .as("no demand read waits while speculation starts").isTrue();
                                speculativeOutstanding[m] += r.bytes();
                            } else {
                                // Demand reads of one medium leave in slack order.
                                assertThat(r.latestStartNanos()).isGreaterThanOrEqualTo(previousDemandSlack[m]);
                                previousDemandSlack[m] = r.latestStartNanos();
                            }
                            outstanding[m] += r.bytes();
                            running.add(entry);
                        }
                    }
                    case 3 -> {
                        if (!running.isEmpty()) {
                            scheduler.completed(running.remove(random.nextInt(running.size())));
                        }
                    }
                    default -> {
                        if (random.nextBoolean() && !live.isEmpty()) {
                            TransferScheduler.Entry<Work> entry = live.get(random.nextInt(live.size()));
                            boolean wasQueued = entry.queued();
                            assertThat(scheduler.drop(entry)).isEqualTo(wasQueued);
                            assertThat(entry.queued()).isFalse();
                        }
                        ticker.advance(random.nextInt(300_000));
                    }
                }
                for (Medium medium : Medium.values()) {
                    assertThat(scheduler.outstandingBytes(medium)).as("outstanding bytes are the running transfers'")
                            .isEqualTo(running.stream().filter(e -> e.request().medium() == medium)
                                    .mapToLong(e -> e.request().bytes()).sum());
                }
            }
            for (Work work : dropped) {
                assertThat(live.stream().filter(e -> e.request().work() == work).findFirst().orElseThrow().queued())
                        .isFalse();
            }
        });
    }
}
