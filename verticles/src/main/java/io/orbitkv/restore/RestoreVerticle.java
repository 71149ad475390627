package io.orbitkv.restore;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.common.LocalCodec;
import io.orbitkv.common.OrbitException;
import io.orbitkv.common.RoleProxies;
import io.orbitkv.common.Ticker;
import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.model.cost.CostEstimateKey;
import io.orbitkv.model.cost.CostPath;
import io.orbitkv.cost.CostProxy;
import io.orbitkv.model.cost.ObservationOutcome;
import io.orbitkv.model.cost.ObservationRecord;
import io.orbitkv.model.cost.ObservedBytes;
import io.orbitkv.model.cost.RepresentationFamily;
import io.orbitkv.model.cost.SizeBucket;
import io.orbitkv.nativeio.cuda.CudaRuntime;
import io.orbitkv.nativeio.shm.SharedMemoryFile;
import io.orbitkv.protocol.engine.ErrorReason;
import io.orbitkv.protocol.engine.RestoreRoute;
import io.orbitkv.restore.RestoreCommands.BatchDone;
import io.orbitkv.restore.RestoreCommands.CopyBatch;
import io.orbitkv.restore.RestoreCommands.Execute;
import io.orbitkv.restore.RestoreCommands.GroupLayout;
import io.orbitkv.restore.RestoreCommands.LaneStats;
import io.orbitkv.model.plan.Restored;
import io.orbitkv.restore.RestoreCommands.RestoreStats;
import io.orbitkv.restore.RestoreCommands.SourcePage;
import io.vertx.core.DeploymentOptions;
import io.vertx.core.Future;
import io.vertx.core.ThreadingModel;
import io.vertx.core.VerticleBase;
import io.vertx.core.eventbus.DeliveryOptions;
import io.vertx.core.eventbus.EventBus;
import io.vertx.core.eventbus.MessageConsumer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import io.orbitkv.model.plan.RestoreTarget;

/**
 * The restore role: executes Manager-side restore plans (completion target engine-restore) into destinations engines
 * registered, one device lane at a time.
 *
 * <h2>Ownership</h2>
 * This class owns the pool mapping (read side of the copies; pinned with {@code cudaHostRegister} when CUDA is
 * available), the device lanes ({@link DeviceLane}: a worker verticle each) and the running plans
 * ({@link RestoreExecution}). {@link DestinationMappings} owns every destination mapping (host regions, CUDA IPC
 * imports); a destination is unmapped only when its instance is released and every restore into it is terminal. The
 * sources are the caller's: admission holds the lease on the pool pages and ends it only after
 * {@link RestoreProxy#execute}'s future completed, which is after every submitted copy is terminal.
 *
 * <h2>Plans and admission</h2>
 * An {@link Execute} becomes one plan bound to one device lane (the destination's: the host lane or {@code cuda:N}):
 * its copies (pool slot → destination page) are submitted in batches to that lane's worker verticle (a CUDA lane's batch as large as its admission bound, see
 * {@link #batchLimit}), each copy taking
 * a credit of the lane's {@link DeviceAdmission} (128 in flight) that is returned when the batch answers (every copy
 * in it terminal). Plans waiting for credits queue per lane and take turns batch by batch.
 *
 * <h2>Cancellation, failure, completion</h2>
 * {@link RestoreProxy#cancel} stops submitting a plan's queued copies; its submitted copies drain; its future then
 * fails {@code RESTORE_FAILED} ("cancelled"). A failed copy stops the plan the same way. A plan completes (success or
 * failure) only when nothing of it is in flight. Each copy is observed (RESTORE_COPY on the lane's device) and each
 * complete route from execute to terminal (ENGINE_RESTORE_ROUTE, completion target engine-restore on that device).
 *
 * <p>Concurrency: all state is confined to this verticle's event loop; workers answer on it. Nothing here blocks:
 * mapping, pinning and unmapping run through {@code executeBlocking}, copies on the workers. The ordered stop cancels
 * every plan, waits for its submitted copies, then unmaps the destinations and the pool; a crashed Manager leaves
 * nothing to release (the mappings die with the process).
 */
