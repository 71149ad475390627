package io.orbitkv.perf.engine;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.OrbitKvException;
import io.orbitkv.client.sim.SyntheticKv;
import io.orbitkv.protocol.engine.*;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.LockSupport;

/**
 * One simulated inference engine on the real gRPC API: its own client connection, session and engine-side memory.
 * It does what an engine scheduler does for a request: query its chained prefix (submit, poll while PENDING), copy the
 * READY pages out of the pool into its own memory, release the lease (or cancel), and publish the pages it had to
 * compute. Used by {@code bench load} and {@code replay}.
 *
 * <p>Page content is {@link SyntheticKv}'s stream for (seed, group 0, position), with the seed chosen by the caller
 * per block ({@link PageSeeds}), so any worker can verify a page another published without sharing state.
 *
 * <p>Verification: every copied page has its first {@value #VERIFY_PREFIX_BYTES} bytes checked; one page in
 * {@code fullVerifyEvery} is checked in full. Checking every byte of every page would cost as much as the copy and
 * would turn a Manager benchmark into a benchmark of the checker.
 *
 * <p>Not thread-safe: one engine per thread.
 */
public final class SimulatedEngine implements AutoCloseable {
    public static final int VERIFY_PREFIX_BYTES = 4096;
    private static final int ENGINE_BUFFERS = 8;

    /** The content seed of the block at {@code position} of a chain. */
    @FunctionalInterface
    public interface PageSeeds {
        long seedAt(int position);
    }

    /** How a query settled. {@code leaseId} is 0 without a lease; {@code refusal} is set when the Manager refused. */
    public record QueryOutcome(QueryStatus status, int readyBlocks, long ticket, long leaseId, List<LeasedPage> pages,
                               int polls, long retryAfterMicros, ErrorReason refusal) {
        public boolean ready() {
            return status == QueryStatus.READY;
        }
    }

    /** What a publish did: pages written and sealed, pages some other publisher already had, or a refusal. */
    public record PublishOutcome(int sealedPages, long sealedBytes, int alreadyPresentPages, ErrorReason refusal) {}

    /** Pages and bytes copied out, bytes verified, and pages whose content was wrong. */
    public record CopyOutcome(int pages, long bytes, long verifiedBytes, int mismatchedPages) {}

    private final OrbitKvClient client;
    private final boolean ownsClient;
    private final EngineSession session;
    private final long pageBytes;
    private final Arena arena = Arena.ofShared(); // created on one thread, used on the worker's
    private final MemorySegment[] engineMemory = new MemorySegment[ENGINE_BUFFERS];
    private final int fullVerifyEvery;
    private long copiedPages;
    private int nextBuffer;

    private SimulatedEngine(OrbitKvClient client, boolean ownsClient, EngineSession session, long pageBytes,
                            int fullVerifyEvery) {
        this.client = client;
        this.ownsClient = ownsClient;
        this.session = session;
        this.pageBytes = pageBytes;
        this.fullVerifyEvery = Math.max(1, fullVerifyEvery);
        for (int i = 0; i < ENGINE_BUFFERS; i++) {
            engineMemory[i] = arena.allocate(pageBytes, 4096);
            engineMemory[i].fill((byte) 0);
        }
    }

    /** The instance identity every simulated engine of one run registers with (same identity = same namespace). */
    public static InstanceIdentity identity(String modelFingerprint, String geometry, int pageTokens, long pageBytes) {
        return InstanceIdentity.newBuilder().setModelFingerprint(modelFingerprint).setRepresentation(Representation.RAW)
                .setLayout("orbitkv-perf:NHD").setGeometry(geometry).setPageSizeTokens(pageTokens)
                .setTpSize(1).setPpSize(1)
                .addGroups(GroupSpec.newBuilder().setGroupId(0).setKind(GroupKind.FULL_ATTENTION).setBytesPerPage(pageBytes))
                .build();
    }

