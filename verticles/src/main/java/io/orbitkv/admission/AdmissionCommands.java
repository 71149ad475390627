package io.orbitkv.admission;

import io.orbitkv.storage.ImageStore;
import io.orbitkv.storage.StateKey;
import java.util.List;

/** Messages the admission role accepts. Local records only. */
public final class AdmissionCommands {
    private AdmissionCommands() {}

    public enum Status { MISS, PENDING, READY }

    public record Submit(long instance, List<List<StateKey>> chains, long revision) {}

    public record Poll(long instance, long ticket) {}

    public record Cancel(long instance, long ticket) {}

    public record Release(long instance, long leaseId) {}

    public record ReleaseInstance(long instance) {}

    public record GetStats(long instance) {}

    /**
     * The answer to a submit or poll. READY carries the lease and, per chain in request order, the leased images of
     * the first {@code readyBlocks} positions.
     */
    public record Outcome(long ticket, Status status, int readyBlocks, long leaseId,
                          List<List<ImageStore.ImageRef>> leased, long revision, long retryAfterMicros) {}

    public record InstanceReleased(int leases, int queries) {}

    public record AdmissionStats(long activeLeases, long leasedBytes, long outstandingQueries,
                                 long instanceLeases, long instanceOutstandingQueries) {}

    static final List<Class<?>> MESSAGE_TYPES = List.of(Submit.class, Poll.class, Cancel.class, Release.class,
            ReleaseInstance.class, GetStats.class, Outcome.class, InstanceReleased.class, AdmissionStats.class);
}