public final class RestoreVerticle extends VerticleBase {
    /** Test seam: runs on a device worker's thread before each batch (a test holds it to observe copies in flight). */
    @FunctionalInterface
    public interface CopyGate {
        CopyGate OPEN = () -> { };

        void beforeBatch() throws InterruptedException;
    }

    /**
     * @param maxInFlightPerDevice copy operations in flight per device (the design's 128)
     * @param batchCopies          copies one host-lane batch carries at most (a CUDA batch: up to the admission bound)
     */
    public record Settings(Path poolPath, long poolBytes, int maxInFlightPerDevice, int batchCopies, long incarnation,
                           CopyGate gate) {
        public Settings(Path poolPath, long poolBytes, long incarnation) {
            this(poolPath, poolBytes, DeviceAdmission.DEFAULT_MAX_IN_FLIGHT, 16, incarnation, CopyGate.OPEN);
        }

        public Settings withGate(CopyGate gate) {
            return new Settings(poolPath, poolBytes, maxInFlightPerDevice, batchCopies, incarnation, gate);
        }
    }

    private final Settings settings;
    private final Ticker ticker;
    private final MeterRegistry registry;
    private final CostProxy cost;
    private final Map<String, DeviceLane> lanes = new LinkedHashMap<>();
    private final Map<RestoreExecution.Key, RestoreExecution> executions = new HashMap<>();
    private final List<MessageConsumer<?>> consumers = new ArrayList<>();
    private final DeliveryOptions local = new DeliveryOptions().setLocalOnly(true).setSendTimeout(Long.MAX_VALUE / 2);
    private DestinationMappings destinations;
    private SharedMemoryFile pool;
    private CudaRuntime.HostRegistration pinnedPool;
    private long poolRegistrationNanos = -1;
    private Counter copiesDone;
    private Counter copiesFailed;
    private final Map<String, Counter> restoresByOutcome = new HashMap<>();

    /** {@code cost} may be null (no observation). */
    public RestoreVerticle(Settings settings, MeterRegistry registry, CostProxy cost) {
        this(settings, registry, cost, Ticker.SYSTEM);
    }

    /** With the clock that times complete routes (execute to terminal). */
    public RestoreVerticle(Settings settings, MeterRegistry registry, CostProxy cost, Ticker ticker) {
        this.ticker = ticker;
        this.settings = settings;
        this.registry = registry;
        this.cost = cost;
    }

    @Override
    public Future<?> start() {
        LocalCodec.register(vertx, RestoreCommands.MESSAGE_TYPES.toArray(Class<?>[]::new));
        lanes.put("host", new DeviceLane("host", -1, settings.maxInFlightPerDevice(), settings.incarnation()));
        for (int device = 0; device < CudaRuntime.deviceCount(); device++) {
            lanes.put("cuda:" + device, new DeviceLane("cuda:" + device, device, settings.maxInFlightPerDevice(),
                    settings.incarnation()));
        }
        destinations = new DestinationMappings(vertx, ticker, local, device -> lanes.get("cuda:" + device),
                this::cancelInstance);
        copiesDone = Counter.builder("orbitkv.restore.copies").tag("outcome", "completed")
                .description("Manager-executed restore copies by outcome").register(registry);
        copiesFailed = Counter.builder("orbitkv.restore.copies").tag("outcome", "failed")
                .description("Manager-executed restore copies by outcome").register(registry);
        for (String outcome : List.of("ready", "cancelled", "failed")) {
            restoresByOutcome.put(outcome, Counter.builder("orbitkv.restore.restores").tag("outcome", outcome)
                    .description("Manager-executed restores by outcome").register(registry));
        }
        for (DeviceLane lane : lanes.values()) {
            Gauge.builder("orbitkv.restore.in.flight", lane, l -> l.admission.inFlight()).tag("device", lane.name)
                    .description("Restore copies submitted to the device and not yet terminal").register(registry);
        }
        return vertx.executeBlocking(() -> {
            SharedMemoryFile mapped = SharedMemoryFile.map(settings.poolPath(), settings.poolBytes());
            if (CudaRuntime.isAvailable()) {
                try {
                    long registering = ticker.nanos();
                    pinnedPool = CudaRuntime.registerHost(mapped.segment());
                    poolRegistrationNanos = ticker.nanos() - registering;
                } catch (RuntimeException e) {
                    mapped.close();
                    throw e;
                }
            }
            return mapped;
        }).compose(mapped -> {
            pool = mapped;
            Future<?> deployed = Future.succeededFuture();
            for (DeviceLane lane : lanes.values()) {
                deployed = deployed.compose(v -> vertx.deployVerticle(
                        new DeviceWorkerVerticle(lane.address(), lane.cudaDevice, settings.gate(), ticker),
                        new DeploymentOptions().setThreadingModel(ThreadingModel.WORKER)).onSuccess(id -> lane.deploymentId = id));
            }
            return deployed;
        }).onSuccess(v -> serveAll());
    }

