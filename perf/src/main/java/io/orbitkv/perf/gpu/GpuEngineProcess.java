package io.orbitkv.perf.gpu;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.sim.SyntheticKv;
import io.orbitkv.nativeio.cuda.CudaRuntime;
import io.orbitkv.protocol.engine.*;
import io.vertx.core.json.JsonObject;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The engine side of {@code bench gpu-restore}, run as a second process (CUDA IPC handles cannot be opened by the
 * process that exported them): it allocates device memory for {@code pages} pages, exports its IPC handle, registers
 * with the Manager with that allocation as a CUDA restore destination, publishes the pages, then per round
 * <ol>
 *   <li>restore (measured): a demand with engine_restore (route CUDA_IPC): the Manager imports the allocation and
 *       copies from its pinned pool into it; timed from submit to READY;</li>
 *   <li>baseline (same run, same bytes): an engine-local demand of the same pages, then {@code cudaMemcpyAsync} of the
 *       leased slots from this process's own pinned mapping of the same pool into the same device buffer on one
 *       stream, timed from the first copy to the stream's completion (so the RPC is not charged to the baseline).</li>
 * </ol>
 * After each restore round the device bytes are copied back and compared with what was published (every byte). Prints
 * one JSON line on stdout: {@code restore_nanos}, {@code baseline_nanos} (per round), {@code bytes}, {@code verified},
 * {@code mismatches}. Arguments: socket token pages pageBytes rounds device.
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
                publish(session, chain, pageBytes);
                MemorySegment back = arena.allocate(deviceBytes, 4096);
                List<Long> restoreNanos = new ArrayList<>();
                List<Long> baselineNanos = new ArrayList<>();
                List<Long> leaseNanos = new ArrayList<>();
                long mismatches = 0;
                try (CudaRuntime.HostRegistration pinnedPool = CudaRuntime.registerHost(session.pool());
                     CudaRuntime.CudaStream stream = CudaRuntime.createStream();
                     CudaRuntime.CudaEvent done = CudaRuntime.createEvent(false)) {
                    for (int round = 0; round < rounds; round++) {
                        // Measured: the Manager-executed restore, submit to READY.
                        long start = System.nanoTime();
                        QueryReply ready = session.demand(demand(session, chain, "restore-" + round, round * 2L + 1, pages, true)).await();
                        restoreNanos.add(System.nanoTime() - start);
                        if (ready.getStatus() != QueryStatus.READY || ready.getRestore().getRestoredPages() != pages) {
                            result.put("error", "restore round " + round + " answered " + ready.getStatus()
                                    + " with " + ready.getRestore().getRestoredPages() + " pages");
                            break;
                        }
                        CudaRuntime.copy(back.address(), buffer.address(), deviceBytes, CudaRuntime.MEMCPY_DEVICE_TO_HOST);
                        for (int p = 0; p < pages; p++) {
                            if (SyntheticKv.verify(back.asSlice(p * pageBytes, pageBytes), SEED, 0, p) >= 0) {
                                mismatches++;
                            }
                        }
                        // Baseline: the same pages from this process's pinned mapping, one stream, same destination.
                        // (its demand is timed too: an engine that copies for itself must lease the pages first)
                        long leaseStart = System.nanoTime();
                        QueryReply leased = session.demand(demand(session, chain, "baseline-" + round, round * 2L + 2, pages, false)).await();
                        long copyStart = System.nanoTime();
                        leaseNanos.add(copyStart - leaseStart);
                        for (LeasedPage page : leased.getLease().getPagesList()) {
                            MemorySegment slot = session.slot(page.getSlot());
                            stream.copyHostToDevice(buffer.address() + page.getPosition() * pageBytes, slot, slot.byteSize());
                        }
                        stream.record(done);
                        done.synchronize();
                        baselineNanos.add(System.nanoTime() - copyStart);
                        session.release(leased.getLease().getLeaseId()).await();
                    }
                }
                result.put("restore_nanos", restoreNanos).put("baseline_nanos", baselineNanos).put("lease_nanos", leaseNanos)
                        .put("bytes", deviceBytes).put("verified_pages", (long) pages * restoreNanos.size())
                        .put("mismatches", mismatches);
            }
        } catch (RuntimeException e) {
            result.put("error", e.toString());
        }
        System.out.println(result.encode());
    }

    static void publish(EngineSession session, List<ByteString> chain, long pageBytes) {
        List<PageKey> keys = new ArrayList<>();
        for (ByteString hash : chain) {
            keys.add(PageKey.newBuilder().setGroupId(0).setBlockHash(hash).build());
        }
        AllocatePublishReply allocated = session.allocate(keys).await();
        for (int p = 0; p < allocated.getSlotsCount(); p++) {
            SyntheticKv.fill(session.slot(allocated.getSlots(p).getSlot()), SEED, 0, p);
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
