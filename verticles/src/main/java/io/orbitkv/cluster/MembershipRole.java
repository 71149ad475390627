package io.orbitkv.cluster;

import io.orbitkv.common.Ticker;
import io.etcd.jetcd.ByteSequence;
import io.etcd.jetcd.Client;
import io.etcd.jetcd.KeyValue;
import io.etcd.jetcd.Watch;
import io.etcd.jetcd.kv.GetResponse;
import io.etcd.jetcd.options.GetOption;
import io.etcd.jetcd.options.PutOption;
import io.etcd.jetcd.options.WatchOption;
import io.etcd.jetcd.watch.WatchEvent;
import io.etcd.jetcd.watch.WatchResponse;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.model.plan.MembershipView;
import io.orbitkv.model.plan.PeerOwner;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.VerticleBase;
import io.vertx.core.Vertx;
import io.vertx.core.internal.VertxInternal;
import io.vertx.core.internal.VertxWrapper;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import io.orbitkv.model.MemberChange;
import io.orbitkv.model.MemberRecord;

/**
 * The membership role: this Manager's member key in etcd, and the members it knows from etcd.
 *
 * <p>Design note (ownership and concurrency): the jetcd client runs on the Manager's own Vertx; every etcd answer and
 * watch event is handed to this verticle's context, which alone owns the {@link MemberTable}, the lease and the join
 * state. Readers on other threads ({@link #isCurrent}, the planner's per-record check) see an immutable map published
 * through a volatile field. Listeners are called on this context.
 *
 * <p>Design note (the session): one step at a time, driven by a timer every third of the lease ttl. Not joined: grant
 * a lease, put {@code prefix/members/<id>} with it (id, incarnation, epoch, endpoints, capabilities), read the prefix
 * and watch it from the revision after that read. Joined: keep the lease alive once per step; if etcd says the lease is
 * gone, join again with the next epoch. Any etcd failure marks the watch suspect, so the first step that reaches etcd
 * again re-reads the prefix and watches anew (the changes since are reported as joins, leaves and restarts). Every
 * etcd call has a deadline, so an unreachable etcd never stalls the step.
 *
 * <p>Design note (etcd down): engines never wait on etcd (it is not on any read path). While etcd does not answer,
 * the last known members stay current for one lease ttl (what they would have anyway); after that no peer is current:
 * listeners hear {@link Listener#onPeersUnknown()} and peer evidence ages out. When etcd answers again the Manager
 * rejoins (its own lease usually survived an etcd restart) and the peers become current again.
 *
 * <p>Design note (leaving): stop revokes the lease (bounded wait), so peers see the member leave at once; a Manager
 * that dies without stopping leaves when its lease expires.
 */
public final class MembershipRole extends VerticleBase implements MembershipView, MembershipPort {
    private static final Logger LOG = LoggerFactory.getLogger(MembershipRole.class);

    private final ClusterSettings settings;
    private final Ticker ticker;
    private final long incarnation;
    private final Map<String, String> endpoints;
    private final List<String> capabilities;
    private final MeterRegistry registry;
    private final List<Listener> listeners = new CopyOnWriteArrayList<>();
    private final MemberTable table;
    private final Promise<Void> firstJoin = Promise.promise();

    private Client client;
    private Context context;
    private long timer = -1;
    private boolean busy;
    private boolean stopping;
    private long leaseId;
    private volatile long epoch;
    private boolean watchSuspect = true;
    private Watch.Watcher watcher;
    private int watchGeneration;
    private long lastConfirmedNanos;
    private boolean peersKnown;
    private volatile Map<String, MemberRecord> current = Map.of();
    private volatile boolean etcdReachable;

    private Counter joins;
    private Counter etcdFailures;
    private Counter malformedMembers;

    public MembershipRole(ClusterSettings settings, long incarnation, Map<String, String> endpoints,
                          List<String> capabilities, MeterRegistry registry) {
        this(settings, incarnation, endpoints, capabilities, registry, Ticker.SYSTEM);
    }

    public MembershipRole(ClusterSettings settings, long incarnation, Map<String, String> endpoints,
                          List<String> capabilities, MeterRegistry registry, Ticker ticker) {
        this.ticker = ticker;
        this.settings = settings;
        this.incarnation = incarnation;
        this.endpoints = Map.copyOf(endpoints);
        this.capabilities = List.copyOf(capabilities);
        this.registry = registry;
        this.table = new MemberTable(settings.memberId());
    }

    @Override
    public void addListener(Listener listener) {
        listeners.add(listener);
    }

    public String memberId() {
        return settings.memberId();
    }

    public long incarnation() {
        return incarnation;
    }

    /** The epoch of the current registration (1 at the first join, +1 at each rejoin with a new lease). */
    public long epoch() {
        return epoch;
    }

    /** Completes when the member key was first written and the prefix read (never fails; etcd may be down). */
    public Future<Void> joined() {
        return firstJoin.future();
    }

    /** The members currently believed alive, this Manager included; only this Manager while peers are unknown. */
    public Map<String, MemberRecord> members() {
        return current;
    }

