package io.orbitkv.admission;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.common.LocalCodec;
import io.orbitkv.common.OrbitException;
import io.orbitkv.common.RoleProxies;
import io.orbitkv.common.Ticker;
import io.orbitkv.protocol.engine.ErrorReason;
import io.orbitkv.storage.ImageStore;
import io.orbitkv.storage.StateKey;
import io.orbitkv.storage.StorageProxy;
import io.vertx.core.Future;
import io.vertx.core.VerticleBase;
import io.vertx.core.eventbus.EventBus;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The admission role: query tickets, their waiting budgets, and the leases handed to engines.
 *
 * <p>Design note (ownership): a lease owns the storage pins taken for it; it ends by an engine release, by cancel of
 * its ticket, or by the end of its instance's session, and each path unpins exactly once (the lease is removed from
 * the table before the unpin is sent). A ticket that is PENDING owns nothing: every poll re-runs the lookup. A READY
 * or MISS answer is kept for {@code replyTtlNanos} so a repeated poll gets the same answer, then forgotten; the lease
 * outlives its ticket's answer.
 *
 * <p>Bounds: outstanding (PENDING) tickets per instance and in total; leased bytes in total (the query byte budget).
 * A refusal changes nothing and is counted by reason.
 *
 * <p>Concurrency: all state is confined to this verticle's event loop.
 */
public final class AdmissionVerticle extends VerticleBase {
    /** Settings of the admission role. */
    public record Settings(int maxOutstandingPerInstance, int maxOutstanding, long waitBudgetNanos,
                           long replyTtlNanos, long leaseBudgetBytes) {}

    private static final class Ticket {
        final long id;
        final long instance;
        final List<List<StateKey>> chains;
        final long revision;
        final long createdNanos;
        AdmissionCommands.Outcome answer;
        long answerExpiresNanos;
        boolean lookupInFlight;

        Ticket(long id, long instance, List<List<StateKey>> chains, long revision, long createdNanos) {
            this.id = id;
            this.instance = instance;
            this.chains = chains;
            this.revision = revision;
            this.createdNanos = createdNanos;
        }
    }

    private record Lease(long id, long instance, long ticket, List<List<ImageStore.ImageRef>> pinned, long bytes) {}

    private final Settings settings;
    private final MeterRegistry registry;
    private final Ticker ticker;
    private StorageProxy storage;
    private final Map<Long, Ticket> tickets = new HashMap<>();
    private final Map<Long, Lease> leases = new HashMap<>();
    private final Map<Long, Integer> outstandingByInstance = new HashMap<>();
    private final Map<AdmissionCommands.Status, Counter> queriesByOutcome = new EnumMap<>(AdmissionCommands.Status.class);
    private Counter restoredBytes;
    private long outstanding;
    private long leasedBytes;
    private long nextTicket = 1;
    private long nextLease = 1;
    private long sweepTimer;

    public AdmissionVerticle(Settings settings, MeterRegistry registry, Ticker ticker) {
        this.settings = settings;
        this.registry = registry;
        this.ticker = ticker;
    }

    @Override
    public Future<?> start() {
        storage = new StorageProxy(vertx);
        for (AdmissionCommands.Status status : AdmissionCommands.Status.values()) {
            queriesByOutcome.put(status, Counter.builder("orbitkv.queries").tag("outcome", status.name().toLowerCase())
                    .description("Query answers by outcome").register(registry));
        }
        restoredBytes = Counter.builder("orbitkv.restored.bytes").baseUnit("bytes")
                .description("Bytes handed to engines under READY leases").register(registry);
        Gauge.builder("orbitkv.leases.active", leases, Map::size).description("Leases held by engines").register(registry);
        Gauge.builder("orbitkv.leases.bytes", this, v -> v.leasedBytes).baseUnit("bytes")
                .description("Bytes pinned by leases").register(registry);
        Gauge.builder("orbitkv.queries.outstanding", this, v -> v.outstanding).description("PENDING tickets").register(registry);
        EventBus bus = vertx.eventBus();
        LocalCodec.register(vertx, AdmissionCommands.MESSAGE_TYPES.toArray(Class<?>[]::new));
        RoleProxies.<AdmissionCommands.Submit, AdmissionCommands.Outcome>serve(bus, AdmissionProxy.SUBMIT, this::onSubmit);
        RoleProxies.<AdmissionCommands.Poll, AdmissionCommands.Outcome>serve(bus, AdmissionProxy.POLL, this::onPoll);
        RoleProxies.<AdmissionCommands.Cancel, Boolean>serve(bus, AdmissionProxy.CANCEL, this::onCancel);
        RoleProxies.<AdmissionCommands.Release, Integer>serve(bus, AdmissionProxy.RELEASE, this::onRelease);
        RoleProxies.<AdmissionCommands.ReleaseInstance, AdmissionCommands.InstanceReleased>serve(bus,
                AdmissionProxy.RELEASE_INSTANCE, this::onReleaseInstance);
        RoleProxies.<AdmissionCommands.GetStats, AdmissionCommands.AdmissionStats>serve(bus, AdmissionProxy.STATS,
                c -> Future.succeededFuture(stats(c.instance())));
        sweepTimer = vertx.setPeriodic(1000, id -> sweepExpiredAnswers());
        return Future.succeededFuture();
    }