    /** Registers over {@code client}; when {@code ownsClient} the engine closes the client too. */
    public static SimulatedEngine register(OrbitKvClient client, boolean ownsClient, InstanceIdentity identity,
                                           int fullVerifyEvery) {
        EngineSession session = client.register(identity, InstanceRole.PREFILL_AND_DECODE).await();
        return new SimulatedEngine(client, ownsClient, session, identity.getGroups(0).getBytesPerPage(), fullVerifyEvery);
    }

    public EngineSession session() {
        return session;
    }

    public OrbitKvClient client() {
        return client;
    }

    public long pageBytes() {
        return pageBytes;
    }

    public static GroupChain groupChain(List<ByteString> chain) {
        return GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(chain).build();
    }

    /** Submits the chain and returns the reply without polling (the caller may cancel a PENDING ticket). */
    public QueryOutcome submit(List<ByteString> chain) {
        try {
            return outcome(session.submit(List.of(groupChain(chain)), 0).await(), 0);
        } catch (OrbitKvException e) {
            return refused(e);
        }
    }

    /**
     * Submits the exact form for a full-attention chain from origin 0 to its end (one group, every position allowed),
     * without polling: {@code speculative} asks the Manager to prepare it ahead (RESIDENT), {@code firstUseMicros}
     * says when it will be used (0: unknown). A higher {@code revision} of the same request replaces the demand.
     */
    public QueryOutcome submitDemand(String requestId, long revision, long operationId, int pageTokens,
                                     List<ByteString> chain, boolean speculative, long firstUseMicros, float confidence) {
        return submitDemand(requestId, revision, operationId, pageTokens, chain, speculative, firstUseMicros, confidence, 0);
    }

    /**
     * As above, declaring the engine's prefill rate for this demand ({@code prefillTokensPerSecond} > 0): the Manager
     * may then choose a shorter boundary whose first token is clearly earlier; 0 leaves it undeclared.
     */
    public QueryOutcome submitDemand(String requestId, long revision, long operationId, int pageTokens,
                                     List<ByteString> chain, boolean speculative, long firstUseMicros, float confidence,
                                     double prefillTokensPerSecond) {
        Demand demand = Demand.newBuilder().setRequestId(requestId).setRevision(revision).setOperationId(operationId)
                .setPageSizeTokens(pageTokens).setValidPrefixTokens(0).setSelectedEndTokens((long) chain.size() * pageTokens)
                .setSelectedGroupId(0).setSpeculative(speculative).setFirstUseMicros(firstUseMicros)
                .setConfidence(confidence).setPrefillTokensPerSecond(prefillTokensPerSecond)
                .addGroups(GroupDemand.newBuilder().setGroupId(0).addAllBlockHashes(chain)
                        .addRanges(BlockSpan.newBuilder().setStart(0).setEnd(chain.size())))
                .build();
        try {
            return outcome(session.submitDemand(demand).await(), 0);
        } catch (OrbitKvException e) {
            return refused(e);
        }
    }

    /** Polls a PENDING outcome, honouring retry_after, until READY or MISS. */
    public QueryOutcome settle(QueryOutcome submitted) {
        QueryOutcome current = submitted;
        int polls = 0;
        while (current.status() == QueryStatus.PENDING) {
            // Honour the Manager's hint, within [50 µs, 10 ms]: an engine scheduler polls on its own step boundary.
            LockSupport.parkNanos(Math.clamp(current.retryAfterMicros() * 1000L, 50_000L, 10_000_000L));
            polls++;
            try {
                current = outcome(session.poll(current.ticket()).await(), polls);
            } catch (OrbitKvException e) {
                return refused(e);
            }
        }
        return current;
    }

    /** Submit, then poll until settled. */
    public QueryOutcome query(List<ByteString> chain) {
        return settle(submit(chain));
    }

    private static QueryOutcome outcome(QueryReply reply, int polls) {
        return new QueryOutcome(reply.getStatus(), reply.getReadyBlocks(), reply.getTicket(),
                reply.hasLease() ? reply.getLease().getLeaseId() : 0, reply.hasLease() ? reply.getLease().getPagesList() : List.of(),
                polls, reply.getRetryAfterMicros(), null);
    }

