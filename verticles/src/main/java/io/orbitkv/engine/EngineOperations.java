package io.orbitkv.engine;

import io.orbitkv.admission.AdmissionCommands;
import io.orbitkv.admission.AdmissionProxy;
import io.orbitkv.model.TenantName;
import io.orbitkv.common.OrbitException;
import io.orbitkv.common.Ticker;
import io.orbitkv.protocol.engine.AbortPublishReply;
import io.orbitkv.protocol.engine.AbortPublishRequest;
import io.orbitkv.protocol.engine.AllocatePublishReply;
import io.orbitkv.protocol.engine.AllocatePublishRequest;
import io.orbitkv.protocol.engine.CancelQueryReply;
import io.orbitkv.protocol.engine.CancelQueryRequest;
import io.orbitkv.protocol.engine.ErrorReason;
import io.orbitkv.protocol.engine.GroupSpec;
import io.orbitkv.protocol.engine.HeartbeatReply;
import io.orbitkv.protocol.engine.HeartbeatRequest;
import io.orbitkv.protocol.engine.PageKey;
import io.orbitkv.protocol.engine.PingReply;
import io.orbitkv.protocol.engine.PingRequest;
import io.orbitkv.protocol.engine.PollQueryRequest;
import io.orbitkv.protocol.engine.QueryReply;
import io.orbitkv.protocol.engine.RegisterReply;
import io.orbitkv.protocol.engine.RegisterRequest;
import io.orbitkv.protocol.engine.ReleaseLeaseReply;
import io.orbitkv.protocol.engine.ReleaseLeaseRequest;
import io.orbitkv.protocol.engine.GroupChain;
import io.orbitkv.protocol.engine.RetainReply;
import io.orbitkv.protocol.engine.RetainRequest;
import io.orbitkv.protocol.engine.UnretainReply;
import io.orbitkv.protocol.engine.UnretainRequest;
import io.orbitkv.protocol.engine.SealPublishReply;
import io.orbitkv.protocol.engine.SealPublishRequest;
import io.orbitkv.protocol.engine.StatsReply;
import io.orbitkv.protocol.engine.StatsRequest;
import io.orbitkv.protocol.engine.SubmitDemandRequest;
import io.orbitkv.protocol.engine.SubmitQueryRequest;
import io.orbitkv.protocol.engine.UnregisterReply;
import io.orbitkv.protocol.engine.UnregisterRequest;
import io.orbitkv.recovery.RecoveryRules;
import io.orbitkv.restore.RestoreCommands;
import io.orbitkv.restore.RestoreProxy;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.StateKey;
import io.orbitkv.storage.StorageProxy;
import io.vertx.core.Future;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The engine API's operations, one method per call of engine.proto, independent of the door they arrive through:
 * the gRPC door ({@link GrpcEngineDoor}) and the event-bus bridge ({@link BridgeEngineDoor}) each authenticate,
 * decode and answer with their own transport, and call these methods through the one list {@link EngineCall#all}. Each call is checked against its session (instance,
 * epoch, namespace, groups, sizes) by {@link EngineRequests} <em>before</em> anything is forwarded to admission or
 * storage, so bad input changes nothing; refusals are {@link OrbitException}s with their wire reason.
 *
 * <p>Session end (unregister, resume, ttl lapse) runs {@link SessionCleanup}: leases and queries, then unsealed
 * publishes, every step even if one fails; the slots go into quarantine and the ended leases become tombstones, so a
 * late release is answered {@code lease_valid = false}. Confined to the engine role's event loop.
 */
final class EngineOperations {
    private static final Logger LOG = LoggerFactory.getLogger(EngineOperations.class);
    /** Lease tombstones kept at most (see {@link LeaseTombstones}). */
    static final int MAX_LEASE_TOMBSTONES = 1 << 16;

    private final EngineSettings settings;
    private final SessionRegistry sessions;
    private final LeaseTombstones tombstones;
    private final SessionCleanup cleanup;
    private final EngineRequests requests;
    private final AdmissionProxy admission;
    private final StorageProxy storage;
    private final EngineMetrics metrics;
    private final RestoreProxy restore;
    /** What producer sessions sealed under their requests (P/D, Demand.producer). */
    private final ProducerSeals producers;
    /** Each instance's validated restore destinations (the restore role owns their mappings). */
    private final Map<Long, Map<Integer, RestoreCommands.DestinationSpec>> destinations = new HashMap<>();
    private volatile int registeredInstances;