    @Override
    public Future<?> stop() {
        vertx.cancelTimer(sweepTimer);
        return Future.succeededFuture();
    }

    private Future<AdmissionCommands.Outcome> onSubmit(AdmissionCommands.Submit c) {
        if (outstanding >= settings.maxOutstanding()) {
            throw new OrbitException(ErrorReason.TOO_MANY_OUTSTANDING, "the Manager has " + outstanding + " outstanding queries");
        }
        int mine = outstandingByInstance.getOrDefault(c.instance(), 0);
        if (mine >= settings.maxOutstandingPerInstance()) {
            throw new OrbitException(ErrorReason.TOO_MANY_OUTSTANDING, "this instance has " + mine + " outstanding queries");
        }
        Ticket ticket = new Ticket(nextTicket++, c.instance(), c.chains(), c.revision(), ticker.nanos());
        tickets.put(ticket.id, ticket);
        markOutstanding(ticket, +1);
        return evaluate(ticket);
    }

    private Future<AdmissionCommands.Outcome> onPoll(AdmissionCommands.Poll c) {
        Ticket ticket = ownedTicket(c.instance(), c.ticket());
        if (ticket.answer != null) {
            return Future.succeededFuture(ticket.answer);
        }
        if (ticket.lookupInFlight) {
            return Future.succeededFuture(pending(ticket));
        }
        return evaluate(ticket);
    }

    /** Looks the ticket's chains up, pins the resident prefix, and turns the result into an answer. */
    private Future<AdmissionCommands.Outcome> evaluate(Ticket ticket) {
        ticket.lookupInFlight = true;
        return storage.lookupAndPin(ticket.chains).compose(lookup -> {
            ticket.lookupInFlight = false;
            boolean ticketGone = tickets.get(ticket.id) != ticket;
            boolean waitLeft = ticker.nanos() - ticket.createdNanos < settings.waitBudgetNanos();
            if (ticketGone || (lookup.pendingExtension() && waitLeft) || lookup.readyBlocks() == 0) {
                Future<Integer> unpinned = lookup.readyBlocks() == 0 ? Future.succeededFuture(0) : storage.unpin(lookup.pinned());
                if (ticketGone) {
                    return unpinned.map(n -> pending(ticket));
                }
                if (lookup.pendingExtension() && waitLeft) {
                    return unpinned.map(n -> pending(ticket));
                }
                return unpinned.map(n -> answer(ticket, AdmissionCommands.Status.MISS, 0, 0, List.of()));
            }
            if (leasedBytes + lookup.pinnedBytes() > settings.leaseBudgetBytes()) {
                return storage.unpin(lookup.pinned()).compose(n -> {
                    finish(ticket);
                    return Future.failedFuture(new OrbitException(ErrorReason.BUDGET_EXCEEDED, "leases would pin "
                            + (leasedBytes + lookup.pinnedBytes()) + " bytes, query byte budget " + settings.leaseBudgetBytes()));
                });
            }
            Lease lease = new Lease(nextLease++, ticket.instance, ticket.id, lookup.pinned(), lookup.pinnedBytes());
            leases.put(lease.id(), lease);
            leasedBytes += lease.bytes();
            restoredBytes.increment(lease.bytes());
            return Future.succeededFuture(answer(ticket, AdmissionCommands.Status.READY, lookup.readyBlocks(), lease.id(), lease.pinned()));
        }, failure -> {
            ticket.lookupInFlight = false;
            finish(ticket);
            return Future.failedFuture(failure);
        });
    }