    private void serveAll() {
        EventBus bus = vertx.eventBus();
        serve(bus, RestoreProxy.REGISTER, destinations::register);
        serve(bus, RestoreProxy.EXECUTE, this::execute);
        serve(bus, RestoreProxy.CANCEL, (RestoreCommands.Cancel c) -> {
            cancel(c.instance(), c.ticket());
            return Future.succeededFuture(Boolean.TRUE);
        });
        serve(bus, RestoreProxy.RELEASE_INSTANCE, (RestoreCommands.ReleaseInstance c) -> destinations.release(c.instance()));
        serve(bus, RestoreProxy.STATS, (RestoreCommands.GetStats c) -> Future.succeededFuture(stats()));
    }

    private <C, R> void serve(EventBus bus, String address, Function<C, Future<R>> handler) {
        consumers.add(RoleProxies.serve(bus, address, handler));
    }

    /** Cancels every restore of {@code instance}: nothing more is submitted; what was submitted drains. */
    private void cancelInstance(long instance) {
        for (RestoreExecution e : List.copyOf(executions.values())) {
            if (e.key.instance() == instance) {
                cancel(instance, e.key.ticket());
            }
        }
    }

    // ---- execution ----

    private Future<Restored> execute(Execute command) {
        DestinationMappings.Destination destination = destinations.find(command.instance(),
                command.target().destinationId());
        if (destination == null) {
            throw new OrbitException(ErrorReason.UNKNOWN_DESTINATION, "no restore destination "
                    + Integer.toUnsignedString(command.target().destinationId()) + " registered by this instance");
        }
        RestoreRoute route = command.target().route();
        RestoreCommands.RouteStatus status = RestoreRoutes.of(route);
        if (!status.available()) {
            throw new OrbitException(ErrorReason.ROUTE_UNAVAILABLE, route + " cannot run on this Manager: " + status.cause());
        }
        DeviceLane lane = route == RestoreRoute.HOST_REGION ? lanes.get("host") : lanes.get("cuda:" + destination.spec.cudaDevice());
        boolean executable = switch (route) {
            case HOST_REGION -> destination.hostRegion != null;
            case CUDA_IPC -> destination.deviceBase != 0 && lane != null;
            default -> false;
        };
        if (!executable) {
            throw new OrbitException(ErrorReason.ROUTE_UNAVAILABLE, route + " cannot restore into destination "
                    + Integer.toUnsignedString(destination.spec.id()) + " (a " + destination.spec.kind() + " destination)");
        }
        RestoreExecution.Key key = new RestoreExecution.Key(command.instance(), command.ticket());
        if (executions.containsKey(key)) {
            throw new IllegalStateException("a restore of this ticket is already running");
        }
        int n = command.sources().size();
        long[] sources = new long[n];
        long[] targets = new long[n];
        long[] lengths = new long[n];
        for (int i = 0; i < n; i++) {
            SourcePage page = command.sources().get(i);
            RestoreTarget.GroupPages pages = command.target().group(page.groupId());
            GroupLayout layout = destination.spec.layout(page.groupId());
            int index = pages == null ? -1 : pages.pageIndexOf(page.position());
            if (layout == null || index < 0 || index >= layout.pageCount() || page.lengthBytes() > layout.pageBytes()) {
                throw new OrbitException(ErrorReason.INVALID_DESTINATION, "group " + page.groupId() + " position "
                        + page.position() + " has no destination page in destination " + destination.spec.id());
            }
            sources[i] = page.poolOffset();
            targets[i] = layout.offsetOf(index);
            lengths[i] = page.lengthBytes();
        }
        RestoreExecution execution = new RestoreExecution(key, lane, destination, route, sources, targets, lengths,
                ticker.nanos());
        executions.put(key, execution);
        destination.restoreStarted();
        lane.queue.addLast(execution);
        pump(lane);
        maybeFinish(execution);
        return execution.done.future();
    }