    EngineOperations(EngineSettings settings, Ticker ticker, AdmissionProxy admission, StorageProxy storage,
                     EngineMetrics metrics) {
        this(settings, ticker, admission, storage, metrics, null);
    }

    /** {@code restore} null: no restore role (destinations are refused with ROUTE_UNAVAILABLE). */
    EngineOperations(EngineSettings settings, Ticker ticker, AdmissionProxy admission, StorageProxy storage,
                     EngineMetrics metrics, RestoreProxy restore) {
        this.restore = restore;
        this.settings = settings;
        this.sessions = new SessionRegistry(ticker, settings.sessionTtlNanos(), settings.maxSessions(), 1);
        this.tombstones = new LeaseTombstones(ticker, settings.quarantineNanos(), MAX_LEASE_TOMBSTONES);
        this.cleanup = new SessionCleanup(admission, storage, tombstones, settings.cleanupFaults());
        this.requests = new EngineRequests(settings.maxPagesPerRequest(), settings.poolBytes());
        this.admission = admission;
        this.storage = storage;
        this.metrics = metrics;
        this.producers = new ProducerSeals(sessions::live);
    }

    ProducerSeals producerSeals() {
        return producers;
    }

    /** Registered instances (for the gauge; written on the role's loop, read by the scrape). */
    int registeredInstances() {
        return registeredInstances;
    }

    long droppedTombstones() {
        return tombstones.dropped();
    }

    /** Ends the sessions that lapsed and forgets old tombstones; called periodically by the engine role. */
    void sweep() {
        for (SessionRegistry.Instance lapsed : sessions.expire()) {
            registeredInstances = sessions.size();
            endSession(lapsed.id()).onFailure(e -> reportCleanupFailure("a lapsed session", e));
        }
        tombstones.expire();
    }

    /**
     * A session ended: admission and storage release what it held ({@link SessionCleanup}), then the restore role,
     * whose restores drained with the leases, unmaps its destinations.
     */
    private Future<SessionCleanup.Released> endSession(long instance) {
        Map<Integer, RestoreCommands.DestinationSpec> mine = destinations.remove(instance);
        producers.ended(instance);
        Future<SessionCleanup.Released> released = cleanup.release(instance);
        if (mine == null || restore == null) {
            return released;
        }
        return released.transform(ar -> restore.releaseInstance(instance).transform(unmapped -> {
            if (unmapped.failed()) {
                reportCleanupFailure("restore destinations", unmapped.cause());
            }
            return ar.succeeded() ? Future.succeededFuture(ar.result()) : Future.failedFuture(ar.cause());
        }));
    }

    /** Maps the instance's validated destinations in the restore role; on refusal the registration is undone. */
    private Future<RegisterReply> withDestinations(SessionRegistry.Instance instance,
                                                   List<RestoreCommands.DestinationSpec> specs, RegisterReply reply) {
        if (specs.isEmpty()) {
            return Future.succeededFuture(reply);
        }
        if (restore == null) {
            undoRegistration(instance.id());
            throw new OrbitException(ErrorReason.ROUTE_UNAVAILABLE, "this Manager runs no restore role");
        }
        return restore.registerDestinations(instance.id(), specs).transform(ar -> {
            if (ar.failed()) {
                undoRegistration(instance.id());
                return Future.failedFuture(ar.cause());
            }
            Map<Integer, RestoreCommands.DestinationSpec> byId = new HashMap<>();
            specs.forEach(spec -> byId.put(spec.id(), spec));
            destinations.put(instance.id(), byId);
            return Future.succeededFuture(reply);
        });
    }

    private void undoRegistration(long instance) {
        sessions.remove(instance);
        registeredInstances = sessions.size();
    }

    private void reportCleanupFailure(String what, Throwable failure) {
        metrics.internalErrors.increment();
        LOG.warn("ending {} did not release everything", what, failure);
    }

    // ---- sessions ----

