package io.orbitkv.engine;

import com.google.protobuf.ByteString;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.admission.AdmissionCommands;
import io.orbitkv.admission.AdmissionProxy;
import io.orbitkv.admission.TenantShares;
import io.orbitkv.common.OrbitException;
import io.orbitkv.common.Ticker;
import io.orbitkv.protocol.engine.*;
import io.orbitkv.recovery.BlockRange;
import io.orbitkv.recovery.DemandValidator;
import io.orbitkv.recovery.GroupRanges;
import io.orbitkv.recovery.GroupRule;
import io.orbitkv.recovery.RecoveryDemand;
import io.orbitkv.recovery.RecoveryException;
import io.orbitkv.recovery.RecoveryRules;
import io.orbitkv.storage.ImageStore;
import io.orbitkv.storage.StateKey;
import io.orbitkv.storage.StorageProxy;
import io.vertx.core.Future;
import io.vertx.core.MultiMap;
import io.vertx.core.VerticleBase;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.net.SocketAddress;
import io.vertx.grpc.common.GrpcStatus;
import io.vertx.grpc.common.ServiceMethod;
import io.vertx.grpc.server.GrpcServer;
import io.vertx.grpc.server.GrpcServerOptions;
import io.vertx.grpc.server.GrpcServerRequest;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Set;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The engine role: the gRPC door engines use, their registrations and sessions, and their authentication.
 *
 * <p>Design note: every call must carry the Manager's engine token (header {@value #TOKEN_HEADER}); the Unix socket
 * is also created owner-only. A call is then checked against its session (instance, epoch, namespace, groups, sizes)
 * <em>before</em> anything is forwarded to admission or storage, so bad input changes nothing and is counted by
 * reason. Session end (unregister, resume, or ttl lapse) releases leases and queries first, then unsealed publishes.
 * Confined to this verticle's event loop.
 */
public final class EngineVerticle extends VerticleBase {
    public static final String TOKEN_HEADER = "x-orbitkv-token";
    public static final long POOL_REGION_ID = 1;
    static final int MAX_REQUEST_ID_CHARS = 128;
    private static final Logger LOG = LoggerFactory.getLogger(EngineVerticle.class);

    /** Settings of the engine role. */
    public record Settings(Path unixSocket, String tcpHost, int tcpPort, long maxMessageBytes, int maxPagesPerRequest,
                           long sessionTtlNanos, String token, Path poolPath, long poolBytes, long quarantineNanos) {}

    /** Lease tombstones kept at most (see {@link LeaseTombstones}). */
    static final int MAX_LEASE_TOMBSTONES = 1 << 16;

    private final Settings settings;
    private final MeterRegistry registry;
    private final Ticker ticker;
    private final byte[] token;
    private SessionRegistry sessions;
    private LeaseTombstones tombstones;
    private Counter invalidatedLeases;
    private StorageProxy storage;
    private AdmissionProxy admission;
    private final List<HttpServer> servers = new ArrayList<>();
    private final Map<ErrorReason, Counter> rejections = new EnumMap<>(ErrorReason.class);
    private Counter publishedBytes;
    private Counter internalErrors;
    private long sweepTimer;
    private volatile int registeredInstances;

    public EngineVerticle(Settings settings, MeterRegistry registry, Ticker ticker) {
        this.settings = settings;
        this.registry = registry;
        this.ticker = ticker;
        this.token = settings.token().getBytes(StandardCharsets.UTF_8);
    }

    /** The tcp port actually bound (useful when configured as 0). */
    public int tcpPort() {
        return servers.size() > 1 ? servers.get(1).actualPort() : -1;
    }

