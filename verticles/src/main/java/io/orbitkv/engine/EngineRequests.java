package io.orbitkv.engine;

import com.google.protobuf.ByteString;
import io.orbitkv.admission.AdmissionCommands.DemandPlan;
import io.orbitkv.admission.AdmissionCommands.GroupPlan;
import io.orbitkv.common.OrbitException;
import io.orbitkv.model.plan.RouteTemplate;
import io.orbitkv.protocol.engine.BlockSpan;
import io.orbitkv.protocol.engine.Demand;
import io.orbitkv.protocol.engine.ErrorReason;
import io.orbitkv.protocol.engine.GroupChain;
import io.orbitkv.protocol.engine.GroupDemand;
import io.orbitkv.protocol.engine.GroupKind;
import io.orbitkv.protocol.engine.GroupSpec;
import io.orbitkv.protocol.engine.PoolDescriptor;
import io.orbitkv.protocol.engine.SubmitQueryRequest;
import io.orbitkv.recovery.BlockRange;
import io.orbitkv.recovery.DemandValidator;
import io.orbitkv.recovery.GroupRanges;
import io.orbitkv.recovery.GroupRule;
import io.orbitkv.recovery.RecoveryDemand;
import io.orbitkv.recovery.RecoveryException;
import io.orbitkv.recovery.RecoveryRules;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.PositionedKey;
import io.orbitkv.model.StateKey;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import java.util.function.Supplier;

/**
 * Validation of engine requests against the caller's registration, and their mapping into the commands of the
 * admission and storage roles. Transport-agnostic: any door (gRPC, the event-bus bridge) hands over the protobuf
 * messages of engine.proto and gets either a command or a typed {@link OrbitException}; nothing is forwarded or
 * reserved before every check passed.
 *
 * <p>Design note (unsigned wire numbers): protobuf {@code uint32}/{@code uint64} arrive in Java's signed
 * {@code int}/{@code long}, so 2^63 + 4096 reads as a negative long and would slip past a signed {@code > max} check
 * into arithmetic. Every such field that reaches arithmetic goes through {@link WireNumbers} first, compared unsigned
 * against an explicit bound and named in the refusal with its unsigned value. Identifiers (instance, publish, lease,
 * ticket, operation ids, generations) are only compared for equality and stay as they are.
 */
final class EngineRequests {
    static final int MAX_REQUEST_ID_CHARS = 128;

    /** Bound on {@link #prefixRules}: cleared when full (the rules are cheap to build again). */
    static final int MAX_PREFIX_RULES = 1024;

    private final int maxPagesPerRequest;
    private final long poolBytes;
    /**
     * The rules of single-group prefix queries by page size and group: immutable, so one instance serves every query
     * of that shape instead of sorting and copying a rule list per query. Confined to the engine role's loop.
     */
    private final Map<Long, RecoveryRules> prefixRules = new HashMap<>();

    EngineRequests(int maxPagesPerRequest, long poolBytes) {
        this.maxPagesPerRequest = maxPagesPerRequest;
        this.poolBytes = poolBytes;
    }

    void requireNamespace(SessionRegistry.Instance instance, ByteString namespace) {
        if (!instance.inNamespace(namespace.toByteArray())) {
            throw new OrbitException(ErrorReason.NAMESPACE_MISMATCH, "the request names a namespace other than this instance's");
        }
    }

    void requireCount(long count) {
        if (count > maxPagesPerRequest) {
            throw new OrbitException(ErrorReason.OVERSIZED_REQUEST, count + " pages in one request, at most " + maxPagesPerRequest);
        }
    }

    static GroupSpec requireGroup(SessionRegistry.Instance instance, int groupId) {
        GroupSpec group = instance.groups().get(groupId);
        if (group == null) {
            throw new OrbitException(ErrorReason.MALFORMED_REQUEST, "group " + Integer.toUnsignedString(groupId)
                    + " is not registered for this instance");
        }
        return group;
    }

    static StateKey stateKey(SessionRegistry.Instance instance, int groupId, ByteString hash) {
        if (hash.isEmpty() || hash.size() > StateKey.MAX_BLOCK_HASH_BYTES) {
            throw new OrbitException(ErrorReason.MALFORMED_REQUEST, "block hash must be 1.." + StateKey.MAX_BLOCK_HASH_BYTES
                    + " bytes, got " + hash.size());
        }
        // The registration's namespace array is never modified; the hash bytes are a fresh copy.
        return StateKey.adopt(instance.namespace(), groupId, hash.toByteArray());
    }