    public Future<RegisterReply> register(RegisterRequest request) {
        Namespaces.validate(request.getIdentity(), settings.poolBytes());
        RecoveryRules rules = Namespaces.recoveryRules(request.getIdentity());
        if (!TenantName.valid(request.getTenant())) {
            throw new OrbitException(ErrorReason.INVALID_IDENTITY, "tenant must be 0..64 characters of [A-Za-z0-9._-]");
        }
        double rate = request.getPrefillTokensPerSecond();
        if (!(rate >= 0 && Double.isFinite(rate))) {
            throw new OrbitException(ErrorReason.INVALID_IDENTITY, "prefill_tokens_per_second must be finite and >= 0, got "
                    + rate);
        }
        long ttlMillis = TimeUnit.NANOSECONDS.toMillis(settings.sessionTtlNanos());
        Map<Integer, GroupSpec> groups = new HashMap<>();
        request.getIdentity().getGroupsList().forEach(g -> groups.put(g.getGroupId(), g));
        List<RestoreCommands.DestinationSpec> specs = RestoreDestinations.validate(request.getRestoreDestinationsList(), groups);
        long resumed = request.getResumeInstanceId();
        if (resumed == 0) {
            SessionRegistry.Instance instance = sessions.register(request.getIdentity(), request.getRole(),
                    request.getTenant(), rules, rate);
            registeredInstances = sessions.size();
            return withDestinations(instance, specs,
                    EngineReplies.registered(instance, settings.poolPath(), settings.poolBytes(), ttlMillis));
        }
        SessionRegistry.Instance old = sessions.beginResume(resumed);
        if (old == null) {
            throw new OrbitException(ErrorReason.UNKNOWN_INSTANCE, "cannot resume instance " + Long.toUnsignedString(resumed)
                    + ": not registered");
        }
        if (!old.identity().equals(request.getIdentity())) {
            sessions.abandonResume(old);
            throw new OrbitException(ErrorReason.INVALID_IDENTITY, "a resumed instance must keep its identity");
        }
        registeredInstances = sessions.size();
        // The old session ended: its holdings are released (quarantined) before the new epoch is handed out. A
        // cleanup failure is reported, and the resume goes on: the old session is over either way.
        return endSession(old.id()).transform(ar -> {
            if (ar.failed()) {
                reportCleanupFailure("a resumed session", ar.cause());
            }
            SessionRegistry.Instance instance = sessions.resume(resumed, request.getIdentity(), request.getRole(),
                    request.getTenant(), rules, rate);
            registeredInstances = sessions.size();
            return withDestinations(instance, specs,
                    EngineReplies.registered(instance, settings.poolPath(), settings.poolBytes(), ttlMillis));
        });
    }

    /** Ends the session; its reply fails (listing every failed cleanup step) when any step failed. */
    public Future<UnregisterReply> unregister(UnregisterRequest request) {
        SessionRegistry.Instance instance = sessions.authenticate(request.getSession());
        sessions.remove(instance.id());
        registeredInstances = sessions.size();
        return endSession(instance.id()).onFailure(e -> reportCleanupFailure("an unregistered session", e))
                .map(released -> UnregisterReply.newBuilder().setReleasedLeases(released.leases())
                        .setCancelledQueries(released.queries()).setAbortedPublishes(released.abortedPublishes()).build());
    }

    public Future<HeartbeatReply> heartbeat(HeartbeatRequest request) {
        sessions.authenticate(request.getSession());
        return Future.succeededFuture(HeartbeatReply.newBuilder()
                .setSessionTtlMillis(TimeUnit.NANOSECONDS.toMillis(settings.sessionTtlNanos())).build());
    }

    public Future<PingReply> ping(PingRequest request) {
        return Future.succeededFuture(PingReply.getDefaultInstance());
    }

    // ---- publish ----