    private void pump(DeviceLane lane) {
        while (!lane.queue.isEmpty()) {
            RestoreExecution e = lane.queue.peekFirst();
            int remaining = e.copies() - e.next;
            if (remaining == 0 || e.stopped()) {
                lane.queue.pollFirst();
                continue;
            }
            int granted = lane.admission.acquire(Math.min(remaining, batchLimit(lane)));
            if (granted == 0) {
                return;
            }
            int from = e.next;
            e.next += granted;
            e.inFlight += granted;
            lane.queue.pollFirst();
            if (e.next < e.copies()) {
                lane.queue.addLast(e);
            }
            CopyBatch batch = new CopyBatch(pinnedPool != null ? pinnedPool.segment() : pool.segment(),
                    e.destination.hostRegion == null ? null : e.destination.hostRegion.segment(),
                    e.destination.deviceBase, lane.cudaDevice,
                    Arrays.copyOfRange(e.sources, from, from + granted), Arrays.copyOfRange(e.targets, from, from + granted),
                    Arrays.copyOfRange(e.lengths, from, from + granted), ticker.nanos());
            RoleProxies.<BatchDone>request(vertx.eventBus(), lane.address(), batch, local)
                    .onComplete(ar -> onBatchDone(lane, e, batch, granted, ar.succeeded() ? ar.result()
                            : BatchDone.failed(granted, ar.cause())));
        }
    }

    /**
     * The copies one batch carries at most. A CUDA batch ends in one wait for its stream's event and a worker runs one
     * batch at a time, so every batch boundary lets the stream drain: a CUDA batch takes as many copies as the lane
     * admits, and a plan of up to that many pages costs one wait. On the host lane the copies are the worker's own
     * CPU work and smaller batches let plans take turns.
     */
    private int batchLimit(DeviceLane lane) {
        return lane.cudaDevice >= 0 ? settings.maxInFlightPerDevice() : settings.batchCopies();
    }

    private void onBatchDone(DeviceLane lane, RestoreExecution e, CopyBatch batch, int granted, BatchDone done) {
        lane.admission.release(granted);
        if (done.startedNanos() >= 0) {
            lane.batches++;
            lane.copiesTimed += granted;
            lane.handoffNanos += done.startedNanos() - batch.sentNanos();
            lane.submitNanos += done.submitNanos();
            lane.waitNanos += done.waitNanos();
            if (!e.firstCopyStarted) {
                e.firstCopyStarted = true;
                lane.firstCopyNanos += done.startedNanos() - e.startNanos;
            }
        }
        e.inFlight -= granted;
        e.completed += done.completed();
        copiesDone.increment(done.completed());
        for (int i = 0; i < done.completed(); i++) {
            observeCopy(lane, batch.lengths()[i], done.copyNanos()[i], ObservationOutcome.SUCCEEDED);
        }
        if (done.failure() != null) {
            copiesFailed.increment(granted - done.completed());
            if (e.failure == null) {
                e.failure = done.failure();
            }
        }
        maybeFinish(e);
        pump(lane);
    }

    private void cancel(long instance, long ticket) {
        RestoreExecution e = executions.get(new RestoreExecution.Key(instance, ticket));
        if (e == null || e.cancelled) {
            return;
        }
        e.cancelled = true;
        e.lane.queue.remove(e);
        maybeFinish(e);
    }

