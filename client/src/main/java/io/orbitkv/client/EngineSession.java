package io.orbitkv.client;

import com.google.protobuf.ByteString;
import io.orbitkv.codecs.extent.Crc32c;
import io.orbitkv.nativeio.shm.SharedMemoryFile;
import io.orbitkv.protocol.engine.*;
import com.google.protobuf.Message;
import com.google.protobuf.Parser;
import io.orbitkv.protocol.colocated.ColocatedFrame;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.grpc.common.ServiceMethod;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One registered engine instance: its session, its mapping of the Manager's pool, and the calls that use them.
 *
 * <p>Design note (ownership): the session maps the pool read-write and unmaps it on {@link #close()}, after
 * unregistering (which releases every lease it still holds). Heartbeats run every third of the session ttl on the
 * client's event loop; a closed session stops them. Copying into and out of pool slots is the engine's job; the
 * helpers here check a descriptor against the mapping before touching memory.
 *
 * <p>The lease contract (engine.proto, README): copy the leased pages, then release; keep the copy only when the
 * release answers {@code lease_valid = true}. {@code false} (the session ended before the release, so the slots may
 * have been reused after their quarantine) or any error means "discard the copy and recompute".
 * {@link #copyThenRelease} does exactly that, verifying each page's CRC32C when the Manager sent one; {@link #release}
 * counts invalid answers too ({@link #invalidReleases}).
 */
public final class EngineSession implements AutoCloseable {
    private final OrbitKvClient client;
    private final InstanceIdentity identity;
    private final RegisterReply registration;
    private final SessionRef session;
    private final SharedMemoryFile pool;
    private final long heartbeatTimer;
    private final AtomicLong invalidReleases = new AtomicLong();
    private final AtomicLong discardedCopies = new AtomicLong();
    private volatile boolean closed;
    /** Where the per-request calls go when called off an event loop; null: gRPC. */
    private volatile ColocatedChannel colocated;

    EngineSession(OrbitKvClient client, InstanceIdentity identity, RegisterReply registration) throws IOException {
        this.client = client;
        this.identity = identity;
        this.registration = registration;
        this.session = SessionRef.newBuilder().setInstanceId(registration.getInstanceId())
                .setSessionEpoch(registration.getSessionEpoch()).build();
        this.pool = SharedMemoryFile.map(Path.of(registration.getPool().getPath()), registration.getPool().getSizeBytes());
        long period = Math.max(50, registration.getSessionTtlMillis() / 3);
        this.heartbeatTimer = client.vertx().setPeriodic(period, id -> {
            if (!closed) {
                heartbeat();
            }
        });
    }

    public SessionRef session() {
        return session;
    }

    public long instanceId() {
        return registration.getInstanceId();
    }

    public ByteString namespace() {
        return registration.getNamespaceId();
    }

    public InstanceIdentity identity() {
        return identity;
    }

    public RegisterReply registration() {
        return registration;
    }

    /** The whole mapped pool (engine side). */
    public MemorySegment pool() {
        return pool.segment();
    }

    /** The pool bytes a descriptor names, after checking it lies inside the mapping. */
    public MemorySegment slot(PoolDescriptor descriptor) {
        if (descriptor.getRegionId() != registration.getPool().getRegionId()) {
            throw new IllegalArgumentException("descriptor names region " + descriptor.getRegionId());
        }
        return pool.segment().asSlice(descriptor.getOffset(), descriptor.getLength());
    }

    /**
     * Sends this session's per-request calls (allocate, seal, abort, submit, demand, poll, cancel, release) over a
     * co-located channel to the same Manager, {@code null} to go back to gRPC. Only a call made off a Vert.x event loop
     * takes the channel: it runs on the calling thread (which waits in the socket for its reply, without the gRPC
     * client's event loop between it and the Manager) and returns a completed future; a call made on an event loop,
     * and a request above the channel's frame bound, still go over gRPC, so nothing blocks a loop (a poll whose answer
     * is above the bound is asked again over gRPC). Same token, same
     * typed refusals ({@link OrbitKvException}). The channel stays the caller's to close; closing it releases the leases
     * it was handed (see {@link ColocatedChannel}).
     */
    public EngineSession useColocated(ColocatedChannel channel) {
        this.colocated = channel;
        return this;
    }

    private <Q extends Message, R extends Message> Future<R> call(ServiceMethod<R, Q> method, Q request, Parser<R> parser) {
        ColocatedChannel channel = colocated;
        if (channel == null || Context.isOnEventLoopThread()
                || ColocatedFrame.HEADER_BYTES + (long) request.getSerializedSize() > channel.maxFrameBytes()) {
            return client.call(method, request);
        }
        try {
            return Future.succeededFuture(channel.call(method.methodName(), request, parser));
        } catch (OrbitKvException e) {
            // A poll repeats an answer whose reply may exceed the frame bound (a large query submitted over gRPC); the
            // refused poll changed nothing, so it is asked again where any size fits.
            if (e.reason() == ErrorReason.OVERSIZED_REQUEST && method == EngineServiceGrpcClient.PollQuery) {
                return client.call(method, request);
            }
            return Future.failedFuture(e);
        } catch (RuntimeException e) {
            return Future.failedFuture(e);
        }
    }

    public Future<HeartbeatReply> heartbeat() {
        return client.call(EngineServiceGrpcClient.Heartbeat, HeartbeatRequest.newBuilder().setSession(session).build());
    }

    public Future<AllocatePublishReply> allocate(List<PageKey> pages) {
        return call(EngineServiceGrpcClient.AllocatePublish, AllocatePublishRequest.newBuilder()
                .setSession(session).setNamespaceId(namespace()).addAllPages(pages).build(), AllocatePublishReply.parser());
    }

    /** An allocation with its options set ({@code do_not_store}, {@code max_stored_tokens}); session and namespace filled. */
    public Future<AllocatePublishReply> allocate(AllocatePublishRequest.Builder request) {
        if (request.getNamespaceId().isEmpty()) {
            request.setNamespaceId(namespace());
        }
        return call(EngineServiceGrpcClient.AllocatePublish, request.setSession(session).build(),
                AllocatePublishReply.parser());
    }

    /** Retains these chains for ttl at priority (see engine.proto Retain); the namespace is this session's. */
    public Future<io.orbitkv.protocol.engine.RetainReply> retain(List<GroupChain> groups, long ttlMillis, int priority) {
        return retain(io.orbitkv.protocol.engine.RetainRequest.newBuilder().addAllGroups(groups).setTtlMillis(ttlMillis)
                .setPriority(priority));
    }

    public Future<io.orbitkv.protocol.engine.RetainReply> retain(io.orbitkv.protocol.engine.RetainRequest.Builder request) {
        if (request.getNamespaceId().isEmpty()) {
            request.setNamespaceId(namespace());
        }
        return client.call(EngineServiceGrpcClient.Retain, request.setSession(session).build());
    }

    public Future<io.orbitkv.protocol.engine.UnretainReply> unretain(long retentionId) {
        return client.call(EngineServiceGrpcClient.Unretain, io.orbitkv.protocol.engine.UnretainRequest.newBuilder()
                .setSession(session).setRetentionId(retentionId).build());
    }

    public Future<SealPublishReply> seal(long publishId, List<Integer> crc32c) {
        return call(EngineServiceGrpcClient.SealPublish, SealPublishRequest.newBuilder().setSession(session)
                .setPublishId(publishId).addAllCrc32C(crc32c).build(), SealPublishReply.parser());
    }

    public Future<SealPublishReply> seal(SealPublishRequest.Builder request) {
        return call(EngineServiceGrpcClient.SealPublish, request.setSession(session).build(), SealPublishReply.parser());
    }

    public Future<AbortPublishReply> abort(long publishId) {
        return call(EngineServiceGrpcClient.AbortPublish, AbortPublishRequest.newBuilder().setSession(session)
                .setPublishId(publishId).build(), AbortPublishReply.parser());
    }

    public Future<QueryReply> submit(List<GroupChain> groups, long revision) {
        return call(EngineServiceGrpcClient.SubmitQuery, SubmitQueryRequest.newBuilder().setSession(session)
                .setNamespaceId(namespace()).addAllGroups(groups).setRevision(revision).build(), QueryReply.parser());
    }

    public Future<QueryReply> submit(SubmitQueryRequest.Builder request) {
        return call(EngineServiceGrpcClient.SubmitQuery, request.setSession(session).build(), QueryReply.parser());
    }

    /**
     * Submits (or revises: same request_id, higher revision) an exact demand. An empty namespace_id is filled with
     * this session's; the answer may be PENDING (poll again), MISS, READY, or RESIDENT for a speculative demand.
     */
    public Future<QueryReply> submitDemand(Demand demand) {
        Demand filled = demand.getNamespaceId().isEmpty() ? demand.toBuilder().setNamespaceId(namespace()).build() : demand;
        return call(EngineServiceGrpcClient.SubmitDemand, SubmitDemandRequest.newBuilder().setSession(session)
                .setDemand(filled).build(), QueryReply.parser());
    }

    /** Submits a demand and polls (honouring retry_after) until it is no longer PENDING. */
    public Future<QueryReply> demand(Demand demand) {
        return submitDemand(demand).compose(this::untilSettled);
    }

    public Future<QueryReply> poll(long ticket) {
        return call(EngineServiceGrpcClient.PollQuery, PollQueryRequest.newBuilder().setSession(session)
                .setTicket(ticket).build(), QueryReply.parser());
    }

    /** Submits and polls (as an engine scheduler would, honouring retry_after) until READY or MISS. */
    public Future<QueryReply> query(List<GroupChain> groups) {
        return submit(groups, 0).compose(this::untilSettled);
    }

    private Future<QueryReply> untilSettled(QueryReply reply) {
        if (reply.getStatus() != QueryStatus.PENDING) {
            return Future.succeededFuture(reply);
        }
        Promise<QueryReply> next = Promise.promise();
        long delayMillis = Math.max(1, reply.getRetryAfterMicros() / 1000);
        client.vertx().setTimer(delayMillis, id -> poll(reply.getTicket()).compose(this::untilSettled).onComplete(next));
        return next.future();
    }

    public Future<CancelQueryReply> cancel(long ticket) {
        return call(EngineServiceGrpcClient.CancelQuery, CancelQueryRequest.newBuilder().setSession(session)
                .setTicket(ticket).build(), CancelQueryReply.parser());
    }

    /** Releases a lease; an answer of {@code lease_valid = false} is counted ({@link #invalidReleases}). */
    public Future<ReleaseLeaseReply> release(long leaseId) {
        return call(EngineServiceGrpcClient.ReleaseLease, ReleaseLeaseRequest.newBuilder().setSession(session)
                .setLeaseId(leaseId).build(), ReleaseLeaseReply.parser()).andThen(ar -> {
                    if (ar.succeeded() && !ar.result().getLeaseValid()) {
                        invalidReleases.incrementAndGet();
                    }
                });
    }

    /** Copies one leased page out of its slot; returns the engine-side copy (checked against the page's CRC32C). */
    @FunctionalInterface
    public interface PageCopier {
        MemorySegment copy(LeasedPage page, MemorySegment slot);
    }

    /**
     * What {@link #copyThenRelease} ended with. {@code keep}: the copies are the leased state; otherwise discard them
     * ({@code discardCause} says why: the release answered the lease invalid, it failed, or a page failed its CRC32C).
     */
    public record LeaseCopy(boolean keep, int pages, long bytes, int checksumMismatches,
                            LeaseInvalidReason invalidReason, String discardCause) {}

    /**
     * The engine contract for a READY (or RESIDENT) reply: copies every leased page with {@code copier} on the calling
     * thread, verifies each copy against its CRC32C when the Manager sent one, then releases the lease and keeps the
     * copies only if the release says the lease stayed valid. Discards are counted ({@link #discardedCopies}).
     */
    public Future<LeaseCopy> copyThenRelease(QueryReply reply, PageCopier copier) {
        int pages = 0;
        long bytes = 0;
        int mismatches = 0;
        for (LeasedPage page : reply.getLease().getPagesList()) {
            MemorySegment copy = copier.copy(page, slot(page.getSlot()));
            if (page.hasCrc32C() && Crc32c.of(copy) != page.getCrc32C()) {
                mismatches++;
            }
            pages++;
            bytes += copy.byteSize();
        }
        int copiedPages = pages;
        long copiedBytes = bytes;
        int checksumMismatches = mismatches;
        return release(reply.getLease().getLeaseId()).transform(ar -> {
            LeaseCopy result;
            if (ar.failed()) {
                result = new LeaseCopy(false, copiedPages, copiedBytes, checksumMismatches,
                        LeaseInvalidReason.LEASE_INVALID_REASON_UNSPECIFIED, "release failed: " + ar.cause().getMessage());
            } else if (!ar.result().getLeaseValid()) {
                result = new LeaseCopy(false, copiedPages, copiedBytes, checksumMismatches,
                        ar.result().getInvalidReason(), "lease did not stay valid: " + ar.result().getInvalidReason());
            } else if (checksumMismatches > 0) {
                result = new LeaseCopy(false, copiedPages, copiedBytes, checksumMismatches,
                        LeaseInvalidReason.LEASE_INVALID_REASON_UNSPECIFIED, checksumMismatches + " pages failed their CRC32C");
            } else {
                result = new LeaseCopy(true, copiedPages, copiedBytes, 0, LeaseInvalidReason.LEASE_INVALID_REASON_UNSPECIFIED, null);
            }
            if (!result.keep()) {
                discardedCopies.incrementAndGet();
            }
            return Future.succeededFuture(result);
        });
    }

    /** Releases this session answered {@code lease_valid = false}. */
    public long invalidReleases() {
        return invalidReleases.get();
    }

    /** Lease copies {@link #copyThenRelease} told the engine to discard. */
    public long discardedCopies() {
        return discardedCopies.get();
    }

    public Future<StatsReply> stats() {
        return client.call(EngineServiceGrpcClient.Stats, StatsRequest.newBuilder().setSession(session).build());
    }

    public Future<UnregisterReply> unregister() {
        closed = true;
        client.vertx().cancelTimer(heartbeatTimer);
        return client.call(EngineServiceGrpcClient.Unregister, UnregisterRequest.newBuilder().setSession(session).build());
    }

    /** Stops heartbeats and unmaps the pool without unregistering (the session lapses after its ttl). */
    public void abandon() throws IOException {
        closed = true;
        client.vertx().cancelTimer(heartbeatTimer);
        pool.close();
    }

    @Override
    public void close() throws IOException {
        if (!closed) {
            try {
                unregister().await(10, TimeUnit.SECONDS);
            } catch (Exception e) {
                // The Manager may be gone already; the mapping is ours to release regardless.
            }
        }
        closed = true;
        client.vertx().cancelTimer(heartbeatTimer);
        pool.close();
    }
}