    public Future<AllocatePublishReply> allocatePublish(AllocatePublishRequest request) {
        SessionRegistry.Instance instance = sessions.authenticate(request.getSession());
        requests.requireNamespace(instance, request.getNamespaceId());
        requests.requireCount(request.getPagesCount());
        List<StateKey> keys = new ArrayList<>(request.getPagesCount());
        List<Long> lengths = new ArrayList<>(request.getPagesCount());
        // max_stored_tokens: of each group only the first pages in request order are stored, the rest NOT_STORED.
        long storedPerGroup = request.getMaxStoredTokens() == 0 ? Long.MAX_VALUE
                : Long.divideUnsigned(request.getMaxStoredTokens(), instance.identity().getPageSizeTokens());
        String producedFor = EngineRequests.publishRequestId(request.getRequestId());
        if (producedFor != null) {
            producers.requireRoom();
        }
        Map<Integer, Long> storedOfGroup = new HashMap<>();
        boolean[] stored = new boolean[request.getPagesCount()];
        for (int i = 0; i < request.getPagesCount(); i++) {
            PageKey page = request.getPages(i);
            GroupSpec group = EngineRequests.requireGroup(instance, page.getGroupId());
            StateKey key = EngineRequests.stateKey(instance, page.getGroupId(), page.getBlockHash());
            stored[i] = storedOfGroup.merge(page.getGroupId(), 1L, Long::sum) <= storedPerGroup;
            if (stored[i]) {
                keys.add(key);
                lengths.add(group.getBytesPerPage());
            }
        }
        return (request.getDoNotStore() ? storage.allocateTransient(instance.id(), keys, lengths)
                : storage.allocate(instance.id(), keys, lengths)).map(result -> {
                    if (producedFor != null) {
                        producers.allocated(instance.id(), instance.epoch(), producedFor, keys, result);
                    }
                    return EngineReplies.allocated(result, stored);
                });
    }

    public Future<SealPublishReply> sealPublish(SealPublishRequest request) {
        SessionRegistry.Instance instance = sessions.authenticate(request.getSession());
        requests.requireCount(Math.max(request.getCrc32CCount(), request.getWrittenCount()));
        List<ImageRef> written = requests.writtenDescriptors(request.getWrittenList(), EngineReplies.POOL_REGION_ID);
        return storage.seal(instance.id(), request.getPublishId(), request.getCrc32CList(), written).map(sealed -> {
            producers.sealed(request.getPublishId());
            metrics.publishedBytes.increment(sealed.sealedBytes());
            return SealPublishReply.newBuilder().setSealedPages(sealed.sealedPages()).setSealedBytes(sealed.sealedBytes()).build();
        });
    }

    public Future<AbortPublishReply> abortPublish(AbortPublishRequest request) {
        SessionRegistry.Instance instance = sessions.authenticate(request.getSession());
        return storage.abort(instance.id(), request.getPublishId())
                .onComplete(ar -> producers.aborted(request.getPublishId()))
                .map(freed -> AbortPublishReply.newBuilder().setFreedPages(freed).build());
    }

    // ---- retention hints ----

    /**
     * Retains the chains' pages for the session's tenant. Checked here: the namespace (NAMESPACE_MISMATCH), the chain
     * length (RETENTION_CHAIN_TOO_LONG), a ttl of 0 (INVALID_RETENTION_TTL); the storage role checks the ttl's upper
     * bound and the tenant's budget (RETENTION_OVER_BUDGET). A refusal changes nothing.
     */
    public Future<RetainReply> retain(RetainRequest request) {
        SessionRegistry.Instance instance = sessions.authenticate(request.getSession());
        requests.requireNamespace(instance, request.getNamespaceId());
        if (request.getGroupsCount() == 0) {
            throw new OrbitException(ErrorReason.MALFORMED_REQUEST, "a retention names at least one group chain");
        }
        long pages = 0;
        for (GroupChain chain : request.getGroupsList()) {
            pages += chain.getBlockHashesCount();
        }
        if (pages > settings.maxPagesPerRequest()) {
            throw new OrbitException(ErrorReason.RETENTION_CHAIN_TOO_LONG, pages + " pages in one retention, at most "
                    + settings.maxPagesPerRequest());
        }
        long ttlMillis = request.getTtlMillis();
        if (ttlMillis == 0 || Long.compareUnsigned(ttlMillis, Long.MAX_VALUE / 1_000_000) > 0) {
            throw new OrbitException(ErrorReason.INVALID_RETENTION_TTL, "ttl_millis must be positive and bounded, got "
                    + Long.toUnsignedString(ttlMillis));
        }
        if (request.getPriority() < 0) {
            throw new OrbitException(ErrorReason.MALFORMED_REQUEST, "priority must be below 2^31");
        }
        List<StateKey> keys = new ArrayList<>((int) pages);
        List<Long> lengths = new ArrayList<>((int) pages);
        for (GroupChain chain : request.getGroupsList()) {
            GroupSpec group = EngineRequests.requireGroup(instance, chain.getGroupId());
            for (com.google.protobuf.ByteString hash : chain.getBlockHashesList()) {
                keys.add(EngineRequests.stateKey(instance, chain.getGroupId(), hash));
                lengths.add(group.getBytesPerPage());
            }
        }
        return storage.retain(instance.tenant(), keys, lengths, TimeUnit.MILLISECONDS.toNanos(ttlMillis),
                request.getPriority()).map(r -> RetainReply.newBuilder().setRetentionId(r.retentionId())
                .setRetainedBytes(r.retainedBytes()).setResidentPages(r.residentPages())
                .setTenantRetainedBytes(r.tenantRetainedBytes()).setTenantBudgetBytes(r.tenantBudgetBytes()).build());
    }