    /** Descriptors an engine says it wrote: inside the pool (compared unsigned), in region {@code regionId}. */
    List<ImageRef> writtenDescriptors(List<PoolDescriptor> descriptors, long regionId) {
        List<ImageRef> written = new ArrayList<>(descriptors.size());
        for (PoolDescriptor d : descriptors) {
            long offset = d.getOffset();
            long length = d.getLength();
            if (d.getRegionId() != regionId || length == 0 || Long.compareUnsigned(offset, poolBytes) >= 0
                    || Long.compareUnsigned(length, poolBytes - offset) > 0) {
                throw new OrbitException(ErrorReason.DESCRIPTOR_OUTSIDE_POOL, "descriptor region "
                        + Long.toUnsignedString(d.getRegionId()) + " [" + Long.toUnsignedString(offset) + ", +"
                        + Long.toUnsignedString(length) + ") is outside the pool of " + poolBytes + " bytes");
            }
            written.add(new ImageRef(null, offset, length, d.getGeneration()));
        }
        return written;
    }

    /**
     * The prefix form: every named group is treated as full attention (the longest prefix resident for all of them),
     * expressed as a demand from origin 0 to the shortest chain. A group registered as sliding window or recurrent
     * is refused: a plain prefix is not a legal boundary for it (use SubmitDemand).
     */
    DemandPlan prefixPlan(SessionRegistry.Instance instance, SubmitQueryRequest request) {
        requireNamespace(instance, request.getNamespaceId());
        if (request.getGroupsCount() == 0) {
            throw new OrbitException(ErrorReason.MALFORMED_REQUEST, "a query names at least one group chain");
        }
        long total = 0;
        int shortest = Integer.MAX_VALUE;
        Set<Integer> seen = new HashSet<>();
        List<GroupRule> rules = new ArrayList<>();
        for (GroupChain chain : request.getGroupsList()) {
            GroupSpec spec = requireGroup(instance, chain.getGroupId());
            if (!seen.add(chain.getGroupId())) {
                throw new OrbitException(ErrorReason.MALFORMED_REQUEST, "group " + Integer.toUnsignedString(chain.getGroupId())
                        + " appears twice in the query");
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
        List<GroupPlan> groups = new ArrayList<>(request.getGroupsCount());
        for (GroupChain chain : request.getGroupsList()) {
            List<PositionedKey> keys = new ArrayList<>(shortest);
            for (int position = 0; position < shortest; position++) {
                keys.add(new PositionedKey(position, stateKey(instance, chain.getGroupId(), chain.getBlockHashes(position))));
            }
            groups.add(new GroupPlan(chain.getGroupId(), instance.groups().get(chain.getGroupId()).getBytesPerPage(), keys));
        }
        return new DemandPlan(null, request.getRevision(), 0, instance.tenant(), prefixRules(pageSize, rules), 0,
                (long) shortest * pageSize, groups, 0, 0, 0, -1, false, null, instance.prefillTokensPerSecond(),
                Optional.empty());
    }

    /** Full-attention rules of a prefix query; a single group's come from {@link #prefixRules}. */
    private RecoveryRules prefixRules(int pageSize, List<GroupRule> rules) {
        if (rules.size() != 1) {
            return new RecoveryRules(pageSize, rules);
        }
        long shape = (long) pageSize << 32 | (rules.getFirst().groupId() & 0xffffffffL);
        RecoveryRules cached = prefixRules.get(shape);
        if (cached == null) {
            if (prefixRules.size() >= MAX_PREFIX_RULES) {
                prefixRules.clear();
            }
            cached = new RecoveryRules(pageSize, rules);
            prefixRules.put(shape, cached);
        }
        return cached;
    }

    /** The exact form: validated against the registration before anything is forwarded or reserved. */
    DemandPlan demandPlan(SessionRegistry.Instance instance, Demand demand) {
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
        long origin = WireNumbers.u64AtMost("valid_prefix_tokens", demand.getValidPrefixTokens(), Long.MAX_VALUE,
                ErrorReason.INVALID_DEMAND);
        long end = WireNumbers.u64AtMost("selected_end_tokens", demand.getSelectedEndTokens(), Long.MAX_VALUE,
                ErrorReason.INVALID_DEMAND);
        int pageSize = (int) WireNumbers.u32AtMost("page_size_tokens", demand.getPageSizeTokens(),
                Namespaces.MAX_PAGE_SIZE_TOKENS, ErrorReason.INVALID_DEMAND);
        long firstUseMicros = WireNumbers.u64AtMost("first_use_micros", demand.getFirstUseMicros(), Long.MAX_VALUE,
                ErrorReason.INVALID_DEMAND);
        if (demand.getGroupsCount() > instance.groups().size()) {
            throw new OrbitException(ErrorReason.INVALID_DEMAND, "demand names " + demand.getGroupsCount()
                    + " groups, the instance registered " + instance.groups().size());
        }
        long total = 0;
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
                int start = (int) WireNumbers.u32AtMost("range start", span.getStart(), Integer.MAX_VALUE, ErrorReason.INVALID_DEMAND);
                int stop = (int) WireNumbers.u32AtMost("range end", span.getEnd(), Integer.MAX_VALUE, ErrorReason.INVALID_DEMAND);
                ranges.add(recovery(() -> new BlockRange(start, stop)));
            }
            declared.add(new GroupRanges(group.getGroupId(), ranges));
        }
        int selectedHashes = selected == null ? 0 : selected.getBlockHashesCount();
        RecoveryDemand recoveryDemand = new RecoveryDemand(demand.getRevision(), pageSize, origin, end,
                demand.getSelectedGroupId(), selectedHashes, declared);
        // The revision is checked against the live ticket by admission; everything else here, before any byte moves.
        recovery(() -> {
            DemandValidator.validate(instance.rules(), recoveryDemand, OptionalLong.empty());
            return null;
        });
        int endPosition = (int) (end / instance.rules().pageSizeTokens());
        List<GroupPlan> groups = new ArrayList<>(demand.getGroupsCount());
        for (GroupDemand group : demand.getGroupsList()) {
            List<ByteString> chain = group.getBlockHashesCount() == 0 ? selected.getBlockHashesList() : group.getBlockHashesList();
            if (chain.size() != endPosition) {
                throw new OrbitException(ErrorReason.INVALID_DEMAND, "HASH_COUNT_MISMATCH: group " + group.getGroupId()
                        + " sent " + chain.size() + " block hashes; expected 0 (use the selected group's) or " + endPosition);
            }
            List<PositionedKey> keys = new ArrayList<>();
            for (BlockSpan span : group.getRangesList()) {
                for (int position = span.getStart(); position < span.getEnd(); position++) {
                    keys.add(new PositionedKey(position, stateKey(instance, group.getGroupId(), chain.get(position))));
                }
            }
            groups.add(new GroupPlan(group.getGroupId(), instance.groups().get(group.getGroupId()).getBytesPerPage(), keys));
        }
        // Unset: the configured budget (-1). Set: its nanoseconds, saturating (an unsigned value beyond 2^63/1000
        // microseconds is "as long as the configured budget allows", since it is capped by it anyway).
        long maxWaitNanos = !demand.hasMaxWaitMicros() ? -1
                : Long.compareUnsigned(demand.getMaxWaitMicros(), Long.MAX_VALUE / 1000) > 0 ? Long.MAX_VALUE
                : demand.getMaxWaitMicros() * 1000;
        double rate = demand.getPrefillTokensPerSecond();
        if (!(rate >= 0 && Double.isFinite(rate))) {
            throw new OrbitException(ErrorReason.INVALID_DEMAND, "prefill_tokens_per_second must be finite and >= 0, got "
                    + rate);
        }
        return new DemandPlan(demand.getRequestId(), demand.getRevision(), demand.getOperationId(), instance.tenant(),
                instance.rules(), origin, end, groups, firstUseMicros, demand.getPriority(), demand.getConfidence(),
                maxWaitNanos, demand.getSpeculative(), null, rate > 0 ? rate : instance.prefillTokensPerSecond(),
                requestedRoute(demand));
    }

