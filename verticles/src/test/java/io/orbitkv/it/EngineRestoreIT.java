package io.orbitkv.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.google.protobuf.ByteString;
import io.orbitkv.client.EngineSession;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.OrbitKvException;
import io.orbitkv.nativeio.cuda.CudaRuntime;
import io.orbitkv.nativeio.shm.SharedMemoryFile;
import io.orbitkv.protocol.engine.*;
import io.orbitkv.restore.RestoreCommands;
import io.orbitkv.restore.RestoreProxy;
import io.orbitkv.restore.RestoreVerticle;
import io.vertx.core.Future;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Manager-executed restores (completion target engine-restore) through the real gRPC API into a real host region the
 * "engine" (this test) created in /dev/shm: READY only with the bytes in the destination; cancellation drains the
 * submitted copies before the sources are released; the per-device bound holds under 16 concurrent demands; the CUDA
 * and cuFile routes are refused with their probe's cause here. Every test ends with no lease, pin, query, copy in
 * flight or mapped region left.
 */
@Timeout(120)
class EngineRestoreIT {
    static final int PAGE = 64 * 1024;
    static final int DESTINATION = 7;
    static final long REGION_BASE = 4096;
    static final long STRIDE = PAGE + 4096;

    /** Holds restore copy batches on the worker while closed; counts batches that reached it. */
    static final class Gate implements RestoreVerticle.CopyGate {
        final Semaphore entered = new Semaphore(0);
        volatile CountDownLatch open = new CountDownLatch(0);

        void close() {
            open = new CountDownLatch(1);
        }

        void open() {
            open.countDown();
        }

        @Override
        public void beforeBatch() throws InterruptedException {
            entered.release();
            if (!open.await(60, TimeUnit.SECONDS)) {
                throw new InterruptedException("gate never opened");
            }
        }
    }

    final Gate gate = new Gate();

    @RegisterExtension
    final RunningManager running = new RunningManager().withRestoreGate(gate).with("cost.observations", "true");

    final List<Path> regions = new ArrayList<>();
    final List<AutoCloseable> closeables = new ArrayList<>();

    @AfterEach
    void nothingLeft() throws Exception {
        gate.open();
        RestoreCommands.RestoreStats stats = restoreStats();
        for (RestoreCommands.LaneStats lane : stats.lanes()) {
            assertThat(lane.inFlight()).as("copies in flight on " + lane.device()).isZero();
            assertThat(lane.peakInFlight()).as("the per-device bound on " + lane.device()).isLessThanOrEqualTo(lane.maxInFlight());
        }
        for (int i = closeables.size() - 1; i >= 0; i--) {
            closeables.get(i).close();
        }
        await().atMost(Duration.ofSeconds(30)).until(() -> restoreStats().mappedHostRegions() == 0);
        assertThat(restoreStats().activeRestores()).isZero();
        for (Path region : regions) {
            Files.deleteIfExists(region);
        }
        assertThat(CudaRuntime.liveResources().total()).as("live CUDA resources").isZero();
    }

