package io.orbitkv.ssd;

import io.orbitkv.model.StateKey;
import java.lang.foreign.MemorySegment;
import java.util.List;
import io.orbitkv.model.SsdEntry;
import io.orbitkv.model.SsdLease;
import io.orbitkv.model.SsdPageOutcome;
import io.orbitkv.model.SsdReadResult;
import io.orbitkv.model.SsdResidencyChange;
import io.orbitkv.model.WeakImageSource;
import io.orbitkv.model.SsdWritePolicy;

/** Messages the SSD role accepts. Local records only (see {@link io.orbitkv.common.LocalCodec}). */
public final class SsdCommands {
    private SsdCommands() {}

    /** Fire-and-forget: no reply. */
    public record OfferWrite(StateKey key, WeakImageSource source, long lengthBytes) {}

    /** Fire-and-forget: DRAM images seen again (see {@link SsdStore#noteReuse}); no reply. */
    public record NoteReuse(List<OfferWrite> images) {}

    public record GetWritePolicy() {}

    public record Lookup(List<StateKey> keys) {}

    public record Entries(List<SsdEntry> entries) {}

    /** One page to lease: the committed extent of {@code key} at exactly {@code generation}. */
    public record AcquireLease(StateKey key, long generation) {}

    public record AcquireLeases(List<AcquireLease> pages) {}

    public record LeaseOutcomes(List<SsdPageOutcome<SsdLease>> leases) {}

    /** The destination is a descriptor of shared memory (a pool slot); payload bytes never cross the bus. */
    public record ReadInto(SsdLease lease, MemorySegment destination) {}

    public record ReadAll(List<ReadInto> reads) {}

    public record ReadOutcomes(List<SsdPageOutcome<SsdReadResult>> reads) {}

    public record Release(List<SsdLease> leases) {}

    public record GetStats() {}

    public record GetCommittedEntries() {}

    static final List<Class<?>> MESSAGE_TYPES = List.of(OfferWrite.class, NoteReuse.class, GetWritePolicy.class,
            Lookup.class, Entries.class, AcquireLeases.class, LeaseOutcomes.class, ReadAll.class, ReadOutcomes.class,
            Release.class, GetStats.class,
            GetCommittedEntries.class, SsdLease.class, SsdReadResult.class, SsdStats.class, SsdResidencyChange.class,
            SsdWritePolicy.class);
}
