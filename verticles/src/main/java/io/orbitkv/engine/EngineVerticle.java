package io.orbitkv.engine;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.admission.AdmissionProxy;
import io.orbitkv.common.RoleProxies;
import io.orbitkv.common.Ticker;
import io.orbitkv.nativeio.libc.Libc;
import io.orbitkv.restore.RestoreProxy;
import io.orbitkv.storage.StorageProxy;
import io.vertx.core.Future;
import io.vertx.core.VerticleBase;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * The engine role: engines' doors, their registrations and sessions, and their authentication. This verticle wires
 * the parts, each reusable without gRPC: {@link EngineAuthenticator} (token, peer credentials), {@link EngineRequests}
 * (validation, unsigned checks, mapping into role commands), {@link EngineReplies} (records to engine.proto replies),
 * {@link EngineOperations} (one method per engine call, sessions and their cleanup), {@link EngineCall} (the list of
 * calls both doors serve), {@link GrpcEngineDoor} (the gRPC transport on the Unix socket and TCP) and, when
 * {@code bridge.port} is set, {@link BridgeEngineDoor} (the TCP event-bus bridge), and unless
 * {@code engine.colocated-socket} is off, {@link ColocatedEngineDoor} (the co-located SEQPACKET channel), and
 * {@link ProducerStatusService} (what producer sessions sealed, for consumers' demands: {@link ProducerProxy}). Everything
 * runs on this verticle's event loop; a periodic sweep ends lapsed sessions. Stopping is the first step of the
 * Manager's ordered stop: from then on every call is answered SHUTTING_DOWN, then the doors close.
 */
public final class EngineVerticle extends VerticleBase {
    public static final String TOKEN_HEADER = GrpcEngineDoor.TOKEN_HEADER;

    private final EngineSettings settings;
    private final MeterRegistry registry;
    private final Ticker ticker;
    private GrpcEngineDoor door;
    private BridgeEngineDoor bridge;
    private ColocatedEngineDoor colocated;
    private ProducerStatusService producers;
    private long sweepTimer;
    /** Set first thing in {@link #stop}: every call that still arrives is answered SHUTTING_DOWN. Loop-confined. */
    private boolean stopping;

    public EngineVerticle(EngineSettings settings, MeterRegistry registry, Ticker ticker) {
        this.settings = settings.validate();
        this.registry = registry;
        this.ticker = ticker;
    }

    /** The TCP port actually bound (useful when configured as 0); -1 before start. */
    public int tcpPort() {
        return door == null ? -1 : door.tcpPort();
    }

    /** The event-bus bridge's port actually bound; -1 when the bridge is off or before start. */
    public int bridgePort() {
        return bridge == null ? -1 : bridge.port();
    }

    @Override
    public Future<?> start() {
        EngineMetrics metrics = new EngineMetrics(registry);
        EngineOperations operations = new EngineOperations(settings, ticker, new AdmissionProxy(vertx),
                new StorageProxy(vertx), metrics, new RestoreProxy(vertx));
        Gauge.builder("orbitkv.instances", operations, EngineOperations::registeredInstances)
                .description("Registered engine instances").register(registry);
        FunctionCounter.builder("orbitkv.lease.tombstones.dropped", operations, EngineOperations::droppedTombstones)
                .description("Ended leases forgotten early because the tombstone table was full").register(registry);
        producers = new ProducerStatusService(vertx, operations.producerSeals(), settings.memberId(),
                settings.maxPagesPerRequest(), registry);
        producers.serve();
        Set<Integer> allowedUids = settings.allowedPeerUids().isEmpty() ? Set.of(Libc.effectiveUid())
                : settings.allowedPeerUids();
        EngineAuthenticator authenticator = new EngineAuthenticator(settings.token(), allowedUids);
        List<EngineCall<?, ?>> calls = EngineCall.all(operations).stream()
                .<EngineCall<?, ?>>map(call -> call.refusingWhen(() -> stopping)).toList();
        door = new GrpcEngineDoor(vertx, settings, authenticator, calls, metrics);
        if (settings.bridgeEnabled()) {
            bridge = new BridgeEngineDoor(vertx, settings, authenticator, calls, new BridgeMetrics(registry, metrics));
        }
        if (settings.colocatedEnabled()) {
            colocated = new ColocatedEngineDoor(vertx, context, settings, authenticator, calls, metrics);
        }
        long sweepMillis = Math.max(50, settings.sessionTtlNanos() / 4_000_000);
        sweepTimer = vertx.setPeriodic(sweepMillis, id -> operations.sweep());
        return door.listen().compose(v -> bridge == null ? Future.succeededFuture() : bridge.listen())
                .compose(v -> colocated == null ? Future.succeededFuture() : colocated.listen());
    }

    @Override
    public Future<?> stop() {
        stopping = true;
        vertx.cancelTimer(sweepTimer);
        RoleProxies.withdrawAll(context);
        List<Future<Void>> closing = new ArrayList<>();
        if (producers != null) {
            closing.add(producers.close());
        }
        if (bridge != null) {
            closing.add(bridge.close());
        }
        if (colocated != null) {
            closing.add(colocated.close());
        }
        if (door != null) {
            closing.add(door.close());
        }
        return Future.join(closing);
    }
}