    RestoreCommands.RestoreStats restoreStats() {
        try {
            return new RestoreProxy(running.manager().vertx()).stats().await(10, TimeUnit.SECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
            throw new AssertionError("the restore role did not answer", e);
        }
    }

    /** An owner-only region file the engine creates, mapped on the engine side. */
    SharedMemoryFile region(int pages) throws Exception {
        Path path = Path.of("/dev/shm", "orbitkv-test-region-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        SharedMemoryFile region = SharedMemoryFile.create(path, REGION_BASE + pages * STRIDE);
        regions.add(path);
        return region;
    }

    static RestoreDestination destination(SharedMemoryFile region, int pages) {
        return RestoreDestination.newBuilder().setDestinationId(DESTINATION)
                .setHost(HostRegion.newBuilder().setPath(region.path().toString()))
                .setSizeBytes(region.sizeBytes())
                .addGroups(DestinationGroupLayout.newBuilder().setGroupId(0).setBaseOffset(REGION_BASE)
                        .setPageStrideBytes(STRIDE).setPageCount(pages))
                .build();
    }

    EngineSession register(OrbitKvClient client, String model, RestoreDestination... destinations) {
        RegisterRequest.Builder request = RegisterRequest.newBuilder()
                .setIdentity(RunningManager.identity(model, PAGE)).setRole(InstanceRole.DECODE);
        for (RestoreDestination d : destinations) {
            request.addRestoreDestinations(d);
        }
        EngineSession session = client.register(request.build()).await();
        closeables.add(session);
        return session;
    }

    OrbitKvClient client() {
        OrbitKvClient client = running.unixClient();
        closeables.add(client);
        return client;
    }

    /** A demand for positions [0, n) of group 0 restored into destination pages {@code index(p)}. */
    static Demand demand(EngineSession session, String request, List<ByteString> chain, int n, int[] pageIndex,
                         RestoreRoute route) {
        GroupDestinationPages.Builder pages = GroupDestinationPages.newBuilder().setGroupId(0);
        for (int p = 0; p < n; p++) {
            pages.addPageIndices(pageIndex[p]);
        }
        return Demand.newBuilder().setRequestId(request).setOperationId(Integer.toUnsignedLong(request.hashCode()) + (1L << 32))
                .setNamespaceId(session.namespace()).setPageSizeTokens(16).setSelectedEndTokens(16L * n)
                .setSelectedGroupId(0)
                .addGroups(GroupDemand.newBuilder().setGroupId(0).addAllBlockHashes(chain.subList(0, n))
                        .addRanges(BlockSpan.newBuilder().setStart(0).setEnd(n)))
                .setEngineRestore(EngineRestore.newBuilder().setDestinationId(DESTINATION).setRoute(route).addPages(pages))
                .build();
    }

    /** Observations reach the cost role asynchronously: await the counter (it exists once first incremented). */
    void awaitMetric(String metric, double expected) {
        await().atMost(Duration.ofSeconds(30)).ignoreExceptions().until(() -> running.metric(metric) == expected);
    }

    static int[] reversed(int pages) {
        int[] index = new int[pages];
        for (int i = 0; i < pages; i++) {
            index[i] = pages - 1 - i;
        }
        return index;
    }

    /** Polls until the ticket is no longer PENDING (awaiting the condition, never sleeping a guess). */
    static QueryReply settled(EngineSession session, QueryReply first) {
        QueryReply[] last = {first};
        await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(2)).until(() -> {
            if (last[0].getStatus() != QueryStatus.PENDING) {
                return true;
            }
            last[0] = session.poll(last[0].getTicket()).await();
            return last[0].getStatus() != QueryStatus.PENDING;
        });
        return last[0];
    }

    static void assertPagesInRegion(SharedMemoryFile region, String seed, int n, int[] pageIndex) {
        for (int p = 0; p < n; p++) {
            MemorySegment expected = MemorySegment.ofArray(new byte[PAGE]);
            PublishQueryRestoreIT.fill(expected, (seed + p).hashCode());
            MemorySegment actual = region.segment().asSlice(REGION_BASE + pageIndex[p] * STRIDE, PAGE);
            assertThat(actual.mismatch(expected)).as("position %d in destination page %d", p, pageIndex[p]).isEqualTo(-1);
        }
    }

    @Test
    void aHostDestinationRestoreAnswersReadyOnlyWithEveryByteInTheDestinationAndHandsNoLease() throws Exception {
        int pages = 12;
        SharedMemoryFile region = region(pages);
        closeables.add(region);
        OrbitKvClient client = client();
        EngineSession session = register(client, "restore-model", destination(region, pages));

        // The registration says which routes run here; CUDA and cuFile carry their probe's cause.
        List<RestoreRouteAvailability> routes = session.registration().getRestoreRoutesList();
        assertThat(routes).extracting(RestoreRouteAvailability::getRoute)
                .containsExactly(RestoreRoute.HOST_REGION, RestoreRoute.CUDA_IPC, RestoreRoute.CUFILE);
        assertThat(routes.get(0).getAvailable()).isTrue();
        if (!CudaRuntime.isAvailable()) {
            assertThat(routes.get(1).getAvailable()).isFalse();
            assertThat(routes.get(1).getUnavailableCause()).isEqualTo(CudaRuntime.unavailabilityCause().getMessage());
        }
        assertThat(routes.get(2).getAvailable()).isFalse();
        assertThat(restoreStats().mappedHostRegions()).isEqualTo(1);

        List<ByteString> chain = PublishQueryRestoreIT.publish(session, "host-restore", 8);
        int[] index = reversed(pages);
        QueryReply reply = settled(session, session.demand(demand(session, "req-host", chain, 8, index,
                RestoreRoute.RESTORE_ROUTE_UNSPECIFIED)).await());

        assertThat(reply.getStatus()).isEqualTo(QueryStatus.READY);
        assertThat(reply.getBoundaryTokens()).isEqualTo(8 * 16);
        assertThat(reply.getRestore().getRoute()).isEqualTo(RestoreRoute.HOST_REGION);
        assertThat(reply.getRestore().getRestoredPages()).isEqualTo(8);
        assertThat(reply.getRestore().getRestoredBytes()).isEqualTo(8L * PAGE);
        assertThat(reply.hasLease()).as("no lease: the Manager released its sources after copying").isFalse();
        assertThat(reply.getLeasedRangesList()).containsExactly(GroupSpans.newBuilder().setGroupId(0)
                .addSpans(BlockSpan.newBuilder().setStart(0).setEnd(8)).build());
        assertPagesInRegion(region, "host-restore", 8, index);
        // Pages nobody restored into stay untouched (zero), and so does the gap before the layout.
        for (int i = 0; i < pages - 8; i++) {
            MemorySegment untouched = region.segment().asSlice(REGION_BASE + i * STRIDE, PAGE);
            assertThat(untouched.mismatch(MemorySegment.ofArray(new byte[PAGE]))).isEqualTo(-1);
        }
        RunningManager.assertNoLeases(session);
        assertThat(running.metric("orbitkv_restore_restores_total{outcome=\"ready\"}")).isEqualTo(1.0);
        assertThat(running.metric("orbitkv_restore_copies_total{outcome=\"completed\"}")).isEqualTo(8.0);
        // Where the restore's time went (what bench gpu-restore reports per demand, page and stream): 8 copies in
        // one batch of at most 16, first copy after the execute began, no stream to wait for on the host lane.
        RestoreCommands.RestoreStats stats = restoreStats();
        RestoreCommands.LaneTimings host = stats.lane("host").timings();
        assertThat(host.restores()).isEqualTo(1);
        assertThat(host.copies()).isEqualTo(8);
        assertThat(host.batches()).isEqualTo(1);
        assertThat(host.submitNanos()).isPositive();
        assertThat(host.handoffNanos()).isNotNegative();
        assertThat(host.firstCopyNanos()).isPositive().isLessThanOrEqualTo(host.executionNanos());
        assertThat(host.submitNanos()).isLessThanOrEqualTo(host.executionNanos());
        assertThat(host.waitNanos()).isZero();
        if (!CudaRuntime.isAvailable()) {
            assertThat(stats.poolRegistrationNanos()).as("no CUDA: the pool is not registered").isEqualTo(-1);
        }
        // Cost observations: each copy (RESTORE_COPY) and the complete route to engine-restore completion.
        awaitMetric("orbitkv_cost_operations_total{outcome=\"succeeded\",path=\"restore_copy\"}", 8);
        awaitMetric("orbitkv_cost_operations_total{outcome=\"succeeded\",path=\"engine_restore_route\"}", 1);
        String health = running.scrapePath("/health");
        assertThat(health).contains("\"restore_routes\"").contains("\"HOST_REGION\"")
                .contains("\"mooncake_te\":{\"loaded\":false,\"cause\":\"not probed: no peer transport on this Manager\"}");

        // Unregistering unmaps the region (the engine still owns and removes the file).
        session.unregister().await();
        await().atMost(Duration.ofSeconds(10)).until(() -> restoreStats().mappedHostRegions() == 0);
        assertThat(Files.exists(region.path())).isTrue();
    }

    @Test
    void cudaAndCufileRequestsFailClosedWithTheirCauseAndReserveNothing() throws Exception {
        org.junit.jupiter.api.Assumptions.assumeFalse(CudaRuntime.isAvailable(), "a GPU is present: the CUDA route runs");
        int pages = 4;
        SharedMemoryFile region = region(pages);
        closeables.add(region);
        OrbitKvClient client = client();
        EngineSession session = register(client, "restore-model", destination(region, pages));
        List<ByteString> chain = PublishQueryRestoreIT.publish(session, "closed", 4);
        for (RestoreRoute route : List.of(RestoreRoute.CUDA_IPC, RestoreRoute.CUFILE)) {
            OrbitKvException refused = HybridModel.refused(() -> session.demand(
                    demand(session, "req-" + route, chain, 4, reversed(4), route)));
            assertThat(refused.reason()).isEqualTo(ErrorReason.ROUTE_UNAVAILABLE);
            assertThat(refused.getMessage()).contains(route.name());
        }
        assertThat(HybridModel.refused(() -> session.demand(demand(session, "req-cuda", chain, 4, reversed(4),
                RestoreRoute.CUDA_IPC))).getMessage()).contains(CudaRuntime.unavailabilityCause().getMessage());
        // A CUDA destination registers (its route is reported unavailable) but a demand into it fails closed.
        EngineSession gpuEngine = register(client, "gpu-model", RestoreDestination.newBuilder().setDestinationId(DESTINATION)
                .setCuda(CudaAllocation.newBuilder().setIpcHandle(ByteString.copyFrom(new byte[64])).setDevice(0))
                .setSizeBytes(1 << 20).addGroups(DestinationGroupLayout.newBuilder().setGroupId(0)
                        .setPageStrideBytes(PAGE).setPageCount(4)).build());
        List<ByteString> gpuChain = PublishQueryRestoreIT.publish(gpuEngine, "gpu", 4);
        assertThat(HybridModel.refused(() -> gpuEngine.demand(demand(gpuEngine, "req-gpu", gpuChain, 4, reversed(4),
                RestoreRoute.RESTORE_ROUTE_UNSPECIFIED))).reason()).isEqualTo(ErrorReason.ROUTE_UNAVAILABLE);
        // Bad destinations change nothing: an unknown id, a page index outside the layout, a group-readable region.
        assertThat(HybridModel.refused(() -> session.demand(demand(session, "req-x", chain, 4, new int[] {0, 1, 2, 4},
                RestoreRoute.HOST_REGION))).reason()).isEqualTo(ErrorReason.INVALID_DESTINATION);
        SharedMemoryFile open = region(pages);
        closeables.add(open);
        Files.setPosixFilePermissions(open.path(), PosixFilePermissions.fromString("rw-r-----"));
        OrbitKvException notOwnerOnly = HybridModel.refused(() -> client.register(RegisterRequest.newBuilder()
                .setIdentity(RunningManager.identity("other-model", PAGE)).setRole(InstanceRole.DECODE)
                .addRestoreDestinations(destination(open, pages)).build()));
        assertThat(notOwnerOnly.reason()).isEqualTo(ErrorReason.INVALID_DESTINATION);
        RunningManager.assertNoLeases(session);
        RunningManager.assertNoLeases(gpuEngine);
        assertThat(restoreStats().mappedHostRegions()).isEqualTo(1);
    }

    @Test
    void aRegionTheEngineShrankFailsTheRestoreTypedAndTheManagerCarriesOn() throws Exception {
        int pages = 8;
        SharedMemoryFile region = region(pages);
        closeables.add(region);
        OrbitKvClient client = client();
        EngineSession session = register(client, "restore-model", destination(region, pages));
        List<ByteString> chain = PublishQueryRestoreIT.publish(session, "shrunk", 4);
        // The engine breaks its promise: the file shrinks under the Manager's mapping (a copy into it faults).
        try (java.nio.channels.FileChannel channel = java.nio.channels.FileChannel.open(region.path(),
                java.nio.file.StandardOpenOption.WRITE)) {
            channel.truncate(4096);
        }
        QueryReply first = session.submitDemand(demand(session, "req-shrunk", chain, 4, reversed(pages),
                RestoreRoute.HOST_REGION)).await();
        OrbitKvException[] failed = {null};
        await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(2)).until(() -> {
            try {
                assertThat(session.poll(first.getTicket()).await().getStatus()).isEqualTo(QueryStatus.PENDING);
                return false;
            } catch (OrbitKvException e) {
                failed[0] = e;
                return true;
            }
        });
        assertThat(failed[0].reason()).isEqualTo(ErrorReason.RESTORE_FAILED);
        assertThat(running.metric("orbitkv_restore_restores_total{outcome=\"failed\"}")).isEqualTo(1.0);
        RunningManager.assertNoLeases(session);
        // The Manager is unharmed: the same pages still serve an engine-local demand.
        QueryReply local = session.query(List.of(GroupChain.newBuilder().setGroupId(0).addAllBlockHashes(chain).build())).await();
        assertThat(local.getStatus()).isEqualTo(QueryStatus.READY);
        RunningManager.assertNoLeasesAfter(session, local);
    }

