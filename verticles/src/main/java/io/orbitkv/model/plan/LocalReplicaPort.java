package io.orbitkv.model.plan;

import io.orbitkv.model.StateKey;
import io.vertx.core.Future;
import java.util.List;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.ExactPin;
import io.orbitkv.model.KeyEvidence;
import io.orbitkv.model.KeyGeneration;

/**
 * What the local execution owners ({@link LocalOwners}) and local discovery need from the storage role, which owns
 * the pool, its images and, through the SSD role, the reads of SSD extents into pool slots. The storage role's proxy
 * implements it for the Manager; tests implement it over the storage role's image store directly. Futures complete on
 * the planning role's event loop.
 */
public interface LocalReplicaPort {

    /** Metadata only: one record per key, in order (the image store's {@code discover}). */
    Future<List<KeyEvidence>> discover(List<StateKey> keys);

    /** Pins exactly these DRAM slot generations or none (the image store's {@code pinGenerations}). */
    Future<ExactPin> pinGenerations(List<KeyGeneration> pages);

    /** Drops pins; {@code quarantine}: the holder's session ended, so the slots are held out of reuse first. */
    Future<Integer> unpin(List<ImageRef> pinned, boolean quarantine);

    /**
     * Host materialization from local SSD, step one: reserves a pool slot per page (the destination credit) and takes an
     * exact-generation SSD extent lease per page (the source lease), all or nothing, reading nothing. Answers a hold,
     * or why there is none (then nothing is held).
     */
    Future<SsdAcquired> acquireFromSsd(List<KeyGeneration> pages);

    /**
     * The answer of {@link #acquireFromSsd}: a hold id ({@code hold > 0}), or no hold because {@code staleKey}'s extent
     * (or DRAM state) changed since discovery, or because the pool had no room ({@code staleKey == null}).
     */
    record SsdAcquired(long hold, StateKey staleKey) {
        public static SsdAcquired held(long hold) {
            return new SsdAcquired(hold, null);
        }

        public static SsdAcquired stale(StateKey key) {
            return new SsdAcquired(0, key);
        }

        public static SsdAcquired noRoom() {
            return new SsdAcquired(0, null);
        }
    }

    /**
     * Step two: reads every page into its slot (io_uring), verifies it, and seals and pins it in the same step. Completes
     * only when every read is terminal; the SSD leases end then. On success answers the pinned pages in order (the
     * hold then owns those pins); on failure ({@link PlanningFailure#TRANSFER_FAILED}) no page of the hold stays pinned.
     */
    Future<List<ImageRef>> readFromSsd(long hold);

    /** Ends a hold that was never read: frees its slots and ends its SSD leases. Answers false for an unknown hold. */
    Future<Boolean> releaseSsdHold(long hold);

    /** Storage's pool is short of free space now (a speculative prefetch then starts at its latest start). */
    default boolean dramTight() {
        return false;
    }
}