    @Override
    public Future<?> start() {
        sessions = new SessionRegistry(ticker, settings.sessionTtlNanos(), 1);
        tombstones = new LeaseTombstones(ticker, settings.quarantineNanos(), MAX_LEASE_TOMBSTONES);
        storage = new StorageProxy(vertx);
        admission = new AdmissionProxy(vertx);
        for (ErrorReason reason : ErrorReason.values()) {
            if (reason != ErrorReason.UNRECOGNIZED && reason != ErrorReason.ERROR_REASON_UNSPECIFIED) {
                rejections.put(reason, Counter.builder("orbitkv.rejections").tag("reason", reason.name().toLowerCase())
                        .description("Refused engine calls by reason").register(registry));
            }
        }
        publishedBytes = Counter.builder("orbitkv.published.bytes").baseUnit("bytes")
                .description("Bytes sealed into the DRAM pool by engines").register(registry);
        invalidatedLeases = Counter.builder("orbitkv.leases.invalidated")
                .description("Lease releases answered lease_valid=false: the holder's session ended first").register(registry);
        io.micrometer.core.instrument.FunctionCounter.builder("orbitkv.lease.tombstones.dropped", this,
                        v -> v.tombstones.dropped())
                .description("Ended leases forgotten early because the tombstone table was full").register(registry);
        internalErrors = Counter.builder("orbitkv.engine.internal.errors").description("Engine calls failed by a Manager fault")
                .register(registry);
        Gauge.builder("orbitkv.instances", this, v -> v.registeredInstances).description("Registered engine instances")
                .register(registry);

        GrpcServer grpc = GrpcServer.server(vertx, new GrpcServerOptions().setMaxMessageSize(settings.maxMessageBytes()));
        bind(grpc, EngineServiceGrpcService.Register, this::onRegister);
        bind(grpc, EngineServiceGrpcService.Unregister, this::onUnregister);
        bind(grpc, EngineServiceGrpcService.Heartbeat, this::onHeartbeat);
        bind(grpc, EngineServiceGrpcService.AllocatePublish, this::onAllocatePublish);
        bind(grpc, EngineServiceGrpcService.SealPublish, this::onSealPublish);
        bind(grpc, EngineServiceGrpcService.AbortPublish, this::onAbortPublish);
        bind(grpc, EngineServiceGrpcService.SubmitQuery, this::onSubmitQuery);
        bind(grpc, EngineServiceGrpcService.SubmitDemand, this::onSubmitDemand);
        bind(grpc, EngineServiceGrpcService.PollQuery, this::onPollQuery);
        bind(grpc, EngineServiceGrpcService.CancelQuery, this::onCancelQuery);
        bind(grpc, EngineServiceGrpcService.ReleaseLease, this::onReleaseLease);
        bind(grpc, EngineServiceGrpcService.Stats, this::onStats);
        bind(grpc, EngineServiceGrpcService.Ping, ping -> Future.succeededFuture(PingReply.getDefaultInstance()));

        long sweepMillis = Math.max(50, settings.sessionTtlNanos() / 4_000_000);
        sweepTimer = vertx.setPeriodic(sweepMillis, id -> {
            sessions.expire().forEach(this::releaseSession);
            tombstones.expire();
        });

        HttpServerOptions serverOptions = new HttpServerOptions().setUseAlpn(false).setHttp2ClearTextEnabled(true);
        Future<HttpServer> unix = prepareSocket().compose(path -> vertx.createHttpServer(serverOptions)
                .requestHandler(grpc).listen(SocketAddress.domainSocketAddress(path.toString())))
                .compose(server -> ownerOnly(settings.unixSocket()).map(server));
        return unix.compose(server -> {
            servers.add(server);
            return vertx.createHttpServer(serverOptions).requestHandler(grpc)
                    .listen(settings.tcpPort(), settings.tcpHost());
        }).onSuccess(servers::add);
    }

    private Future<Path> prepareSocket() {
        return vertx.executeBlocking(() -> {
            Files.createDirectories(settings.unixSocket().getParent());
            Files.deleteIfExists(settings.unixSocket());
            return settings.unixSocket();
        });
    }

    private Future<Void> ownerOnly(Path path) {
        return vertx.executeBlocking(() -> {
            Files.setPosixFilePermissions(path, PosixFilePermissions.fromString("rw-------"));
            return null;
        });
    }

    @Override
    public Future<?> stop() {
        vertx.cancelTimer(sweepTimer);
        List<Future<Void>> closing = new ArrayList<>();
        for (HttpServer server : servers) {
            closing.add(server.close());
        }
        return Future.join(closing).eventually(() -> vertx.executeBlocking(() -> {
            Files.deleteIfExists(settings.unixSocket());
            return null;
        }));
    }

    // ---- the generic call path: authenticate, run, answer or refuse with a typed status ----