    private static QueryOutcome refused(OrbitKvException e) {
        return new QueryOutcome(QueryStatus.MISS, 0, 0, 0, List.of(), 0, 0, e.reason());
    }

    /**
     * Copies up to {@code maxPages} leased pages into engine memory and verifies them against {@code seeds}
     * (content of position p = SyntheticKv stream of (seeds.seedAt(p), 0, p)).
     */
    public CopyOutcome copyOut(QueryOutcome outcome, int maxPages, PageSeeds seeds) {
        int pages = 0;
        long bytes = 0;
        long verified = 0;
        int mismatched = 0;
        for (LeasedPage page : outcome.pages()) {
            if (pages >= maxPages) {
                break;
            }
            MemorySegment destination = engineMemory[nextBuffer];
            nextBuffer = (nextBuffer + 1) % ENGINE_BUFFERS;
            MemorySegment slot = session.slot(page.getSlot());
            MemorySegment target = destination.asSlice(0, slot.byteSize());
            target.copyFrom(slot);
            pages++;
            bytes += slot.byteSize();
            long seed = seeds.seedAt(page.getPosition());
            boolean full = copiedPages++ % fullVerifyEvery == 0;
            MemorySegment checked = full ? target : target.asSlice(0, Math.min(VERIFY_PREFIX_BYTES, target.byteSize()));
            if (SyntheticKv.verify(checked, seed, page.getGroupId(), page.getPosition()) >= 0) {
                mismatched++;
            } else {
                verified += checked.byteSize();
            }
        }
        return new CopyOutcome(pages, bytes, verified, mismatched);
    }

    public void release(QueryOutcome outcome) {
        if (outcome.leaseId() != 0) {
            session.release(outcome.leaseId()).await();
        }
    }

    /** Cancels the ticket; a READY ticket's lease ends with it. */
    public void cancel(QueryOutcome outcome) {
        if (outcome.ticket() != 0) {
            session.cancel(outcome.ticket()).await();
        }
    }

    /**
     * Publishes {@code chain[from..]}: allocate, write the ALLOCATED slots ("prefill": the engine computed these
     * pages), seal. Pages another engine already published come back ALREADY_PRESENT and are not written.
     */
    public PublishOutcome publish(List<ByteString> chain, int from, PageSeeds seeds) {
        if (from >= chain.size()) {
            return new PublishOutcome(0, 0, 0, null);
        }
        List<PageKey> keys = new ArrayList<>(chain.size() - from);
        for (int i = from; i < chain.size(); i++) {
            keys.add(PageKey.newBuilder().setGroupId(0).setBlockHash(chain.get(i)).build());
        }
        AllocatePublishReply allocated;
        try {
            allocated = session.allocate(keys).await();
        } catch (OrbitKvException e) {
            return new PublishOutcome(0, 0, 0, e.reason());
        }
        int written = 0;
        int present = 0;
        for (int i = 0; i < allocated.getSlotsCount(); i++) {
            PublishSlot slot = allocated.getSlots(i);
            if (slot.getStatus() == SlotStatus.ALLOCATED) {
                int position = from + i;
                SyntheticKv.fill(session.slot(slot.getSlot()), seeds.seedAt(position), 0, position);
                written++;
            } else {
                present++;
            }
        }
        if (written == 0) {
            return new PublishOutcome(0, 0, present, null);
        }
        try {
            SealPublishReply sealed = session.seal(allocated.getPublishId(), List.of()).await();
            return new PublishOutcome(sealed.getSealedPages(), sealed.getSealedBytes(), present, null);
        } catch (OrbitKvException e) {
            return new PublishOutcome(0, 0, present, e.reason());
        }
    }

    public StatsReply stats() {
        return session.stats().await();
    }

    @Override
    public void close() throws Exception {
        try {
            session.close();
        } finally {
            arena.close();
            if (ownsClient) {
                client.close();
            }
        }
    }
}
