package io.orbitkv.perf.gpu;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.sim.SyntheticKv;
import io.orbitkv.nativeio.cuda.CudaRuntime;
import io.orbitkv.protocol.engine.*;
import io.orbitkv.perf.report.KeyedContent;
import io.vertx.core.json.JsonArray;
import io.vertx.core.json.JsonObject;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The engine side of {@code bench gpu-restore}, run as a second process (CUDA IPC handles cannot be opened by the
 * process that exported them): it allocates device memory for {@code pages} pages, exports its IPC handle, registers
 * with the Manager with that allocation as a CUDA restore destination, publishes the pages (bytes derived from their
 * keys), then runs {@link RestoreRounds} with these two sides:
 * <ol>
 *   <li>restore (measured): a demand with engine_restore (route CUDA_IPC): the Manager imports the allocation and
 *       copies from its pinned pool into it; timed from submit to READY;</li>
 *   <li>baseline (same run, same bytes): an engine-local demand of the same pages, then {@code cudaMemcpyAsync} of the
 *       leased slots from this process's own pinned mapping of the same pool into the same device buffer on one
 *       stream, timed from the first copy to the stream's completion (the demand is timed apart, lease_nanos).</li>
 * </ol>
 * The destination is poisoned (a host buffer of {@link RestoreRounds#POISON} copied over it) and read back before each
 * side, and read back and compared after it, every round, both sides. Prints one JSON line on stdout:
 * {@link RestoreRounds.Result#toJson()} plus {@code lease_nanos} and {@code bytes}, or {@code error}.
 * Arguments: socket token pages pageBytes rounds device.
 */
public final class GpuEngineProcess {
    static final long SEED = 0x5EEDL;

    private GpuEngineProcess() {}

    public static void main(String[] args) throws Exception {
        Path socket = Path.of(args[0]);
        String token = args[1];
        int pages = Integer.parseInt(args[2]);
        long pageBytes = Long.parseLong(args[3]);
        int rounds = Integer.parseInt(args[4]);
        int device = Integer.parseInt(args[5]);
        JsonObject result = new JsonObject();
        if (!CudaRuntime.isAvailable()) {
            result.put("error", "CUDA unavailable: " + CudaRuntime.unavailabilityCause().getMessage());
            System.out.println(result.encode());
            return;
        }
        CudaRuntime.setDevice(device);
        long deviceBytes = pages * pageBytes;
        try (OrbitKvClient client = OrbitKvClient.connectUnix(socket, token);
             CudaRuntime.DeviceBuffer buffer = CudaRuntime.malloc(deviceBytes);
             Arena arena = Arena.ofShared()) {
            byte[] handle = CudaRuntime.ipcHandle(buffer);
            InstanceIdentity identity = InstanceIdentity.newBuilder().setModelFingerprint("gpu-restore-bench")
                    .setRepresentation(Representation.RAW).setLayout("bench:NHD").setGeometry("pages=" + pageBytes)
                    .setPageSizeTokens(16).setTpSize(1).setPpSize(1)
                    .addGroups(GroupSpec.newBuilder().setGroupId(0).setKind(GroupKind.FULL_ATTENTION).setBytesPerPage(pageBytes))
                    .build();
            RegisterRequest register = RegisterRequest.newBuilder().setIdentity(identity).setRole(InstanceRole.DECODE)
                    .addRestoreDestinations(RestoreDestination.newBuilder().setDestinationId(1)
                            .setCuda(CudaAllocation.newBuilder().setIpcHandle(ByteString.copyFrom(handle)).setDevice(device))
                            .setSizeBytes(deviceBytes)
                            .addGroups(DestinationGroupLayout.newBuilder().setGroupId(0).setPageStrideBytes(pageBytes)
                                    .setPageCount(pages)))
                    .build();
            try (EngineSession session = client.register(register).await()) {
                RestoreRouteAvailability cuda = session.registration().getRestoreRoutes(1);
                if (!cuda.getAvailable()) {
                    result.put("error", "the Manager cannot run CUDA_IPC: " + cuda.getUnavailableCause());
                    System.out.println(result.encode());
                    return;
                }
                List<ByteString> chain = SyntheticKv.chain(SEED, pages);
                publish(session, chain);
                MemorySegment back = arena.allocate(deviceBytes, 4096);
                MemorySegment poison = arena.allocate(deviceBytes, 4096);
                poison.fill(RestoreRounds.POISON);
                List<Long> leaseNanos = new ArrayList<>();
                try (CudaRuntime.HostRegistration pinnedPool = CudaRuntime.registerHost(session.pool());
                     CudaRuntime.CudaStream stream = CudaRuntime.createStream();
                     CudaRuntime.CudaEvent done = CudaRuntime.createEvent(false)) {
                    RestoreRounds.Destination destination = new RestoreRounds.Destination() {
                        @Override
                        public void poison() {
                            CudaRuntime.copy(buffer.address(), poison.address(), deviceBytes, CudaRuntime.MEMCPY_HOST_TO_DEVICE);
                        }

                        @Override
                        public void readBack(MemorySegment host) {
                            CudaRuntime.copy(host.address(), buffer.address(), deviceBytes, CudaRuntime.MEMCPY_DEVICE_TO_HOST);
                        }
                    };
                    RestoreRounds.Side restore = round -> {
                        long start = System.nanoTime();
                        QueryReply ready = session.demand(demand(session, chain, "restore-" + round, round * 2L + 1, pages, true)).await();
                        long nanos = System.nanoTime() - start;
                        if (ready.getStatus() != QueryStatus.READY || ready.getRestore().getRestoredPages() != pages) {
                            throw new IllegalStateException("the restore answered " + ready.getStatus() + " with "
                                    + ready.getRestore().getRestoredPages() + " of " + pages + " pages");
                        }
                        return nanos;
                    };
                    RestoreRounds.Side baseline = round -> {
                        long leaseStart = System.nanoTime();
                        QueryReply leased = session.demand(demand(session, chain, "baseline-" + round, round * 2L + 2, pages, false)).await();
                        long copyStart = System.nanoTime();
                        leaseNanos.add(copyStart - leaseStart);
                        if (leased.getStatus() != QueryStatus.READY || leased.getLease().getPagesCount() != pages) {
                            throw new IllegalStateException("the baseline's lease answered " + leased.getStatus() + " with "
                                    + leased.getLease().getPagesCount() + " of " + pages + " pages");
                        }
                        for (LeasedPage page : leased.getLease().getPagesList()) {
                            MemorySegment slot = session.slot(page.getSlot());
                            stream.copyHostToDevice(buffer.address() + page.getPosition() * pageBytes, slot, slot.byteSize());
                        }
                        stream.record(done);
                        done.synchronize();
                        long nanos = System.nanoTime() - copyStart;
                        session.release(leased.getLease().getLeaseId()).await();
                        return nanos;
                    };
                    result = RestoreRounds.run(rounds, chain, pageBytes, destination, back, restore, baseline).toJson();
                }
                result.put("lease_nanos", new JsonArray(leaseNanos)).put("bytes", deviceBytes);
            }
        } catch (RuntimeException e) {
            result.put("error", e.toString());
        }
        System.out.println(result.encode());
    }

    /** Publishes the chain, each page holding the bytes of its key. */
    static void publish(EngineSession session, List<ByteString> chain) {
        List<PageKey> keys = new ArrayList<>();
        for (ByteString hash : chain) {
            keys.add(PageKey.newBuilder().setGroupId(0).setBlockHash(hash).build());
        }
        AllocatePublishReply allocated = session.allocate(keys).await();
        for (int p = 0; p < allocated.getSlotsCount(); p++) {
            if (allocated.getSlots(p).getStatus() != SlotStatus.ALLOCATED) {
                session.abort(allocated.getPublishId()).await();
                throw new IllegalStateException("publish: slot " + p + " answered " + allocated.getSlots(p).getStatus()
                        + ", not ALLOCATED");
            }
            KeyedContent.fill(session.slot(allocated.getSlots(p).getSlot()), chain.get(p));
        }
        session.seal(allocated.getPublishId(), List.of()).await();
    }

    static Demand demand(EngineSession session, List<ByteString> chain, String request, long operation, int pages,
                         boolean engineRestore) {
        Demand.Builder demand = Demand.newBuilder().setRequestId(request).setOperationId(operation)
                .setNamespaceId(session.namespace()).setPageSizeTokens(16).setSelectedEndTokens(16L * pages)
                .addGroups(GroupDemand.newBuilder().setGroupId(0).addAllBlockHashes(chain)
                        .addRanges(BlockSpan.newBuilder().setStart(0).setEnd(pages)));
        if (engineRestore) {
            GroupDestinationPages.Builder indices = GroupDestinationPages.newBuilder().setGroupId(0);
            for (int p = 0; p < pages; p++) {
                indices.addPageIndices(p);
            }
            demand.setEngineRestore(EngineRestore.newBuilder().setDestinationId(1).setRoute(RestoreRoute.CUDA_IPC)
                    .addPages(indices));
        }
        return demand.build();
    }
}