    private <Q, R> void bind(GrpcServer grpc, ServiceMethod<Q, R> method, Function<Q, Future<R>> handler) {
        grpc.callHandler(method, request -> {
            if (!authenticated(request.headers())) {
                refuse(request, new OrbitException(ErrorReason.UNAUTHENTICATED_CALLER, "missing or wrong engine token"));
                return;
            }
            request.handler(message -> {
                Future<R> result;
                try {
                    result = handler.apply(message);
                } catch (RuntimeException e) {
                    result = Future.failedFuture(e);
                }
                result.onComplete(ar -> {
                    if (ar.succeeded()) {
                        request.response().end(ar.result());
                    } else {
                        refuse(request, ar.cause());
                    }
                });
            });
        });
    }

    private boolean authenticated(MultiMap headers) {
        String presented = headers.get(TOKEN_HEADER);
        return presented != null && MessageDigest.isEqual(token, presented.getBytes(StandardCharsets.UTF_8));
    }

    private void refuse(GrpcServerRequest<?, ?> request, Throwable cause) {
        if (cause instanceof OrbitException orbit) {
            Counter counter = rejections.get(orbit.reason());
            if (counter != null) {
                counter.increment();
            }
            request.response().trailers().set("orbitkv-error-reason", orbit.reason().name());
            request.response().status(statusOf(orbit.reason())).statusMessage(orbit.getMessage()).end();
        } else {
            internalErrors.increment();
            LOG.warn("engine call {} failed inside the Manager", request.methodName(), cause);
            request.response().status(GrpcStatus.INTERNAL).statusMessage("internal error: " + cause.getClass().getSimpleName()).end();
        }
    }

    static GrpcStatus statusOf(ErrorReason reason) {
        return switch (reason) {
            case UNAUTHENTICATED_CALLER -> GrpcStatus.UNAUTHENTICATED;
            case MALFORMED_REQUEST, INVALID_IDENTITY, DESCRIPTOR_OUTSIDE_POOL, INVALID_DEMAND, REVISION_BACKWARDS ->
                    GrpcStatus.INVALID_ARGUMENT;
            case OVERSIZED_REQUEST, POOL_EXHAUSTED, TOO_MANY_OUTSTANDING, BUDGET_EXCEEDED -> GrpcStatus.RESOURCE_EXHAUSTED;
            case UNKNOWN_INSTANCE, UNKNOWN_LEASE, UNKNOWN_TICKET, UNKNOWN_PUBLISH -> GrpcStatus.NOT_FOUND;
            case STALE_SESSION_EPOCH -> GrpcStatus.FAILED_PRECONDITION;
            case NAMESPACE_MISMATCH -> GrpcStatus.PERMISSION_DENIED;
            case SHUTTING_DOWN -> GrpcStatus.UNAVAILABLE;
            default -> GrpcStatus.UNKNOWN;
        };
    }

    // ---- sessions ----

    private Future<RegisterReply> onRegister(RegisterRequest request) {
        Namespaces.validate(request.getIdentity(), settings.poolBytes());
        RecoveryRules rules = Namespaces.recoveryRules(request.getIdentity());
        if (!TenantShares.validName(request.getTenant())) {
            throw new OrbitException(ErrorReason.INVALID_IDENTITY, "tenant must be 0..64 characters of [A-Za-z0-9._-]");
        }
        Future<?> previous = Future.succeededFuture();
        if (request.getResumeInstanceId() != 0) {
            SessionRegistry.Instance old = sessions.remove(request.getResumeInstanceId());
            if (old == null) {
                throw new OrbitException(ErrorReason.UNKNOWN_INSTANCE, "cannot resume instance " + request.getResumeInstanceId() + ": not registered");
            }
            if (!old.identity().equals(request.getIdentity())) {
                sessions.restore(old);
                throw new OrbitException(ErrorReason.INVALID_IDENTITY, "a resumed instance must keep its identity");
            }
            previous = releaseHoldings(old.id());
            registeredInstances = sessions.size();
        }
        return previous.map(v -> {
            SessionRegistry.Instance instance = request.getResumeInstanceId() != 0
                    ? sessions.resume(request.getResumeInstanceId(), request.getIdentity(), request.getRole(),
                            request.getTenant(), rules)
                    : sessions.register(request.getIdentity(), request.getRole(), request.getTenant(), rules);
            registeredInstances = sessions.size();
            return RegisterReply.newBuilder()
                    .setInstanceId(instance.id())
                    .setSessionEpoch(instance.epoch())
                    .setNamespaceId(ByteString.copyFrom(instance.namespace()))
                    .setPool(PoolMapping.newBuilder().setRegionId(POOL_REGION_ID)
                            .setPath(settings.poolPath().toString()).setSizeBytes(settings.poolBytes()))
                    .setSessionTtlMillis(settings.sessionTtlNanos() / 1_000_000)
                    .build();
        });
    }