    public boolean etcdReachable() {
        return etcdReachable;
    }

    @Override
    public boolean isCurrent(PeerOwner owner) {
        if (owner.memberId().equals(settings.memberId())) {
            return false;
        }
        MemberRecord member = current.get(owner.memberId());
        return member != null && member.incarnation() == owner.incarnation();
    }

    @Override
    public Future<?> start() {
        context = vertx.getOrCreateContext();
        // jetcd runs on the Manager's Vertx through a view whose close() does nothing: jetcd's Client.close() closes
        // the Vertx it was given, and the Manager's must outlive this role (the ordered stop goes on after it).
        client = Client.builder().vertx(new BorrowedVertx(vertx)).endpoints(settings.etcdEndpoints().toArray(URI[]::new))
                .connectTimeout(Duration.ofMillis(stepDeadlineMillis()))
                .retryMaxAttempts(1).retryDelay(100).retryMaxDelay(500)
                .retryMaxDuration(Duration.ofMillis(stepDeadlineMillis()))
                .build();
        Gauge.builder("orbitkv.cluster.members", this, r -> r.current.size())
                .description("Cluster members this Manager believes alive (itself included)").register(registry);
        Gauge.builder("orbitkv.cluster.etcd.reachable", this, r -> r.etcdReachable ? 1 : 0)
                .description("1 while etcd answers this Manager").register(registry);
        joins = Counter.builder("orbitkv.cluster.joins").description("Member-key registrations (first join and rejoins)")
                .register(registry);
        etcdFailures = Counter.builder("orbitkv.cluster.etcd.failures")
                .description("etcd calls that failed or missed their deadline").register(registry);
        malformedMembers = Counter.builder("orbitkv.cluster.members.malformed")
                .description("Member keys whose value could not be read (skipped)").register(registry);
        current = Map.of(settings.memberId(), self());
        timer = vertx.setPeriodic(0, stepMillis(), id -> step());
        return Future.succeededFuture();
    }

    @Override
    public Future<?> stop() {
        stopping = true;
        vertx.cancelTimer(timer);
        closeWatcher();
        Future<?> revoked = leaseId == 0 ? Future.succeededFuture()
                : etcd(client.getLeaseClient().revoke(leaseId)).recover(e -> Future.succeededFuture());
        return revoked.eventually(() -> {
            client.close();
            return Future.succeededFuture();
        });
    }

    private long stepMillis() {
        return Math.max(200, settings.leaseTtlSeconds() * 1000L / 3);
    }

    private long stepDeadlineMillis() {
        return Math.max(500, settings.leaseTtlSeconds() * 1000L / 3);
    }

    private MemberRecord self() {
        return new MemberRecord(settings.memberId(), incarnation, Math.max(1, epoch), endpoints, capabilities);
    }

    // ---- the session step ----

    private void step() {
        ageOut();
        if (busy || stopping) {
            return;
        }
        busy = true;
        Future<Void> step = leaseId == 0 ? join() : keepAlive();
        step.onComplete(ar -> {
            busy = false;
            if (ar.failed() && !stopping) {
                etcdFailed(ar.cause());
            }
        });
    }

    private Future<Void> join() {
        return etcd(client.getLeaseClient().grant(settings.leaseTtlSeconds())).compose(grant -> {
            leaseId = grant.getID();
            epoch++;
            MemberRecord me = self();
            return etcd(client.getKVClient().put(bytes(settings.memberKey(settings.memberId())),
                    ByteSequence.from(me.toBytes()), PutOption.builder().withLeaseId(leaseId).build()));
        }).compose(put -> {
            joins.increment();
            LOG.info("cluster member {} joined with epoch {}", settings.memberId(), epoch);
            watchSuspect = true;
            return resync();
        }).onSuccess(v -> firstJoin.tryComplete());
    }

    private Future<Void> keepAlive() {
        return etcd(client.getLeaseClient().keepAliveOnce(leaseId)).transform(ar -> {
            if (ar.failed()) {
                if (String.valueOf(ar.cause().getMessage()).contains("lease not found")) {
                    return leaseLost();
                }
                return Future.failedFuture(ar.cause());
            }
            if (ar.result().getTTL() <= 0) {
                return leaseLost();
            }
            return watchSuspect ? resync() : confirmed();
        });
    }

    private Future<Void> leaseLost() {
        LOG.info("cluster member {}: its lease expired; joining again", settings.memberId());
        leaseId = 0;
        return join();
    }

    /** Re-reads the prefix, reports what changed, and watches from the revision after the read. */
    private Future<Void> resync() {
        ByteSequence prefix = bytes(settings.membersPrefix());
        return etcd(client.getKVClient().get(prefix, GetOption.builder().isPrefix(true).build())).compose(read -> {
            List<MemberRecord> records = new ArrayList<>();
            for (KeyValue kv : read.getKvs()) {
                parse(kv).ifPresent(records::add);
            }
            List<MemberChange> changes = table.replaceAll(records);
            watch(prefix, read);
            watchSuspect = false;
            changes.forEach(this::report);
            return confirmed();
        });
    }

