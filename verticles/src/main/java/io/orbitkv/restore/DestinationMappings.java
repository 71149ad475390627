package io.orbitkv.restore;

import io.orbitkv.common.OrbitException;
import io.orbitkv.common.RoleProxies;
import io.orbitkv.common.Ticker;
import io.orbitkv.nativeio.shm.SharedMemoryFile;
import io.orbitkv.protocol.engine.ErrorReason;
import io.orbitkv.restore.RestoreCommands.DestinationKind;
import io.orbitkv.restore.RestoreCommands.DestinationSpec;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import io.vertx.core.Vertx;
import io.vertx.core.eventbus.DeliveryOptions;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.IntFunction;
import java.util.function.LongConsumer;

/**
 * The restore destinations engine instances registered, by instance and destination id.
 *
 * <p>Design note: this owns every destination mapping: host regions it mapped after checking them
 * ({@link HostRegions}, mapped and unmapped on a worker) and CUDA IPC imports (imported and closed on the device
 * lane's worker thread). Registration is all or nothing: what opened before a failure is closed again. A destination
 * is closed only when its instance is released (or registers again) and no restore into it runs: {@link #release}
 * cancels the instance's restores and waits for each destination to drain ({@link Destination#restoreEnded}) before
 * closing it. The role's ordered stop takes every destination ({@link #removeAll}) and unmaps the host regions once
 * its restores drained. Confined to the role's event loop. A crashed Manager leaves nothing behind: the mappings die
 * with the process and the files are the engines'.
 */
final class DestinationMappings {
    /** One registered destination and the restores running into it. */
    static final class Destination {
        final DestinationSpec spec;
        SharedMemoryFile hostRegion;
        long deviceBase;
        private int activeRestores;
        private Promise<Void> drained;

        Destination(DestinationSpec spec) {
            this.spec = spec;
        }

        void restoreStarted() {
            activeRestores++;
        }

        void restoreEnded() {
            activeRestores--;
            if (activeRestores == 0 && drained != null) {
                drained.complete();
            }
        }

        /** Completes once no restore into this destination runs. */
        Future<Void> idle() {
            if (activeRestores == 0) {
                return Future.succeededFuture();
            }
            drained = Promise.promise();
            return drained.future();
        }
    }

    private final Vertx vertx;
    private final Ticker ticker;
    private final DeliveryOptions local;
    /** The lane of a CUDA device; null when there is no such device (or no CUDA). */
    private final IntFunction<DeviceLane> cudaLane;
    /** Cancels every restore of an instance (they drain; their destinations then become idle). */
    private final LongConsumer cancelRestores;
    private final Map<Long, Map<Integer, Destination>> byInstance = new HashMap<>();

    DestinationMappings(Vertx vertx, Ticker ticker, DeliveryOptions local, IntFunction<DeviceLane> cudaLane,
                        LongConsumer cancelRestores) {
        this.vertx = vertx;
        this.ticker = ticker;
        this.local = local;
        this.cudaLane = cudaLane;
        this.cancelRestores = cancelRestores;
    }

    /** The destination {@code id} of {@code instance}, or null. */
    Destination find(long instance, int id) {
        Map<Integer, Destination> mine = byInstance.get(instance);
        return mine == null ? null : mine.get(id);
    }

    /** Replaces the instance's destinations (the previous ones are released first); all or nothing. */
    Future<RestoreCommands.Registered> register(RestoreCommands.RegisterDestinations command) {
        Future<Integer> previous = byInstance.containsKey(command.instance())
                ? release(command.instance()) : Future.succeededFuture(0);
        return previous.compose(n -> {
            List<Future<Destination>> mapped = new ArrayList<>();
            for (DestinationSpec spec : command.destinations()) {
                mapped.add(open(spec));
            }
            return Future.join(mapped).transform(ar -> {
                Map<Integer, Destination> opened = new HashMap<>();
                Throwable firstFailure = null;
                for (Future<Destination> f : mapped) {
                    if (f.succeeded()) {
                        opened.put(f.result().spec.id(), f.result());
                    } else if (firstFailure == null) {
                        firstFailure = f.cause();
                    }
                }
                if (firstFailure != null) {
                    Throwable failure = firstFailure;
                    return Future.join(opened.values().stream().map(this::close).toList())
                            .transform(x -> Future.failedFuture(failure));
                }
                if (!opened.isEmpty()) {
                    byInstance.put(command.instance(), opened);
                }
                return Future.succeededFuture(new RestoreCommands.Registered(RestoreRoutes.all()));
            });
        });
    }

    private Future<Destination> open(DestinationSpec spec) {
        Destination destination = new Destination(spec);
        if (spec.kind() == DestinationKind.HOST_REGION) {
            return vertx.executeBlocking(() -> HostRegions.map(spec.hostPath(), spec.sizeBytes())).map(region -> {
                destination.hostRegion = region;
                return destination;
            });
        }
        DeviceLane lane = cudaLane.apply(spec.cudaDevice());
        if (lane == null) {
            // CUDA unavailable (or no such device): kept, but its route is refused at execution with the cause.
            return Future.succeededFuture(destination);
        }
        long importing = ticker.nanos();
        return RoleProxies.<Long>request(vertx.eventBus(), lane.address(),
                        new RestoreCommands.ImportIpc(spec.ipcHandle()), local)
                .recover(e -> Future.failedFuture(new OrbitException(ErrorReason.INVALID_DESTINATION,
                        "CUDA IPC import failed: " + e.getMessage())))
                .map(address -> {
                    lane.ipcImports++;
                    lane.ipcImportNanos += ticker.nanos() - importing;
                    destination.deviceBase = address;
                    return destination;
                });
    }

    private Future<Void> close(Destination destination) {
        if (destination.hostRegion != null) {
            SharedMemoryFile region = destination.hostRegion;
            destination.hostRegion = null;
            return vertx.executeBlocking(() -> {
                region.close();
                return null;
            });
        }
        if (destination.deviceBase != 0) {
            long address = destination.deviceBase;
            destination.deviceBase = 0;
            return RoleProxies.<Boolean>request(vertx.eventBus(), cudaLane.apply(destination.spec.cudaDevice()).address(),
                    new RestoreCommands.CloseIpc(address), local).mapEmpty();
        }
        return Future.succeededFuture();
    }

    /** Cancels the instance's restores, waits for them to drain, then unmaps its destinations; answers how many. */
    Future<Integer> release(long instance) {
        Map<Integer, Destination> mine = byInstance.remove(instance);
        cancelRestores.accept(instance);
        if (mine == null) {
            return Future.succeededFuture(0);
        }
        List<Future<Void>> closed = new ArrayList<>();
        for (Destination destination : mine.values()) {
            closed.add(destination.idle().compose(v -> close(destination)));
        }
        return Future.join(closed).map(v -> mine.size());
    }

    /** Host regions mapped now. */
    int mappedHostRegions() {
        int mapped = 0;
        for (Map<Integer, Destination> mine : byInstance.values()) {
            for (Destination d : mine.values()) {
                if (d.hostRegion != null) {
                    mapped++;
                }
            }
        }
        return mapped;
    }

    /** Every destination, forgotten here: the ordered stop unmaps them once their restores drained. */
    List<Destination> removeAll() {
        List<Destination> all = new ArrayList<>();
        byInstance.values().forEach(m -> all.addAll(m.values()));
        byInstance.clear();
        return all;
    }
}