    /** Ends one of the tenant's retentions (UNKNOWN_RETENTION when it ended already or is another tenant's). */
    public Future<UnretainReply> unretain(UnretainRequest request) {
        SessionRegistry.Instance instance = sessions.authenticate(request.getSession());
        return storage.unretain(instance.tenant(), request.getRetentionId())
                .map(bytes -> UnretainReply.newBuilder().setReleasedBytes(bytes).build());
    }

    // ---- query ----

    public Future<QueryReply> submitQuery(SubmitQueryRequest request) {
        SessionRegistry.Instance instance = sessions.authenticate(request.getSession());
        return admission.submit(instance.id(), requests.prefixPlan(instance, request)).map(EngineReplies::query);
    }

    public Future<QueryReply> submitDemand(SubmitDemandRequest request) {
        SessionRegistry.Instance instance = sessions.authenticate(request.getSession());
        AdmissionCommands.DemandPlan plan = requests.demandPlan(instance, request.getDemand());
        if (request.getDemand().hasEngineRestore()) {
            plan = plan.withEngineRestore(RestoreDestinations.target(request.getDemand(), destinations.get(instance.id())));
        }
        if (request.getDemand().hasProducer()) {
            plan = plan.withProducer(EngineRequests.producer(instance, request.getDemand(), settings.memberId()));
        }
        return admission.submit(instance.id(), plan).map(EngineReplies::query);
    }

    public Future<QueryReply> pollQuery(PollQueryRequest request) {
        SessionRegistry.Instance instance = sessions.authenticate(request.getSession());
        return admission.poll(instance.id(), request.getTicket()).map(EngineReplies::query);
    }

    public Future<CancelQueryReply> cancelQuery(CancelQueryRequest request) {
        SessionRegistry.Instance instance = sessions.authenticate(request.getSession());
        return admission.cancel(instance.id(), request.getTicket())
                .map(pages -> CancelQueryReply.newBuilder().setReleasedPages(pages).build());
    }

    /**
     * The engine contract: copy, then release. A release answers whether the lease stayed valid for its whole life;
     * a lease that ended with its holder's session (lapse, unregister, resume) is answered lease_valid = false,
     * SESSION_ENDED, for as long as its tombstone lives (after that, an error: also "discard").
     */
    public Future<ReleaseLeaseReply> releaseLease(ReleaseLeaseRequest request) {
        long leaseId = request.getLeaseId();
        long instanceId = request.getSession().getInstanceId();
        SessionRegistry.Instance instance;
        try {
            instance = sessions.authenticate(request.getSession());
        } catch (OrbitException e) {
            if ((e.reason() == ErrorReason.UNKNOWN_INSTANCE || e.reason() == ErrorReason.STALE_SESSION_EPOCH)
                    && tombstones.endedWithSession(instanceId, leaseId)) {
                return Future.succeededFuture(endedWithSession());
            }
            throw e;
        }
        return admission.release(instance.id(), leaseId).map(EngineReplies::releasedValid)
                .recover(failure -> failure instanceof OrbitException orbit && orbit.reason() == ErrorReason.UNKNOWN_LEASE
                        && tombstones.endedWithSession(instanceId, leaseId)
                        ? Future.succeededFuture(endedWithSession()) : Future.failedFuture(failure));
    }

    private ReleaseLeaseReply endedWithSession() {
        metrics.invalidatedLeases.increment();
        return EngineReplies.endedWithSession();
    }

    public Future<StatsReply> stats(StatsRequest request) {
        SessionRegistry.Instance instance = sessions.authenticate(request.getSession());
        return storage.stats().compose(s -> admission.stats(instance.id())
                .map(a -> EngineReplies.stats(s, a, sessions.size())));
    }
}