    private AdmissionCommands.Outcome pending(Ticket ticket) {
        queriesByOutcome.get(AdmissionCommands.Status.PENDING).increment();
        return new AdmissionCommands.Outcome(ticket.id, AdmissionCommands.Status.PENDING, 0, 0, List.of(),
                ticket.revision, 1000);
    }

    private AdmissionCommands.Outcome answer(Ticket ticket, AdmissionCommands.Status status, int blocks, long leaseId,
                                             List<List<ImageStore.ImageRef>> leased) {
        ticket.answer = new AdmissionCommands.Outcome(ticket.id, status, blocks, leaseId, leased, ticket.revision, 0);
        ticket.answerExpiresNanos = ticker.nanos() + settings.replyTtlNanos();
        markOutstanding(ticket, -1);
        queriesByOutcome.get(status).increment();
        return ticket.answer;
    }

    private void finish(Ticket ticket) {
        if (tickets.remove(ticket.id) != null && ticket.answer == null) {
            markOutstanding(ticket, -1);
        }
    }

    private void markOutstanding(Ticket ticket, int delta) {
        outstanding += delta;
        outstandingByInstance.merge(ticket.instance, delta, Integer::sum);
        outstandingByInstance.remove(ticket.instance, 0);
    }

    private Ticket ownedTicket(long instance, long id) {
        Ticket ticket = tickets.get(id);
        if (ticket == null || ticket.instance != instance) {
            throw new OrbitException(ErrorReason.UNKNOWN_TICKET, "no ticket " + id + " for this instance (never issued, cancelled or expired)");
        }
        return ticket;
    }

    private Future<Boolean> onCancel(AdmissionCommands.Cancel c) {
        Ticket ticket = ownedTicket(c.instance(), c.ticket());
        finish(ticket);
        if (ticket.answer != null && ticket.answer.leaseId() != 0 && leases.containsKey(ticket.answer.leaseId())) {
            return endLease(leases.get(ticket.answer.leaseId())).map(n -> true);
        }
        return Future.succeededFuture(true);
    }

    private Future<Integer> onRelease(AdmissionCommands.Release c) {
        Lease lease = leases.get(c.leaseId());
        if (lease == null || lease.instance() != c.instance()) {
            throw new OrbitException(ErrorReason.UNKNOWN_LEASE, "no lease " + c.leaseId() + " held by this instance (never granted or already released)");
        }
        return endLease(lease);
    }

    private Future<Integer> endLease(Lease lease) {
        leases.remove(lease.id());
        leasedBytes -= lease.bytes();
        int pages = lease.pinned().stream().mapToInt(List::size).sum();
        return storage.unpin(lease.pinned()).map(n -> pages);
    }

    private Future<AdmissionCommands.InstanceReleased> onReleaseInstance(AdmissionCommands.ReleaseInstance c) {
        List<Future<Integer>> unpins = new ArrayList<>();
        int leaseCount = 0;
        for (Lease lease : List.copyOf(leases.values())) {
            if (lease.instance() == c.instance()) {
                leaseCount++;
                unpins.add(endLease(lease));
            }
        }
        int queries = 0;
        for (Iterator<Ticket> it = tickets.values().iterator(); it.hasNext(); ) {
            Ticket ticket = it.next();
            if (ticket.instance == c.instance()) {
                it.remove();
                if (ticket.answer == null) {
                    markOutstanding(ticket, -1);
                    queries++;
                }
            }
        }
        int released = leaseCount;
        int cancelled = queries;
        return Future.all(unpins).map(v -> new AdmissionCommands.InstanceReleased(released, cancelled));
    }

    private void sweepExpiredAnswers() {
        long now = ticker.nanos();
        tickets.values().removeIf(t -> t.answer != null && now - t.answerExpiresNanos > 0);
    }

    private AdmissionCommands.AdmissionStats stats(long instance) {
        long mine = leases.values().stream().filter(l -> l.instance() == instance).count();
        return new AdmissionCommands.AdmissionStats(leases.size(), leasedBytes, outstanding, mine,
                outstandingByInstance.getOrDefault(instance, 0));
    }

    static long millisToNanos(long millis) {
        return TimeUnit.MILLISECONDS.toNanos(millis);
    }
}
