package io.orbitkv.planning;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.orbitkv.common.Ticker;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.PriorityQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import io.orbitkv.model.plan.PlanningException;
import io.orbitkv.model.plan.PlanningFailure;
import io.orbitkv.model.plan.Medium;

/**
 * Per-medium transfer queues: which acquired segments may start moving payload now.
 *
 * <h2>Order</h2>
 * Demand reads go before speculative ones, always. Within a class, by arrival, or with {@link Settings#slackOrder} (config
 * {@code planning.transfers.order=slack}) by slack: the latest start time (first use minus the
 * estimated remaining critical path) ascending, then priority (higher first), then arrival. A demand read whose first
 * use is unknown has its latest start at its arrival (the engine is waiting now); a speculative read without a deadline
 * comes last.
 *
 * <h2>Bounds</h2>
 * <ul>
 *   <li>Outstanding (submitted, not yet terminal) bytes per medium stay at or below the medium's limit; a single
 *       transfer larger than the limit may start only when nothing else of that medium is outstanding, so it is never
 *       starved and never shares the medium.</li>
 *   <li>Speculative reads start only when no demand read of the medium is queued, only from their start time
 *       ({@code notBeforeNanos}), and only while speculative outstanding bytes stay within
 *       {@code speculativeFraction} of the limit: demand reads always find at least the rest of the medium.</li>
 *   <li>At most {@code maxQueuedPerMedium} transfers wait per medium. A demand read arriving at a full queue drops the
 *       queued speculative read with the most slack (before submission: its owner's leases are released by the
 *       drop listener); if there is none it is refused ({@link PlanningFailure#QUEUE_FULL}). A speculative read
 *       arriving at a full queue is refused and counted.</li>
 * </ul>
 * A transfer leaves the scheduler's hands once dispatched: the caller submits it and reports {@link #completed} when
 * its I/O is terminal. Only queued transfers can be dropped.
 *
 * <h2>Metrics</h2>
 * {@code orbitkv.planning.queue.wait{class}} (queued → dispatched), {@code orbitkv.planning.outstanding.bytes{medium}},
 * {@code orbitkv.planning.queued{medium}}, {@code orbitkv.planning.speculation.dropped{reason}}. Labels are small enums.
 *
 * <p>Concurrency: confined to the planning role's event loop, except the gauges, which read atomics.
 *
 * @param <T> what the caller schedules (its own transfer record)
 */
public final class TransferScheduler<T> {

    public enum TransferClass { DEMAND, SPECULATIVE }

    /** Why speculation was dropped before submission (metric label). */
    public enum DropReason { PREEMPTED, CANCELLED, QUEUE_FULL }

    /**
     * @param outstandingLimitBytes per medium; a medium without a limit is unbounded
     * @param speculativeFraction   of a medium's limit that speculative transfers may hold outstanding, in [0, 1]
     * @param maxQueuedPerMedium    waiting transfers per medium
     * @param slackOrder            within a class, by slack (the default); false: by arrival only
     */
    public record Settings(Map<Medium, Long> outstandingLimitBytes, double speculativeFraction, int maxQueuedPerMedium,
                           boolean slackOrder) {
        public Settings(Map<Medium, Long> outstandingLimitBytes, double speculativeFraction, int maxQueuedPerMedium) {
            this(outstandingLimitBytes, speculativeFraction, maxQueuedPerMedium, true);
        }

        /** The same settings, ordering each class by slack or by arrival only. */
        public Settings withSlackOrder(boolean slack) {
            return new Settings(outstandingLimitBytes, speculativeFraction, maxQueuedPerMedium, slack);
        }

        public Settings {
            EnumMap<Medium, Long> copy = new EnumMap<>(Medium.class);
            copy.putAll(outstandingLimitBytes);
            copy.values().forEach(limit -> {
                if (limit <= 0) {
                    throw new IllegalArgumentException("outstanding limit " + limit + " must be > 0");
                }
            });
            outstandingLimitBytes = java.util.Collections.unmodifiableMap(copy);
            if (!(speculativeFraction >= 0 && speculativeFraction <= 1)) {
                throw new IllegalArgumentException("speculative fraction " + speculativeFraction + " is outside [0, 1]");
            }
            if (maxQueuedPerMedium < 1) {
                throw new IllegalArgumentException("maxQueuedPerMedium must be >= 1");
            }
        }

        /** One limit for every medium. */
        public static Settings uniform(long limitBytes, double speculativeFraction, int maxQueuedPerMedium) {
            EnumMap<Medium, Long> limits = new EnumMap<>(Medium.class);
            for (Medium medium : Medium.values()) {
                limits.put(medium, limitBytes);
            }
            return new Settings(limits, speculativeFraction, maxQueuedPerMedium);
        }

        long limit(Medium medium) {
            return outstandingLimitBytes.getOrDefault(medium, Long.MAX_VALUE);
        }
    }

