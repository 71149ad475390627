package io.orbitkv.engine;

import com.google.protobuf.ByteString;
import io.orbitkv.admission.AdmissionCommands.AdmissionStats;
import io.orbitkv.admission.AdmissionCommands.LeasedGroup;
import io.orbitkv.admission.AdmissionCommands.Outcome;
import io.orbitkv.protocol.engine.AllocatePublishReply;
import io.orbitkv.protocol.engine.BlockSpan;
import io.orbitkv.protocol.engine.GroupSpans;
import io.orbitkv.protocol.engine.Lease;
import io.orbitkv.protocol.engine.LeaseInvalidReason;
import io.orbitkv.protocol.engine.LeasedPage;
import io.orbitkv.protocol.engine.PoolDescriptor;
import io.orbitkv.protocol.engine.PoolMapping;
import io.orbitkv.protocol.engine.PublishSlot;
import io.orbitkv.protocol.engine.QueryReply;
import io.orbitkv.protocol.engine.QueryStatus;
import io.orbitkv.protocol.engine.RegisterReply;
import io.orbitkv.protocol.engine.ReleaseLeaseReply;
import io.orbitkv.protocol.engine.SlotStatus;
import io.orbitkv.protocol.engine.StatsReply;
import io.orbitkv.model.AllocateResult;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.SlotGrant;
import io.orbitkv.storage.StorageCommands.StorageStats;
import io.orbitkv.protocol.engine.RestoreOutcome;
import io.orbitkv.protocol.engine.RestoreRouteAvailability;
import io.orbitkv.restore.RestoreCommands;
import io.orbitkv.restore.RestoreProxy;
import java.nio.file.Path;

/** The engine API's replies built from the roles' records (engine.proto messages); pure mapping, no state. */
final class EngineReplies {
    /** The one pool region this Manager has: descriptors name it. */
    static final long POOL_REGION_ID = 1;

    private EngineReplies() {}

    static RegisterReply registered(SessionRegistry.Instance instance, Path poolPath, long poolBytes, long ttlMillis) {
        return RegisterReply.newBuilder()
                .setInstanceId(instance.id())
                .setSessionEpoch(instance.epoch())
                .setNamespaceId(ByteString.copyFrom(instance.namespace()))
                .setPool(PoolMapping.newBuilder().setRegionId(POOL_REGION_ID).setPath(poolPath.toString()).setSizeBytes(poolBytes))
                .setSessionTtlMillis(ttlMillis)
                .addAllRestoreRoutes(restoreRoutes())
                .build();
    }

    /** Every restore route with its availability and, when unavailable, the probe's cause. */
    static java.util.List<RestoreRouteAvailability> restoreRoutes() {
        java.util.List<RestoreRouteAvailability> routes = new java.util.ArrayList<>();
        for (RestoreCommands.RouteStatus status : RestoreProxy.routes()) {
            routes.add(RestoreRouteAvailability.newBuilder().setRoute(status.route()).setAvailable(status.available())
                    .setUnavailableCause(status.cause()).build());
        }
        return routes;
    }

    /** {@code stored[i]} false: request page i was beyond max_stored_tokens and is NOT_STORED (not in the result). */
    static AllocatePublishReply allocated(AllocateResult result, boolean[] stored) {
        AllocatePublishReply.Builder reply = AllocatePublishReply.newBuilder().setPublishId(result.publishId());
        int next = 0;
        for (boolean kept : stored) {
            if (!kept) {
                reply.addSlots(PublishSlot.newBuilder().setStatus(SlotStatus.NOT_STORED));
                continue;
            }
            SlotGrant grant = result.slots().get(next++);
            PublishSlot.Builder slot = PublishSlot.newBuilder();
            if (grant.allocated()) {
                slot.setStatus(SlotStatus.ALLOCATED).setSlot(descriptor(grant.ref()));
            } else {
                slot.setStatus(SlotStatus.ALREADY_PRESENT);
            }
            reply.addSlots(slot);
        }
        return reply.build();
    }

    /** A release of a lease that stayed valid from grant to release. */
    static ReleaseLeaseReply releasedValid(int pages) {
        return ReleaseLeaseReply.newBuilder().setReleasedPages(pages).setLeaseValid(true).build();
    }