    private Future<UnregisterReply> onUnregister(UnregisterRequest request) {
        SessionRegistry.Instance instance = sessions.authenticate(request.getSession());
        sessions.remove(instance.id());
        registeredInstances = sessions.size();
        return releaseHoldings(instance.id()).map(released -> UnregisterReply.newBuilder()
                .setReleasedLeases(released.leases()).setCancelledQueries(released.queries())
                .setAbortedPublishes(released.abortedPublishes()).build());
    }

    /** What ending a session released. */
    private record Released(int leases, int queries, int abortedPublishes) {}

    /**
     * Ends a session's holdings: its leases (slots quarantined, ids remembered as tombstones), queries and unsealed
     * publishes (slots quarantined). Every step runs even when an earlier one failed; the result fails if any did.
     */
    private Future<Released> releaseHoldings(long instance) {
        tombstones.sessionEnding(instance);
        Future<AdmissionCommands.InstanceReleased> leases = admission.releaseInstance(instance)
                .andThen(ar -> tombstones.sessionEnded(instance, ar.succeeded() ? ar.result().endedLeaseIds() : List.of()));
        return leases.transform(first -> storage.releaseInstance(instance).transform(second -> {
            if (first.succeeded() && second.succeeded()) {
                return Future.succeededFuture(new Released(first.result().leases(), first.result().queries(), second.result()));
            }
            Throwable failure = first.failed() ? first.cause() : second.cause();
            if (first.failed() && second.failed()) {
                failure.addSuppressed(second.cause());
            }
            return Future.failedFuture(failure);
        }));
    }

    private void releaseSession(SessionRegistry.Instance instance) {
        registeredInstances = sessions.size();
        releaseHoldings(instance.id()).onFailure(e -> LOG.warn("releasing a lapsed session failed", e));
    }

    private Future<HeartbeatReply> onHeartbeat(HeartbeatRequest request) {
        sessions.authenticate(request.getSession());
        return Future.succeededFuture(HeartbeatReply.newBuilder().setSessionTtlMillis(settings.sessionTtlNanos() / 1_000_000).build());
    }

    // ---- publish ----

    private Future<AllocatePublishReply> onAllocatePublish(AllocatePublishRequest request) {
        SessionRegistry.Instance instance = sessions.authenticate(request.getSession());
        requireNamespace(instance, request.getNamespaceId());
        requireCount(request.getPagesCount());
        List<StateKey> keys = new ArrayList<>(request.getPagesCount());
        List<Long> lengths = new ArrayList<>(request.getPagesCount());
        for (PageKey page : request.getPagesList()) {
            GroupSpec group = requireGroup(instance, page.getGroupId());
            keys.add(stateKey(instance, page.getGroupId(), page.getBlockHash()));
            lengths.add(group.getBytesPerPage());
        }
        return storage.allocate(instance.id(), keys, lengths).map(result -> {
            AllocatePublishReply.Builder reply = AllocatePublishReply.newBuilder().setPublishId(result.publishId());
            for (ImageStore.SlotGrant grant : result.slots()) {
                PublishSlot.Builder slot = PublishSlot.newBuilder();
                if (grant.allocated()) {
                    slot.setStatus(SlotStatus.ALLOCATED).setSlot(descriptor(grant.ref()));
                } else {
                    slot.setStatus(SlotStatus.ALREADY_PRESENT);
                }
                reply.addSlots(slot);
            }
            return reply.build();
        });
    }