    /**
     * One transfer to schedule.
     *
     * @param latestStartNanos when it must start to be ready by first use ({@link Long#MAX_VALUE}: no deadline)
     * @param notBeforeNanos   not before this (speculative prefetch start); {@link Long#MIN_VALUE}: at once
     */
    public record Request<T>(Medium medium, long bytes, TransferClass transferClass, long latestStartNanos,
                             long notBeforeNanos, int priority, T work) {
        public Request {
            Objects.requireNonNull(medium, "medium");
            Objects.requireNonNull(transferClass, "transferClass");
            Objects.requireNonNull(work, "work");
            if (bytes < 0) {
                throw new IllegalArgumentException("bytes " + bytes + " is negative");
            }
        }
    }

    /** The scheduler's handle on an enqueued transfer. */
    public static final class Entry<T> {
        private final Request<T> request;
        private final long sequence;
        private final long enqueuedNanos;
        private State state = State.QUEUED;

        enum State { QUEUED, DISPATCHED, COMPLETED, DROPPED }

        private Entry(Request<T> request, long sequence, long enqueuedNanos) {
            this.request = request;
            this.sequence = sequence;
            this.enqueuedNanos = enqueuedNanos;
        }

        public Request<T> request() {
            return request;
        }

        public boolean queued() {
            return state == State.QUEUED;
        }

        public boolean dispatched() {
            return state == State.DISPATCHED;
        }
    }

    private final class MediumQueue {
        final Medium medium;
        final long limit;
        final long speculativeLimit;
        final PriorityQueue<Entry<T>> demand = new PriorityQueue<>(ORDER);
        final PriorityQueue<Entry<T>> speculative = new PriorityQueue<>(ORDER);
        final AtomicLong outstandingBytes = new AtomicLong();
        final AtomicLong queued = new AtomicLong();
        long speculativeOutstandingBytes;

        MediumQueue(Medium medium) {
            this.medium = medium;
            this.limit = settings.limit(medium);
            this.speculativeLimit = limit == Long.MAX_VALUE ? Long.MAX_VALUE
                    : (long) Math.floor(limit * settings.speculativeFraction());
        }

        int size() {
            return demand.size() + speculative.size();
        }
    }

    private final Comparator<Entry<T>> SLACK = Comparator
            .<Entry<T>>comparingLong(e -> e.request.latestStartNanos())
            .thenComparing(Comparator.<Entry<T>>comparingInt(e -> e.request.priority()).reversed())
            .thenComparingLong(e -> e.sequence);
    // Arrival order only is the ablation of slack ordering (planning.transfers.order=arrival).
    private final Comparator<Entry<T>> ORDER;

    private final Settings settings;
    private final Ticker ticker;
    private final Consumer<T> onDropped;
    private final Map<Medium, MediumQueue> queues = new EnumMap<>(Medium.class);
    private final Map<TransferClass, Timer> queueWait = new EnumMap<>(TransferClass.class);
    private final Map<DropReason, Counter> dropped = new EnumMap<>(DropReason.class);
    private long nextSequence;

