package io.orbitkv.restore;

import io.orbitkv.model.cost.ResourceId;
import io.orbitkv.model.plan.RestoreTarget;
import java.util.ArrayDeque;

/**
 * One device lane of the restore role (the host lane or {@code cuda:N}): its worker's address, its admission (copy
 * credits in flight), the plans waiting for credits, and where its time went. Confined to the role's event loop.
 */
final class DeviceLane {
    final String name;
    /** -1 for the host lane. */
    final int cudaDevice;
    final DeviceAdmission admission;
    final ArrayDeque<RestoreExecution> queue = new ArrayDeque<>();
    final ResourceId resource;
    String deploymentId;
    // where this lane's time went (LaneTimings)
    long restores;
    long executionNanos;
    long firstCopyNanos;
    long batches;
    long copiesTimed;
    long handoffNanos;
    long submitNanos;
    long waitNanos;
    long ipcImports;
    long ipcImportNanos;

    DeviceLane(String name, int cudaDevice, int maxInFlight, long incarnation) {
        this.name = name;
        this.cudaDevice = cudaDevice;
        this.admission = new DeviceAdmission(maxInFlight);
        this.resource = RestoreTarget.deviceResource(cudaDevice, incarnation);
    }

    String address() {
        return DeviceWorkerVerticle.address(name);
    }

    int queuedCopies() {
        int queued = 0;
        for (RestoreExecution e : queue) {
            queued += e.copies() - e.next;
        }
        return queued;
    }

    RestoreCommands.LaneStats stats() {
        return new RestoreCommands.LaneStats(name, admission.inFlight(), admission.peakInFlight(),
                admission.maxInFlight(), queuedCopies(), admission.completed(),
                new RestoreCommands.LaneTimings(restores, executionNanos, firstCopyNanos, batches, copiesTimed,
                        handoffNanos, submitNanos, waitNanos, ipcImports, ipcImportNanos));
    }
}
