package io.orbitkv.ssd;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.common.BoundedHandoff;
import io.orbitkv.common.LocalCodec;
import io.orbitkv.common.RoleProxies;
import io.vertx.core.Future;
import io.vertx.core.VerticleBase;
import io.vertx.core.eventbus.EventBus;
import io.vertx.core.eventbus.MessageConsumer;
import java.util.ArrayList;
import java.util.List;
import io.orbitkv.model.SsdResidencyChange;
import io.orbitkv.model.SsdWritePolicy;

/**
 * The SSD role: owns one {@link SsdStore} on this verticle's event loop (plus the store's io_uring loop).
 *
 * <p>Design note: {@code start()} opens the store (shard files, index rebuild); a missing or unwritable directory or a
 * shard that cannot be created fails the deployment with a message naming the path. Residency changes are published
 * through a bounded hand-off (see {@link SsdProxy#residencyChanges}); recovered extents are published during start, before
 * anyone can subscribe, so subscribers seed themselves with {@link SsdProxy#committedEntries} first. {@code stop()}
 * closes the store: in-flight I/O completes first, then buffers are freed; committed extents stay on disk.
 */
public final class SsdVerticle extends VerticleBase {

    private final SsdSettings settings;
    private final MeterRegistry registry;
    private final List<MessageConsumer<?>> consumers = new ArrayList<>();
    private SsdStore store;
    private BoundedHandoff<Object> offers;
    private ReadBackCommands commands;

    /** Read-back commands served, by kind: one of each per read-back however many pages it has. */
    private record ReadBackCommands(Counter acquire, Counter read, Counter release) {
        static ReadBackCommands register(MeterRegistry registry) {
            return new ReadBackCommands(counter(registry, "acquire"), counter(registry, "read"),
                    counter(registry, "release"));
        }

        private static Counter counter(MeterRegistry registry, String command) {
            return Counter.builder("orbitkv.ssd.commands").tag("command", command)
                    .description("Batched read-back commands the SSD role served (each covers every page of one "
                            + "read-back)").register(registry);
        }
    }

    public SsdVerticle(SsdSettings settings, MeterRegistry registry) {
        this.settings = settings;
        this.registry = registry;
    }

    @Override
    public Future<?> start() {
        EventBus bus = vertx.eventBus();
        commands = ReadBackCommands.register(registry);
        LocalCodec.register(vertx, SsdCommands.MESSAGE_TYPES.toArray(Class<?>[]::new));
        RoleLoop loop = RoleLoop.ofCurrentContext();
        BoundedHandoff<SsdResidencyChange> residency = BoundedHandoff.create(vertx, SsdProxy.RESIDENCY,
                settings.residencyHandoffCapacity(), registry);
        return Future.fromCompletionStage(SsdStore.open(settings, loop, residency::offer, registry), context)
                .onSuccess(opened -> {
                    store = opened;
                    offers = BoundedHandoff.create(vertx, SsdProxy.OFFER_WRITE,
                            settings.offerHandoffCapacity(), registry);
                    offers.open(context, this::onOffer);
                    serve(bus);
                })
                .mapEmpty();
    }

    /** An offered write or a note of reuse, from the bounded hand-off (see {@link SsdProxy#offerWrite}). */
    private void onOffer(Object offer) {
        if (offer instanceof SsdCommands.OfferWrite write) {
            store.offerWrite(write.key(), write.source(), write.lengthBytes());
        } else if (offer instanceof SsdCommands.NoteReuse reuse) {
            for (SsdCommands.OfferWrite image : reuse.images()) {
                store.noteReuse(image.key(), image.source(), image.lengthBytes());
            }
        }
    }

    private void serve(EventBus bus) {
        consumers.add(RoleProxies.<SsdCommands.GetWritePolicy, SsdWritePolicy>serve(bus, SsdProxy.WRITE_POLICY,
                c -> Future.succeededFuture(settings.writePolicy())));
        consumers.add(RoleProxies.<SsdCommands.Lookup, SsdCommands.Entries>serve(bus, SsdProxy.LOOKUP,
                c -> Future.succeededFuture(new SsdCommands.Entries(store.lookup(c.keys())))));
        consumers.add(RoleProxies.<SsdCommands.AcquireLeases, SsdCommands.LeaseOutcomes>serve(bus,
                SsdProxy.ACQUIRE_LEASES, c -> {
                    commands.acquire.increment();
                    return Future.succeededFuture(new SsdCommands.LeaseOutcomes(store.acquireLeases(c.pages())));
                }));
        consumers.add(RoleProxies.<SsdCommands.ReadAll, SsdCommands.ReadOutcomes>serve(bus, SsdProxy.READ_INTO, c -> {
            commands.read.increment();
            return Future.fromCompletionStage(store.readInto(c.reads()), context).map(SsdCommands.ReadOutcomes::new);
        }));
        consumers.add(RoleProxies.<SsdCommands.Release, Integer>serve(bus, SsdProxy.RELEASE, c -> {
            commands.release.increment();
            return Future.succeededFuture(store.release(c.leases()));
        }));
        consumers.add(RoleProxies.<SsdCommands.GetStats, SsdStats>serve(bus, SsdProxy.STATS,
                c -> Future.succeededFuture(store.stats())));
        consumers.add(RoleProxies.<SsdCommands.GetCommittedEntries, SsdCommands.Entries>serve(bus, SsdProxy.COMMITTED_ENTRIES,
                c -> Future.succeededFuture(new SsdCommands.Entries(store.committedEntries()))));
    }

    /** A proxy on this verticle's Vertx. */
    public SsdProxy proxy() {
        return new SsdProxy(vertx);
    }

    @Override
    public Future<?> stop() {
        // Callers get SHUTTING_DOWN from now on; then the store drains: submitted reads and writes complete (their
        // buffers and destination slots stay valid: the pool is unmapped only after this future completes).
        RoleProxies.withdrawAll(context);
        if (offers != null) {
            offers.close();
        }
        consumers.forEach(MessageConsumer::unregister);
        return store == null ? Future.succeededFuture() : Future.fromCompletionStage(store.close(), context);
    }
}