    /**
     * @param onDropped told when a queued speculative transfer is dropped to make room for a demand read (the owner of
     *                  the work must release what it holds); not called for {@link #drop} (the caller knows)
     */
    public TransferScheduler(Settings settings, Ticker ticker, MeterRegistry registry, Consumer<T> onDropped) {
        this.settings = Objects.requireNonNull(settings, "settings");
        this.ORDER = settings.slackOrder() ? SLACK : Comparator.comparingLong(e -> e.sequence);
        this.ticker = Objects.requireNonNull(ticker, "ticker");
        this.onDropped = Objects.requireNonNull(onDropped, "onDropped");
        for (Medium medium : Medium.values()) {
            MediumQueue queue = new MediumQueue(medium);
            queues.put(medium, queue);
            String label = medium.name().toLowerCase(Locale.ROOT);
            Gauge.builder("orbitkv.planning.outstanding.bytes", queue.outstandingBytes, AtomicLong::get)
                    .tag("medium", label).baseUnit("bytes")
                    .description("Bytes of submitted transfers not yet terminal, per source medium").register(registry);
            Gauge.builder("orbitkv.planning.queued", queue.queued, AtomicLong::get).tag("medium", label)
                    .description("Transfers waiting to be submitted, per source medium").register(registry);
        }
        for (TransferClass transferClass : TransferClass.values()) {
            queueWait.put(transferClass, Timer.builder("orbitkv.planning.queue.wait")
                    .tag("class", transferClass.name().toLowerCase(Locale.ROOT))
                    .description("Time transfers waited in the planning queues before submission").register(registry));
        }
        for (DropReason reason : DropReason.values()) {
            dropped.put(reason, Counter.builder("orbitkv.planning.speculation.dropped")
                    .tag("reason", reason.name().toLowerCase(Locale.ROOT))
                    .description("Speculative transfers dropped before submission").register(registry));
        }
    }

    /**
     * Queues a transfer.
     *
     * @throws PlanningException {@link PlanningFailure#QUEUE_FULL} when the medium's queue is full and (for a demand
     *                           read) nothing speculative could make room
     */
    public Entry<T> enqueue(Request<T> request) {
        MediumQueue queue = queues.get(request.medium());
        if (queue.size() >= settings.maxQueuedPerMedium()) {
            if (request.transferClass() == TransferClass.SPECULATIVE || queue.speculative.isEmpty()) {
                if (request.transferClass() == TransferClass.SPECULATIVE) {
                    dropped.get(DropReason.QUEUE_FULL).increment();
                }
                throw new PlanningException(PlanningFailure.QUEUE_FULL, queue.size() + " transfers already wait for "
                        + request.medium());
            }
            Entry<T> victim = mostSlack(queue.speculative);
            queue.speculative.remove(victim);
            queue.queued.decrementAndGet();
            victim.state = Entry.State.DROPPED;
            dropped.get(DropReason.PREEMPTED).increment();
            onDropped.accept(victim.request.work());
        }
        Entry<T> entry = new Entry<>(request, nextSequence++, ticker.nanos());
        (request.transferClass() == TransferClass.DEMAND ? queue.demand : queue.speculative).add(entry);
        queue.queued.incrementAndGet();
        return entry;
    }

    private Entry<T> mostSlack(PriorityQueue<Entry<T>> speculative) {
        Entry<T> worst = null;
        for (Entry<T> entry : speculative) {
            if (worst == null || ORDER.compare(entry, worst) > 0) {
                worst = entry;
            }
        }
        return worst;
    }

    /** The transfers that may start now, in order; each is outstanding from here until {@link #completed}. */
    public List<T> dispatch() {
        long now = ticker.nanos();
        List<T> started = new ArrayList<>();
        for (MediumQueue queue : queues.values()) {
            while (!queue.demand.isEmpty() && fits(queue, queue.demand.peek(), false)) {
                started.add(start(queue, queue.demand.poll(), now));
            }
            if (!queue.demand.isEmpty()) {
                continue; // a waiting demand read: nothing speculative may take the medium meanwhile
            }
            List<Entry<T>> notYet = new ArrayList<>();
            while (!queue.speculative.isEmpty()) {
                Entry<T> head = queue.speculative.peek();
                if (head.request.notBeforeNanos() > now) { // plain comparison: MIN_VALUE is a sentinel
                    notYet.add(queue.speculative.poll());
                    continue;
                }
                if (!fits(queue, head, true)) {
                    break;
                }
                started.add(start(queue, queue.speculative.poll(), now));
            }
            queue.speculative.addAll(notYet);
        }
        return started;
    }

    private boolean fits(MediumQueue queue, Entry<T> entry, boolean speculative) {
        long bytes = entry.request.bytes();
        long outstanding = queue.outstandingBytes.get();
        if (speculative && queue.speculativeLimit == 0) {
            return false;
        }
        if (outstanding == 0) {
            return true; // an idle medium takes anything, even one transfer above its limit
        }
        if (bytes > queue.limit - outstanding) {
            return false;
        }
        return !speculative || bytes <= queue.speculativeLimit - queue.speculativeOutstandingBytes;
    }