    private Future<SealPublishReply> onSealPublish(SealPublishRequest request) {
        SessionRegistry.Instance instance = sessions.authenticate(request.getSession());
        requireCount(Math.max(request.getCrc32CCount(), request.getWrittenCount()));
        List<ImageStore.ImageRef> written = new ArrayList<>(request.getWrittenCount());
        for (PoolDescriptor d : request.getWrittenList()) {
            if (d.getRegionId() != POOL_REGION_ID || d.getOffset() < 0 || d.getLength() <= 0
                    || d.getOffset() > settings.poolBytes() - d.getLength()) {
                throw new OrbitException(ErrorReason.DESCRIPTOR_OUTSIDE_POOL, "descriptor region " + d.getRegionId()
                        + " [" + d.getOffset() + ", +" + d.getLength() + ") is outside the pool");
            }
            written.add(new ImageStore.ImageRef(null, d.getOffset(), d.getLength(), d.getGeneration()));
        }
        return storage.seal(instance.id(), request.getPublishId(), request.getCrc32CList(), written).map(sealed -> {
            publishedBytes.increment(sealed.sealedBytes());
            return SealPublishReply.newBuilder().setSealedPages(sealed.sealedPages()).setSealedBytes(sealed.sealedBytes()).build();
        });
    }

    private Future<AbortPublishReply> onAbortPublish(AbortPublishRequest request) {
        SessionRegistry.Instance instance = sessions.authenticate(request.getSession());
        return storage.abort(instance.id(), request.getPublishId())
                .map(freed -> AbortPublishReply.newBuilder().setFreedPages(freed).build());
    }

    // ---- query ----

    /**
     * The prefix form: every named group is treated as full attention (the longest prefix resident for all of them),
     * expressed as a demand from origin 0 to the shortest chain. A group registered as sliding window or recurrent
     * is refused: a plain prefix is not a legal boundary for it (use SubmitDemand).
     */
    private Future<QueryReply> onSubmitQuery(SubmitQueryRequest request) {
        SessionRegistry.Instance instance = sessions.authenticate(request.getSession());
        requireNamespace(instance, request.getNamespaceId());
        if (request.getGroupsCount() == 0) {
            throw new OrbitException(ErrorReason.MALFORMED_REQUEST, "a query names at least one group chain");
        }
        int total = 0;
        int shortest = Integer.MAX_VALUE;
        Set<Integer> seen = new HashSet<>();
        List<GroupRule> rules = new ArrayList<>();
        for (GroupChain chain : request.getGroupsList()) {
            GroupSpec spec = requireGroup(instance, chain.getGroupId());
            if (!seen.add(chain.getGroupId())) {
                throw new OrbitException(ErrorReason.MALFORMED_REQUEST, "group " + chain.getGroupId() + " appears twice in the query");
            }
            if (spec.getKind() != GroupKind.FULL_ATTENTION) {
                throw new OrbitException(ErrorReason.INVALID_DEMAND, "group " + chain.getGroupId() + " is " + spec.getKind()
                        + ": a prefix query cannot restore it exactly; use SubmitDemand");
            }
            total += chain.getBlockHashesCount();
            requireCount(total);
            shortest = Math.min(shortest, chain.getBlockHashesCount());
            rules.add(GroupRule.fullAttention(chain.getGroupId()));
        }
        int pageSize = instance.rules().pageSizeTokens();
        List<AdmissionCommands.GroupPlan> groups = new ArrayList<>(request.getGroupsCount());
        for (GroupChain chain : request.getGroupsList()) {
            List<ImageStore.PositionedKey> keys = new ArrayList<>(shortest);
            for (int position = 0; position < shortest; position++) {
                keys.add(new ImageStore.PositionedKey(position, stateKey(instance, chain.getGroupId(), chain.getBlockHashes(position))));
            }
            groups.add(new AdmissionCommands.GroupPlan(chain.getGroupId(),
                    instance.groups().get(chain.getGroupId()).getBytesPerPage(), keys));
        }
        AdmissionCommands.DemandPlan plan = new AdmissionCommands.DemandPlan(null, request.getRevision(), 0,
                instance.tenant(), new RecoveryRules(pageSize, rules), 0, (long) shortest * pageSize, groups, 0, 0, 0,
                -1, false);
        return admission.submit(instance.id(), plan).map(this::queryReply);
    }