    /** Cluster member ids: what cluster.member-id accepts. */
    private static final java.util.regex.Pattern MEMBER_ID = java.util.regex.Pattern.compile("[a-z0-9-]{1,63}");

    /**
     * A demand's producer (P/D), checked before anything is admitted: INVALID_PRODUCER for an instance id or epoch of
     * 0, a request id outside 1..128 characters, a member id that is not one, another member while this Manager is in
     * no cluster ({@code memberId} null), the calling session itself, or a speculative demand. This Manager's own
     * member id names a local producer. The session named need not be live: one that ended answers MISS.
     */
    static io.orbitkv.model.ProducerRef producer(SessionRegistry.Instance caller, Demand demand, String memberId) {
        io.orbitkv.protocol.engine.Producer p = demand.getProducer();
        if (p.getInstanceId() == 0 || p.getSessionEpoch() == 0) {
            throw new OrbitException(ErrorReason.INVALID_PRODUCER, "a producer names its instance id and session epoch");
        }
        if (p.getRequestId().isEmpty() || p.getRequestId().length() > MAX_REQUEST_ID_CHARS) {
            throw new OrbitException(ErrorReason.INVALID_PRODUCER, "the producer's request_id must be 1.."
                    + MAX_REQUEST_ID_CHARS + " characters");
        }
        String member = p.getMember().isEmpty() || p.getMember().equals(memberId) ? null : p.getMember();
        if (member != null && !MEMBER_ID.matcher(member).matches()) {
            throw new OrbitException(ErrorReason.INVALID_PRODUCER, "the producer's member must be a cluster member id"
                    + " (1..63 of [a-z0-9-])");
        }
        if (member != null && memberId == null) {
            throw new OrbitException(ErrorReason.INVALID_PRODUCER, "the producer is on another Manager, and this"
                    + " Manager is in no cluster");
        }
        if (member == null && p.getInstanceId() == caller.id()) {
            throw new OrbitException(ErrorReason.INVALID_PRODUCER, "a demand cannot wait for its own session's pages");
        }
        if (demand.getSpeculative()) {
            throw new OrbitException(ErrorReason.INVALID_PRODUCER, "a speculative demand does not wait for a producer");
        }
        return new io.orbitkv.model.ProducerRef(member, p.getInstanceId(), p.getSessionEpoch(), p.getRequestId());
    }