    private T start(MediumQueue queue, Entry<T> entry, long now) {
        entry.state = Entry.State.DISPATCHED;
        queue.queued.decrementAndGet();
        queue.outstandingBytes.addAndGet(entry.request.bytes());
        if (entry.request.transferClass() == TransferClass.SPECULATIVE) {
            queue.speculativeOutstandingBytes += entry.request.bytes();
        }
        queueWait.get(entry.request.transferClass()).record(Math.max(0, now - entry.enqueuedNanos), TimeUnit.NANOSECONDS);
        return entry.request.work();
    }

    /** A dispatched transfer's I/O is terminal: its bytes stop counting against the medium. */
    public void completed(Entry<T> entry) {
        if (entry.state != Entry.State.DISPATCHED) {
            throw new IllegalStateException("completed a transfer that is " + entry.state);
        }
        entry.state = Entry.State.COMPLETED;
        MediumQueue queue = queues.get(entry.request.medium());
        queue.outstandingBytes.addAndGet(-entry.request.bytes());
        if (entry.request.transferClass() == TransferClass.SPECULATIVE) {
            queue.speculativeOutstandingBytes -= entry.request.bytes();
        }
    }

    /** Drops a queued transfer (cancellation); false when it was already dispatched, completed or dropped. */
    public boolean drop(Entry<T> entry) {
        if (entry.state != Entry.State.QUEUED) {
            return false;
        }
        MediumQueue queue = queues.get(entry.request.medium());
        boolean removed = (entry.request.transferClass() == TransferClass.DEMAND ? queue.demand : queue.speculative)
                .remove(entry);
        if (!removed) {
            throw new IllegalStateException("a queued entry is missing from its queue");
        }
        queue.queued.decrementAndGet();
        entry.state = Entry.State.DROPPED;
        if (entry.request.transferClass() == TransferClass.SPECULATIVE) {
            dropped.get(DropReason.CANCELLED).increment();
        }
        return true;
    }

    /**
     * Turns a queued speculative transfer into a demand read due by {@code latestStartNanos} (a real demand took over
     * the hint that queued it): it leaves the speculative queue, keeps its arrival (its queue wait counts from then) and
     * from now on is ordered, bounded and protected like any demand read. Empty when it is not a queued speculative
     * transfer (already dispatched, completed or dropped, or a demand read already).
     */
    public Optional<Entry<T>> promote(Entry<T> entry, long latestStartNanos) {
        if (entry.state != Entry.State.QUEUED || entry.request.transferClass() != TransferClass.SPECULATIVE) {
            return Optional.empty();
        }
        MediumQueue queue = queues.get(entry.request.medium());
        if (!queue.speculative.remove(entry)) {
            throw new IllegalStateException("a queued entry is missing from its queue");
        }
        entry.state = Entry.State.DROPPED;
        Request<T> request = entry.request;
        Entry<T> promoted = new Entry<>(new Request<>(request.medium(), request.bytes(), TransferClass.DEMAND,
                latestStartNanos, Long.MIN_VALUE, request.priority(), request.work()), nextSequence++,
                entry.enqueuedNanos);
        queue.demand.add(promoted);
        return Optional.of(promoted);
    }

    /**
     * The earliest start time of a queued speculative transfer that is waiting only for its time (none while a demand
     * read waits on its medium); the caller arms a timer and calls {@link #dispatch} then.
     */
    public OptionalLong nextStartNanos() {
        long earliest = Long.MAX_VALUE;
        boolean any = false;
        long now = ticker.nanos();
        for (MediumQueue queue : queues.values()) {
            if (!queue.demand.isEmpty()) {
                continue;
            }
            for (Entry<T> entry : queue.speculative) {
                if (entry.request.notBeforeNanos() > now && entry.request.notBeforeNanos() < earliest) {
                    earliest = entry.request.notBeforeNanos();
                    any = true;
                }
            }
        }
        return any ? OptionalLong.of(earliest) : OptionalLong.empty();
    }

    public long outstandingBytes(Medium medium) {
        return queues.get(medium).outstandingBytes.get();
    }

    public long speculativeOutstandingBytes(Medium medium) {
        return queues.get(medium).speculativeOutstandingBytes;
    }

    public int queued(Medium medium) {
        return queues.get(medium).size();
    }
}