    private void watch(ByteSequence prefix, GetResponse read) {
        closeWatcher();
        int generation = ++watchGeneration;
        WatchOption option = WatchOption.builder().isPrefix(true)
                .withRevision(read.getHeader().getRevision() + 1).build();
        watcher = client.getWatchClient().watch(prefix, option, Watch.listener(
                response -> context.runOnContext(v -> onWatch(generation, response)),
                error -> context.runOnContext(v -> onWatchError(generation, error))));
    }

    private void closeWatcher() {
        if (watcher != null) {
            watchGeneration++;
            try {
                watcher.close();
            } catch (RuntimeException ignored) {
                // A watcher whose stream already broke may complain on close; it is being replaced.
            }
            watcher = null;
        }
    }

    private void onWatch(int generation, WatchResponse response) {
        if (generation != watchGeneration || stopping) {
            return;
        }
        for (WatchEvent event : response.getEvents()) {
            String id = idOf(event.getKeyValue());
            if (event.getEventType() == WatchEvent.EventType.DELETE) {
                table.delete(id).ifPresent(this::report);
            } else if (event.getEventType() == WatchEvent.EventType.PUT) {
                parse(event.getKeyValue()).flatMap(table::put).ifPresent(this::report);
            }
        }
        publish();
    }

    private void onWatchError(int generation, Throwable error) {
        if (generation != watchGeneration || stopping) {
            return;
        }
        LOG.warn("cluster member {}: the member watch broke ({}); it is re-read at the next step",
                settings.memberId(), error.toString());
        watchSuspect = true;
    }

    private Future<Void> confirmed() {
        lastConfirmedNanos = ticker.nanos();
        etcdReachable = true;
        if (!peersKnown) {
            peersKnown = true;
            publish();
            listeners.forEach(Listener::onPeersKnown);
        } else {
            publish();
        }
        return Future.succeededFuture();
    }

    private void etcdFailed(Throwable cause) {
        etcdFailures.increment();
        if (etcdReachable) {
            LOG.warn("cluster member {}: etcd does not answer ({}); engines are still served, peers age out after {} s",
                    settings.memberId(), cause.toString(), settings.leaseTtlSeconds());
        }
        etcdReachable = false;
        watchSuspect = true;
        ageOut();
    }

    /** After a lease ttl without etcd, no peer is current. */
    private void ageOut() {
        if (peersKnown && ticker.nanos() - lastConfirmedNanos > TimeUnit.SECONDS.toNanos(settings.leaseTtlSeconds())) {
            peersKnown = false;
            LOG.warn("cluster member {}: no word from etcd for {} s: peers are no longer current",
                    settings.memberId(), settings.leaseTtlSeconds());
            publish();
            listeners.forEach(Listener::onPeersUnknown);
        }
    }

    private void report(MemberChange change) {
        publish();
        if (peersKnown) {
            listeners.forEach(l -> l.onMembership(change));
        }
    }

    private void publish() {
        if (!peersKnown) {
            current = Map.of(settings.memberId(), self());
            return;
        }
        Map<String, MemberRecord> next = new TreeMap<>(table.snapshot());
        next.put(settings.memberId(), self());
        current = Map.copyOf(next);
    }

    private Optional<MemberRecord> parse(KeyValue kv) {
        String id = idOf(kv);
        try {
            MemberRecord record = MemberRecord.parse(kv.getValue().getBytes());
            if (!record.id().equals(id)) {
                throw new IllegalArgumentException("member value names " + record.id() + " under the key of " + id);
            }
            if (record.id().equals(settings.memberId()) && record.incarnation() != incarnation) {
                // Our own key from a previous incarnation (its lease has not expired yet): not a peer, and ours
                // replaces it when we put.
                return Optional.empty();
            }
            return Optional.of(record);
        } catch (IllegalArgumentException e) {
            malformedMembers.increment();
            LOG.warn("cluster: skipped a malformed member key ({})", e.getMessage());
            return Optional.empty();
        }
    }

    private String idOf(KeyValue kv) {
        String key = kv.getKey().toString(StandardCharsets.UTF_8);
        return key.startsWith(settings.membersPrefix()) ? key.substring(settings.membersPrefix().length()) : key;
    }

    private static ByteSequence bytes(String s) {
        return ByteSequence.from(s, StandardCharsets.UTF_8);
    }

    /** An etcd call with this role's deadline, completing on this role's context. */
    private <T> Future<T> etcd(CompletableFuture<T> call) {
        return Future.fromCompletionStage(call, context).timeout(stepDeadlineMillis(), TimeUnit.MILLISECONDS);
    }

    /**
     * The Manager's Vertx lent to jetcd: everything is the Manager's, except {@code close()}, which leaves it running
     * (jetcd closes the Vertx it was given when its client closes). The client's channel is still shut down.
     */
    static final class BorrowedVertx extends VertxWrapper {
        BorrowedVertx(Vertx vertx) {
            super((VertxInternal) vertx);
        }

        @Override
        public Future<Void> close() {
            return Future.succeededFuture();
        }
    }
}