    /** A publish's request id (AllocatePublishRequest.request_id): 0..128 characters; null when absent. */
    static String publishRequestId(String requestId) {
        if (requestId.length() > MAX_REQUEST_ID_CHARS) {
            throw new OrbitException(ErrorReason.MALFORMED_REQUEST, "request_id must be 0.." + MAX_REQUEST_ID_CHARS
                    + " characters");
        }
        return requestId.isEmpty() ? null : requestId;
    }

    /** The wire route as a template; an unknown number is refused (a newer client than this Manager). */
    static Optional<RouteTemplate> requestedRoute(Demand demand) {
        return switch (demand.getRequestedRoute()) {
            case ROUTE_DEFAULT -> Optional.empty();
            case ROUTE_LOCAL_DRAM -> Optional.of(RouteTemplate.LOCAL_DRAM);
            case ROUTE_HOST_FROM_LOCAL_SSD -> Optional.of(RouteTemplate.HOST_FROM_LOCAL_SSD);
            case ROUTE_LOCAL_SSD_URING -> Optional.of(RouteTemplate.LOCAL_SSD_URING);
            case ROUTE_HOST_FROM_PEER_DRAM -> Optional.of(RouteTemplate.HOST_FROM_PEER_DRAM);
            case ROUTE_HOST_FROM_PEER_SSD -> Optional.of(RouteTemplate.HOST_FROM_PEER_SSD);
            case UNRECOGNIZED -> throw new OrbitException(ErrorReason.INVALID_DEMAND, "requested_route "
                    + demand.getRequestedRouteValue() + " is not a route this Manager knows");
        };
    }

    /** Recovery-contract failures travel as their engine-API reason. */
    static <T> T recovery(Supplier<T> check) {
        try {
            return check.get();
        } catch (RecoveryException e) {
            throw new OrbitException(e.reason().wireReason(), e.getMessage());
        }
    }
}
