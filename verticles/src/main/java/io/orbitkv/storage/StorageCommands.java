package io.orbitkv.storage;

import java.util.List;
import io.orbitkv.model.StateKey;
import io.orbitkv.model.ImageRef;
import io.orbitkv.model.AllocateResult;
import io.orbitkv.model.SealResult;
import io.orbitkv.model.GroupProbe;
import io.orbitkv.model.GroupPresence;
import io.orbitkv.model.ExactPin;
import io.orbitkv.model.KeyEvidence;
import io.orbitkv.model.KeyGeneration;
import io.orbitkv.model.ResidencySnapshot;
import io.orbitkv.model.ResidencyPage;

/** Messages the storage role accepts. Local records only (see {@link io.orbitkv.common.LocalCodec}). */
public final class StorageCommands {
    private StorageCommands() {}

    public record Allocate(long instance, List<StateKey> keys, List<Long> lengths) {}

    /**
     * A seal; {@code received} (null: none) holds one CRC32C per slot that the writer computed over the bytes it placed
     * in the slots (the peer transport, as they landed): compared with {@code crc32c} instead of reading the slots.
     */
    public record Seal(long instance, long publishId, List<Integer> crc32c, List<ImageRef> written,
                       List<Integer> received) {
        public Seal(long instance, long publishId, List<Integer> crc32c, List<ImageRef> written) {
            this(instance, publishId, crc32c, written, null);
        }
    }

    public record Abort(long instance, long publishId) {}

    /**
     * A seal, then (when it succeeded, in the same step on the storage loop, so nothing is evicted in between) exact
     * pins of {@code pin} (none when empty): a peer requester that keeps the pages it fetched.
     */
    public record SealAndPin(Seal seal, List<StateKey> pin) {}

    /** The answer to {@link SealAndPin}: the seal's result and the pins (null when none were asked for). */
    public record SealedAndPinned(SealResult sealed, ExactPin pin) {}


    public record Probe(List<GroupProbe> groups) {}

    public record PinExact(List<List<StateKey>> groups) {}

    /** The answer to {@link Probe}: one presence per probed group, in request order. */
    public record Presence(List<GroupPresence> groups) {}

    public record Unpin(List<List<ImageRef>> pinned) {}

    /** Drops the pins of leases whose session ended, holding their slots in quarantine (see {@link ImageStore}). */
    public record UnpinIntoQuarantine(List<List<ImageRef>> pinned) {}

    /** Ends the unsealed publishes of an instance whose session ended; their slots go into quarantine. */
    public record ReleaseInstance(long instance) {}

    public record GetStats() {}

    /** Read these keys back from SSD into DRAM (those on SSD and not in DRAM); answers how many reads started. */
    public record Materialize(List<StateKey> keys) {}

    /** A consistent view of the storage role, published after every change. */
    public record StorageStats(long poolBytes, long spanBytes, long slotBytes, long requestedBytes, long freeBytes,
                               long strandedFreeBytes, long largestFreeRunBytes, long residentImages,
                               long unsealedImages, long pinnedImages, long openPublishes, long evictions,
                               long residencySequence, long ssdKeys, long materializingImages,
                               long quarantinedSlots, long quarantinedBytes, long quarantineEvents) {
        public long usedBytes() {
            return spanBytes;
        }
    }

    /**
     * Retain {@code keys} (with their page lengths) for {@code tenant}, {@code ttlNanos} at {@code priority}; answered
     * {@link Retained} or a typed refusal (INVALID_RETENTION_TTL, RETENTION_OVER_BUDGET) that changed nothing.
     */
    public record Retain(String tenant, List<StateKey> keys, List<Long> lengths, long ttlNanos, int priority) {}

    public record Retained(long retentionId, long retainedBytes, int residentPages, long tenantRetainedBytes,
                           long tenantBudgetBytes) {}

    /** Ends a retention of {@code tenant}; answers its bytes (UNKNOWN_RETENTION when there is none). */
    public record Unretain(String tenant, long retentionId) {}

    /** An allocation whose images are transient (do_not_store, see {@link ImageStore#allocate}). */
    public record AllocateTransient(long instance, List<StateKey> keys, List<Long> lengths) {}

    // ---- for the planning role's local execution owners (see io.orbitkv.model.plan.LocalReplicaPort) ----

    public record Discover(List<StateKey> keys) {}

    public record Discovery(List<KeyEvidence> keys) {}

    public record PinGenerations(List<KeyGeneration> pages) {}

    public record UnpinRefs(List<ImageRef> pinned, boolean quarantine) {}

    public record AcquireFromSsd(List<KeyGeneration> pages) {}

    /** A hold id ({@code hold > 0}), or none because {@code staleKey} changed, or the pool had no room (null). */
    public record SsdHold(long hold, StateKey staleKey) {}

    public record ReadFromSsd(long hold) {}

    public record ReadPages(List<ImageRef> pinned) {}

    public record ReleaseSsdHold(long hold) {}

    /** Ends a peer source's staging: unpin, then free the pages read back from SSD that nobody else holds. */
    public record ReleaseStaged(List<ImageRef> staged) {}

    /** Residency events after {@code after}, at most {@code max} (the cluster role's inventory publisher). */
    public record ResidencySince(long after, int max) {}

    /** Every resident key at the current residency sequence, at most {@code maxKeys} per medium. */
    public record ResidencySnapshotOf(int maxKeys) {}

    /**
     * One residency change as other roles read it (the stream's own record stays internal): a sealed DRAM image or a
     * committed SSD extent of {@code key} appeared or went, at {@code sequence}.
     */
    public record ResidencyChange(long sequence, Kind kind, StateKey key, long generation, long lengthBytes) {
        public enum Kind { DRAM_ADDED, DRAM_REMOVED, SSD_ADDED, SSD_REMOVED }
    }

    /** Changes after a sequence; {@code gap}: the stream's ring lost some before they were read (resync). */
    public record ResidencyChanges(List<ResidencyChange> changes, boolean gap, long lastSequence) {}

    static final List<Class<?>> MESSAGE_TYPES = List.of(ResidencySince.class, ResidencySnapshotOf.class,
            ResidencyPage.class, ResidencySnapshot.class, Allocate.class, Seal.class, Abort.class,
            Unpin.class, UnpinIntoQuarantine.class, ReleaseInstance.class, GetStats.class, Materialize.class, StorageStats.class, AllocateResult.class,
            SealResult.class, Integer.class, Probe.class, PinExact.class, Presence.class,
            ExactPin.class, Discover.class, Discovery.class, PinGenerations.class, UnpinRefs.class,
            AcquireFromSsd.class, SsdHold.class, ReadFromSsd.class, ReadPages.class, ReleaseSsdHold.class,
            ReleaseStaged.class, SealAndPin.class, SealedAndPinned.class, Retain.class, Retained.class, Unretain.class,
            AllocateTransient.class);
}