    @Test
    void cancellingMidRestoreDrainsTheSubmittedCopiesBeforeTheSourcesAreReleased() throws Exception {
        int pages = 16;
        SharedMemoryFile region = region(pages);
        closeables.add(region);
        OrbitKvClient client = client();
        EngineSession session = register(client, "restore-model", destination(region, pages));
        List<ByteString> chain = PublishQueryRestoreIT.publish(session, "cancel", pages);

        gate.close();
        QueryReply pending = session.submitDemand(demand(session, "req-cancel", chain, pages, reversed(pages),
                RestoreRoute.HOST_REGION)).await();
        assertThat(pending.getStatus()).isEqualTo(QueryStatus.PENDING);
        assertThat(pending.getDetail()).as("resident in DRAM, being copied").isEqualTo(QueryStatus.RESIDENT);
        assertThat(gate.entered.tryAcquire(30, TimeUnit.SECONDS)).as("a copy batch reached the worker").isTrue();
        assertThat(restoreStats().lane("host").inFlight()).isPositive();

        Future<CancelQueryReply> cancelled = session.cancel(pending.getTicket());
        await().atMost(Duration.ofSeconds(30)).until(() -> restoreStats().cancellingRestores() == 1);
        // Copies are still in flight: the cancel has not answered and the sources are still leased.
        assertThat(cancelled.isComplete()).as("cancel answered before the copies drained").isFalse();
        assertThat(running.metric("orbitkv_leases_active")).isEqualTo(1.0);
        assertThat(running.metric("orbitkv_images_pinned")).isEqualTo(pages);

        gate.open();
        assertThat(cancelled.await(30, TimeUnit.SECONDS).getReleasedPages()).isEqualTo(pages);
        assertThat(restoreStats().lane("host").inFlight()).isZero();
        assertThat(restoreStats().activeRestores()).isZero();
        assertThat(running.metric("orbitkv_restore_restores_total{outcome=\"cancelled\"}")).isEqualTo(1.0);
        // The drained copies were real copies; the route is observed as cancelled (it never trains an estimate).
        awaitMetric("orbitkv_cost_operations_total{outcome=\"succeeded\",path=\"restore_copy\"}", pages);
        awaitMetric("orbitkv_cost_operations_total{outcome=\"cancelled\",path=\"engine_restore_route\"}", 1);
        RunningManager.assertNoLeases(session);
        assertThat(HybridModel.refused(() -> session.poll(pending.getTicket())).reason())
                .isEqualTo(ErrorReason.UNKNOWN_TICKET);
    }