    private void maybeFinish(RestoreExecution e) {
        if (!e.terminal() || executions.get(e.key) != e) {
            return;
        }
        executions.remove(e.key);
        e.lane.queue.remove(e);
        e.destination.restoreEnded();
        long elapsed = ticker.nanos() - e.startNanos;
        if (e.failure == null && !e.cancelled) {
            e.lane.restores++;
            e.lane.executionNanos += elapsed;
            restoresByOutcome.get("ready").increment();
            observeRoute(e, ObservationOutcome.SUCCEEDED, elapsed);
            e.done.complete(new Restored(e.route, e.copies(), e.bytes));
        } else if (e.failure != null) {
            restoresByOutcome.get("failed").increment();
            observeRoute(e, ObservationOutcome.FAILED, elapsed);
            e.done.fail(new OrbitException(ErrorReason.RESTORE_FAILED, e.completed + " of " + e.copies()
                    + " copies completed before a copy failed: " + e.failure.getClass().getSimpleName()));
        } else {
            restoresByOutcome.get("cancelled").increment();
            observeRoute(e, ObservationOutcome.CANCELLED, elapsed);
            e.done.fail(new OrbitException(ErrorReason.RESTORE_FAILED, "cancelled after " + e.completed + " of "
                    + e.copies() + " copies; every submitted copy drained"));
        }
    }

    // ---- observation ----

    private void observeCopy(DeviceLane lane, long bytes, long nanos, ObservationOutcome outcome) {
        if (cost == null || !cost.observationsEnabled()) {
            return;
        }
        CostEstimateKey key = CostEstimateKey.operation(CostPath.RESTORE_COPY, lane.resource, RepresentationFamily.RAW,
                SizeBucket.of(bytes), SizeBucket.of(1));
        cost.report(ObservationRecord.of(key, outcome, nanos, ObservedBytes.of(bytes, bytes)));
    }

    private void observeRoute(RestoreExecution e, ObservationOutcome outcome, long nanos) {
        if (cost == null || !cost.observationsEnabled()) {
            return;
        }
        CostEstimateKey key = CostEstimateKey.route(CostPath.ENGINE_RESTORE_ROUTE, e.lane.resource,
                RepresentationFamily.RAW, SizeBucket.of(e.bytes), SizeBucket.of(e.copies()),
                CompletionTarget.engineRestore(e.lane.resource));
        cost.report(ObservationRecord.of(key, outcome, nanos, ObservedBytes.logicalOnly(e.bytes)));
    }

    // ---- stats ----

    private RestoreStats stats() {
        List<LaneStats> laneStats = new ArrayList<>();
        for (DeviceLane lane : lanes.values()) {
            laneStats.add(lane.stats());
        }
        int cancelling = 0;
        for (RestoreExecution e : executions.values()) {
            if (e.cancelled) {
                cancelling++;
            }
        }
        return new RestoreStats(List.copyOf(laneStats), executions.size(), cancelling,
                destinations.mappedHostRegions(), RestoreRoutes.all(),
                poolRegistrationNanos);
    }

    @Override
    public Future<?> stop() {
        for (MessageConsumer<?> consumer : consumers) {
            consumer.unregister();
        }
        RoleProxies.withdrawAll(context);
        // Ordered stop: every plan is cancelled (nothing more is submitted) and its submitted copies drain before the
        // host regions and the pool mapping they read and write are unmapped. Workers are undeployed by Vert.x after
        // this verticle (children).
        List<Future<Restored>> draining = new ArrayList<>();
        for (RestoreExecution e : List.copyOf(executions.values())) {
            draining.add(e.done.future());
            cancel(e.key.instance(), e.key.ticket());
        }
        List<DestinationMappings.Destination> all = destinations == null ? List.of() : destinations.removeAll();
        return Future.join(draining).otherwiseEmpty().compose(v -> vertx.executeBlocking(() -> {
            for (DestinationMappings.Destination d : all) {
                if (d.hostRegion != null) {
                    d.hostRegion.close();
                }
            }
            if (pinnedPool != null) {
                pinnedPool.close();
            }
            if (pool != null) {
                pool.close();
            }
            return null;
        }));
    }
}