    /** A release of a lease that ended with its holder's session: discard what was copied. */
    static ReleaseLeaseReply endedWithSession() {
        return ReleaseLeaseReply.newBuilder().setReleasedPages(0).setLeaseValid(false)
                .setInvalidReason(LeaseInvalidReason.SESSION_ENDED).build();
    }

    static StatsReply stats(StorageStats storage, AdmissionStats admission, int registeredInstances) {
        return StatsReply.newBuilder()
                .setPoolBytesTotal(storage.poolBytes()).setPoolBytesUsed(storage.usedBytes())
                .setResidentImages(storage.residentImages()).setEvictions(storage.evictions())
                .setActiveLeases(admission.activeLeases()).setRegisteredInstances(registeredInstances)
                .setSessionLeases(admission.instanceLeases())
                .setSessionOutstandingQueries(admission.instanceOutstandingQueries())
                .build();
    }

    /** A query answer: READY/RESIDENT carry the lease page by page (with each page's CRC32C when known) and by span. */
    static QueryReply query(Outcome outcome) {
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
                    case WAITING_FOR_PRODUCER -> QueryStatus.WAITING_FOR_PRODUCER;
                    case CANDIDATE -> QueryStatus.CANDIDATE;
                    case RESERVED -> QueryStatus.RESERVED;
                    case RESIDENT -> QueryStatus.RESIDENT;
                    case READY -> QueryStatus.READY;
                })
                .setOperationId(outcome.operationId());
        if (outcome.requestId() != null) {
            reply.setRequestId(outcome.requestId());
        }
        if (outcome.boundaryReason() != null) {
            reply.setBoundaryReason(switch (outcome.boundaryReason()) {
                case LONGEST -> io.orbitkv.protocol.engine.BoundaryReason.LONGEST;
                case EARLIER_FIRST_TOKEN -> io.orbitkv.protocol.engine.BoundaryReason.EARLIER_FIRST_TOKEN;
                case BUDGET -> io.orbitkv.protocol.engine.BoundaryReason.BUDGET;
            });
        }
        if (outcome.leaseId() != 0 || outcome.restored() != null) {
            reply.setReadyBlocks(outcome.readyBlocks()).setBoundaryTokens(outcome.boundaryTokens());
            boolean leasing = outcome.leaseId() != 0;
            Lease.Builder lease = Lease.newBuilder().setLeaseId(outcome.leaseId());
            // Collected at their final size and added at once: the builder's own list would grow five times for 64.
            java.util.List<LeasedPage> pages = leasing ? new java.util.ArrayList<>(leasedPages(outcome)) : null;
            for (LeasedGroup group : outcome.leased()) {
                GroupSpans.Builder spans = GroupSpans.newBuilder().setGroupId(group.groupId());
                int runStart = -1;
                int previous = -2;
                for (int i = 0; i < group.positions().size(); i++) {
                    int position = group.positions().get(i);
                    if (leasing) {
                        pages.add(leasedPage(group.groupId(), position, group.refs().get(i)));
                    }
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
            if (leasing) {
                reply.setLease(lease.addAllPages(pages));
            }
            if (outcome.restored() != null) {
                reply.setRestore(RestoreOutcome.newBuilder().setRoute(outcome.restored().route())
                        .setRestoredPages(outcome.restored().pages()).setRestoredBytes(outcome.restored().bytes()));
            }
        }
        return reply.build();
    }

    private static int leasedPages(Outcome outcome) {
        int pages = 0;
        for (LeasedGroup group : outcome.leased()) {
            pages += group.positions().size();
        }
        return pages;
    }

    static LeasedPage leasedPage(int groupId, int position, ImageRef ref) {
        LeasedPage.Builder page = LeasedPage.newBuilder().setGroupId(groupId).setPosition(position).setSlot(descriptor(ref));
        if (ref.crcKnown()) {
            page.setCrc32C((int) ref.crc32c());
        }
        return page.build();
    }

    static PoolDescriptor descriptor(ImageRef ref) {
        return PoolDescriptor.newBuilder().setRegionId(POOL_REGION_ID).setOffset(ref.offset())
                .setLength(ref.lengthBytes()).setGeneration(ref.generation()).build();
    }
}