    @Test
    void sixteenConcurrentDemandsNeverHoldMoreThan128CopiesInFlightOnTheDeviceAndAllLandExactly() throws Exception {
        int demands = 16;
        int pagesEach = 16;
        SharedMemoryFile region = region(demands * pagesEach);
        closeables.add(region);
        OrbitKvClient client = client();
        EngineSession session = register(client, "restore-model", destination(region, demands * pagesEach));
        List<List<ByteString>> chains = new ArrayList<>();
        for (int d = 0; d < demands; d++) {
            chains.add(PublishQueryRestoreIT.publish(session, "doc" + d, pagesEach));
        }
        gate.close();
        List<QueryReply> submitted = new ArrayList<>();
        List<int[]> indices = new ArrayList<>();
        for (int d = 0; d < demands; d++) {
            int[] index = new int[pagesEach];
            for (int p = 0; p < pagesEach; p++) {
                index[p] = d * pagesEach + p;
            }
            indices.add(index);
            submitted.add(session.submitDemand(demand(session, "req-" + d, chains.get(d), pagesEach, index,
                    RestoreRoute.HOST_REGION)).await());
        }
        // 256 copies wanted, the worker held: exactly the bound is in flight and the rest waits for credits.
        await().atMost(Duration.ofSeconds(30)).until(() -> restoreStats().lane("host").inFlight() == 128);
        RestoreCommands.LaneStats held = restoreStats().lane("host");
        assertThat(held.maxInFlight()).isEqualTo(128);
        assertThat(held.queuedCopies()).isEqualTo(demands * pagesEach - 128);
        assertThat(running.metric("orbitkv_restore_in_flight{device=\"host\"}")).isEqualTo(128.0);

        gate.open();
        for (int d = 0; d < demands; d++) {
            QueryReply reply = settled(session, submitted.get(d));
            assertThat(reply.getStatus()).isEqualTo(QueryStatus.READY);
            assertThat(reply.getRestore().getRestoredPages()).isEqualTo(pagesEach);
        }
        for (int d = 0; d < demands; d++) {
            assertPagesInRegion(region, "doc" + d, pagesEach, indices.get(d));
        }
        RestoreCommands.LaneStats after = restoreStats().lane("host");
        assertThat(after.peakInFlight()).isEqualTo(128);
        assertThat(after.inFlight()).isZero();
        assertThat(after.completedCopies()).isEqualTo((long) demands * pagesEach);
        RunningManager.assertNoLeases(session);
    }
}
