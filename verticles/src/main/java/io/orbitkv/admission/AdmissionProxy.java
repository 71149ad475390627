package io.orbitkv.admission;

import io.orbitkv.common.RoleProxies;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.eventbus.DeliveryOptions;
import io.vertx.core.eventbus.EventBus;

/** Typed proxy of the admission role. */
public final class AdmissionProxy {
    static final String SUBMIT = "orbitkv.admission.submit";
    static final String POLL = "orbitkv.admission.poll";
    static final String CANCEL = "orbitkv.admission.cancel";
    static final String RELEASE = "orbitkv.admission.release";
    static final String RELEASE_INSTANCE = "orbitkv.admission.release-instance";
    static final String STATS = "orbitkv.admission.stats";

    private final EventBus bus;
    private final DeliveryOptions options = new DeliveryOptions().setSendTimeout(10_000).setLocalOnly(true);

    public AdmissionProxy(Vertx vertx) {
        this.bus = vertx.eventBus();
    }

    /** Submits (or revises, for the same request id) a validated demand. */
    public Future<AdmissionCommands.Outcome> submit(long instance, AdmissionCommands.DemandPlan plan) {
        return RoleProxies.request(bus, SUBMIT, new AdmissionCommands.Submit(instance, plan), options);
    }

    public Future<AdmissionCommands.Outcome> poll(long instance, long ticket) {
        return RoleProxies.request(bus, POLL, new AdmissionCommands.Poll(instance, ticket), options);
    }

    /** Cancels a ticket; completes after in-flight work drained, with the number of pages unpinned. */
    public Future<Integer> cancel(long instance, long ticket) {
        return RoleProxies.request(bus, CANCEL, new AdmissionCommands.Cancel(instance, ticket), options);
    }

    public Future<Integer> release(long instance, long leaseId) {
        return RoleProxies.request(bus, RELEASE, new AdmissionCommands.Release(instance, leaseId), options);
    }

    public Future<AdmissionCommands.InstanceReleased> releaseInstance(long instance) {
        return RoleProxies.request(bus, RELEASE_INSTANCE, new AdmissionCommands.ReleaseInstance(instance), options);
    }

    public Future<AdmissionCommands.AdmissionStats> stats(long instance) {
        return RoleProxies.request(bus, STATS, new AdmissionCommands.GetStats(instance), options);
    }
}