    /** The exact form: validated against the registration before anything is forwarded or reserved. */
    private Future<QueryReply> onSubmitDemand(SubmitDemandRequest request) {
        SessionRegistry.Instance instance = sessions.authenticate(request.getSession());
        Demand demand = request.getDemand();
        requireNamespace(instance, demand.getNamespaceId());
        if (demand.getRequestId().isEmpty() || demand.getRequestId().length() > MAX_REQUEST_ID_CHARS) {
            throw new OrbitException(ErrorReason.MALFORMED_REQUEST, "request_id must be 1.." + MAX_REQUEST_ID_CHARS + " characters");
        }
        if (demand.getOperationId() == 0) {
            throw new OrbitException(ErrorReason.MALFORMED_REQUEST, "operation_id must be non-zero");
        }
        if ((demand.getTargetInstanceId() != 0 && demand.getTargetInstanceId() != instance.id())
                || demand.getTargetTpRank() != instance.identity().getTpRank()
                || demand.getTargetPpRank() != instance.identity().getPpRank()) {
            throw new OrbitException(ErrorReason.INVALID_DEMAND, "the target must be the calling instance and its TP/PP ranks"
                    + " (restores are engine-local)");
        }
        if (!(demand.getConfidence() >= 0 && demand.getConfidence() <= 1)) {
            throw new OrbitException(ErrorReason.INVALID_DEMAND, "confidence must be in [0, 1], got " + demand.getConfidence());
        }
        if (demand.getGroupsCount() > instance.groups().size()) {
            throw new OrbitException(ErrorReason.INVALID_DEMAND, "demand names " + demand.getGroupsCount()
                    + " groups, the instance registered " + instance.groups().size());
        }
        int total = 0;
        GroupDemand selected = null;
        List<GroupRanges> declared = new ArrayList<>(demand.getGroupsCount());
        for (GroupDemand group : demand.getGroupsList()) {
            total += group.getBlockHashesCount() + group.getRangesCount();
            requireCount(total);
            if (group.getGroupId() == demand.getSelectedGroupId() && selected == null) {
                selected = group;
            }
            List<BlockRange> ranges = new ArrayList<>(group.getRangesCount());
            for (BlockSpan span : group.getRangesList()) {
                ranges.add(recovery(() -> new BlockRange(span.getStart(), span.getEnd())));
            }
            declared.add(new GroupRanges(group.getGroupId(), ranges));
        }
        long origin = demand.getValidPrefixTokens();
        long end = demand.getSelectedEndTokens();
        int selectedHashes = selected == null ? 0 : selected.getBlockHashesCount();
        RecoveryDemand recoveryDemand = new RecoveryDemand(demand.getRevision(), demand.getPageSizeTokens(), origin, end,
                demand.getSelectedGroupId(), selectedHashes, declared);
        // The revision is checked against the live ticket by admission; everything else here, before any byte moves.
        recovery(() -> {
            DemandValidator.validate(instance.rules(), recoveryDemand, OptionalLong.empty());
            return null;
        });
        int endPosition = (int) (end / instance.rules().pageSizeTokens());
        List<AdmissionCommands.GroupPlan> groups = new ArrayList<>(demand.getGroupsCount());
        for (GroupDemand group : demand.getGroupsList()) {
            List<ByteString> chain = group.getBlockHashesCount() == 0 ? selected.getBlockHashesList() : group.getBlockHashesList();
            if (chain.size() != endPosition) {
                throw new OrbitException(ErrorReason.INVALID_DEMAND, "HASH_COUNT_MISMATCH: group " + group.getGroupId()
                        + " sent " + chain.size() + " block hashes; expected 0 (use the selected group's) or " + endPosition);
            }
            List<ImageStore.PositionedKey> keys = new ArrayList<>();
            for (BlockSpan span : group.getRangesList()) {
                for (int position = span.getStart(); position < span.getEnd(); position++) {
                    keys.add(new ImageStore.PositionedKey(position, stateKey(instance, group.getGroupId(), chain.get(position))));
                }
            }
            groups.add(new AdmissionCommands.GroupPlan(group.getGroupId(),
                    instance.groups().get(group.getGroupId()).getBytesPerPage(), keys));
        }
        long maxWaitNanos = demand.hasMaxWaitMicros()
                ? (demand.getMaxWaitMicros() > Long.MAX_VALUE / 1000 ? Long.MAX_VALUE : demand.getMaxWaitMicros() * 1000) : -1;
        AdmissionCommands.DemandPlan plan = new AdmissionCommands.DemandPlan(demand.getRequestId(), demand.getRevision(),
                demand.getOperationId(), instance.tenant(), instance.rules(), origin, end, groups,
                demand.getFirstUseMicros(), demand.getPriority(), demand.getConfidence(), maxWaitNanos,
                demand.getSpeculative());
        return admission.submit(instance.id(), plan).map(this::queryReply);
    }

    private static <T> T recovery(java.util.function.Supplier<T> check) {
        try {
            return check.get();
        } catch (RecoveryException e) {
            throw new OrbitException(e.reason().wireReason(), e.getMessage());
        }
    }

    private Future<QueryReply> onPollQuery(PollQueryRequest request) {
        SessionRegistry.Instance instance = sessions.authenticate(request.getSession());
        return admission.poll(instance.id(), request.getTicket()).map(this::queryReply);
    }

    private QueryReply queryReply(AdmissionCommands.Outcome outcome) {
        QueryReply.Builder reply = QueryReply.newBuilder().setTicket(outcome.ticket())
                .setRevision(outcome.revision()).setRetryAfterMicros(outcome.retryAfterMicros())
                .setStatus(switch (outcome.status()) {
                    case MISS -> QueryStatus.MISS;
                    case PENDING -> QueryStatus.PENDING;
                    case READY -> QueryStatus.READY;
                    case RESIDENT -> QueryStatus.RESIDENT;
                })
                .setDetail(switch (outcome.detail()) {
                    case MISS -> QueryStatus.MISS;
                    case CANDIDATE -> QueryStatus.CANDIDATE;
                    case RESERVED -> QueryStatus.RESERVED;
                    case RESIDENT -> QueryStatus.RESIDENT;
                    case READY -> QueryStatus.READY;
                })
                .setOperationId(outcome.operationId());
        if (outcome.requestId() != null) {
            reply.setRequestId(outcome.requestId());
        }
        if (outcome.leaseId() != 0) {
            reply.setReadyBlocks(outcome.readyBlocks()).setBoundaryTokens(outcome.boundaryTokens());
            Lease.Builder lease = Lease.newBuilder().setLeaseId(outcome.leaseId());
            for (AdmissionCommands.LeasedGroup group : outcome.leased()) {
                GroupSpans.Builder spans = GroupSpans.newBuilder().setGroupId(group.groupId());
                int runStart = -1;
                int previous = -2;
                for (int i = 0; i < group.positions().size(); i++) {
                    int position = group.positions().get(i);
                    ImageStore.ImageRef ref = group.refs().get(i);
                    LeasedPage.Builder page = LeasedPage.newBuilder().setGroupId(group.groupId()).setPosition(position)
                            .setSlot(descriptor(ref));
                    if (ref.crcKnown()) {
                        page.setCrc32C((int) ref.crc32c());
                    }
                    lease.addPages(page);
                    if (position != previous + 1) {
                        if (runStart >= 0) {
                            spans.addSpans(BlockSpan.newBuilder().setStart(runStart).setEnd(previous + 1));
                        }
                        runStart = position;
                    }
                    previous = position;
                }
                if (runStart >= 0) {
                    spans.addSpans(BlockSpan.newBuilder().setStart(runStart).setEnd(previous + 1));
                }
                reply.addLeasedRanges(spans);
            }
            reply.setLease(lease);
        }
        return reply.build();
    }

    private Future<CancelQueryReply> onCancelQuery(CancelQueryRequest request) {
        SessionRegistry.Instance instance = sessions.authenticate(request.getSession());
        return admission.cancel(instance.id(), request.getTicket())
                .map(pages -> CancelQueryReply.newBuilder().setReleasedPages(pages).build());
    }

    /**
     * The engine contract: copy, then release. A release answers whether the lease stayed valid for its whole life;
     * a lease that ended with its holder's session (lapse, unregister, resume) is answered lease_valid = false,
     * SESSION_ENDED, for as long as its tombstone lives (after that, an error: also "discard").
     */
    private Future<ReleaseLeaseReply> onReleaseLease(ReleaseLeaseRequest request) {
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
        return admission.release(instance.id(), leaseId)
                .map(pages -> ReleaseLeaseReply.newBuilder().setReleasedPages(pages).setLeaseValid(true).build())
                .recover(failure -> failure instanceof OrbitException orbit && orbit.reason() == ErrorReason.UNKNOWN_LEASE
                        && tombstones.endedWithSession(instanceId, leaseId)
                        ? Future.succeededFuture(endedWithSession()) : Future.failedFuture(failure));
    }

    private ReleaseLeaseReply endedWithSession() {
        invalidatedLeases.increment();
        return ReleaseLeaseReply.newBuilder().setReleasedPages(0).setLeaseValid(false)
                .setInvalidReason(LeaseInvalidReason.SESSION_ENDED).build();
    }

    private Future<StatsReply> onStats(StatsRequest request) {
        SessionRegistry.Instance instance = sessions.authenticate(request.getSession());
        return storage.stats().compose(s -> admission.stats(instance.id()).map(a -> StatsReply.newBuilder()
                .setPoolBytesTotal(s.poolBytes()).setPoolBytesUsed(s.usedBytes()).setResidentImages(s.residentImages())
                .setEvictions(s.evictions()).setActiveLeases(a.activeLeases()).setRegisteredInstances(sessions.size())
                .setSessionLeases(a.instanceLeases()).setSessionOutstandingQueries(a.instanceOutstandingQueries())
                .build()));
    }

    // ---- validation helpers ----

    private void requireNamespace(SessionRegistry.Instance instance, ByteString namespace) {
        if (!instance.inNamespace(namespace.toByteArray())) {
            throw new OrbitException(ErrorReason.NAMESPACE_MISMATCH, "the request names a namespace other than this instance's");
        }
    }

    private void requireCount(int count) {
        if (count > settings.maxPagesPerRequest()) {
            throw new OrbitException(ErrorReason.OVERSIZED_REQUEST, count + " pages in one request, at most "
                    + settings.maxPagesPerRequest());
        }
    }

    private static GroupSpec requireGroup(SessionRegistry.Instance instance, int groupId) {
        GroupSpec group = instance.groups().get(groupId);
        if (group == null) {
            throw new OrbitException(ErrorReason.MALFORMED_REQUEST, "group " + groupId + " is not registered for this instance");
        }
        return group;
    }

    private static StateKey stateKey(SessionRegistry.Instance instance, int groupId, ByteString hash) {
        if (hash.isEmpty() || hash.size() > StateKey.MAX_BLOCK_HASH_BYTES) {
            throw new OrbitException(ErrorReason.MALFORMED_REQUEST, "block hash must be 1.." + StateKey.MAX_BLOCK_HASH_BYTES
                    + " bytes, got " + hash.size());
        }
        // The registration's namespace array is never modified; the hash bytes are a fresh copy.
        return StateKey.adopt(instance.namespace(), groupId, hash.toByteArray());
    }

    private static PoolDescriptor descriptor(ImageStore.ImageRef ref) {
        return PoolDescriptor.newBuilder().setRegionId(POOL_REGION_ID).setOffset(ref.offset())
                .setLength(ref.lengthBytes()).setGeneration(ref.generation()).build();
    }

    /** Reads the token file, creating it (mode 0600, 32 random bytes as hex) when absent. */
    public static String loadOrCreateToken(Path tokenFile) throws IOException {
        if (Files.exists(tokenFile)) {
            String existing = Files.readString(tokenFile).strip();
            if (existing.length() < 16) {
                throw new IOException("engine token in " + tokenFile + " is shorter than 16 characters");
            }
            return existing;
        }
        byte[] secret = new byte[32];
        new java.security.SecureRandom().nextBytes(secret);
        String token = java.util.HexFormat.of().formatHex(secret);
        Files.createDirectories(tokenFile.toAbsolutePath().getParent());
        Path tmp = tokenFile.resolveSibling(tokenFile.getFileName() + ".tmp");
        Files.deleteIfExists(tmp);
        Files.createFile(tmp, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        Files.writeString(tmp, token + "\n");
        Files.move(tmp, tokenFile, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
        return token;
    }
}
