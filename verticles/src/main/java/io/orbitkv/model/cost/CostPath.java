package io.orbitkv.model.cost;

import java.util.Locale;
import io.orbitkv.model.cost.SampleKind;

/**
 * The bounded set of measured paths. Each path has exactly one {@link SampleKind}; its name in lower case is the
 * {@code path} metric label.
 */
public enum CostPath {
    /** An SSD read straight into its destination (O_DIRECT into a 4 KiB-aligned pool slot). */
    SSD_READ(SampleKind.OPERATION),
    /** The same SSD read through an owned bounce buffer, then copied into the destination. */
    SSD_READ_BOUNCED(SampleKind.OPERATION),
    SSD_WRITE(SampleKind.OPERATION),
    POOL_COPY_IN(SampleKind.OPERATION),
    POOL_COPY_OUT(SampleKind.OPERATION),
    CODEC_ENCODE(SampleKind.OPERATION),
    CODEC_DECODE(SampleKind.OPERATION),
    PEER_FETCH(SampleKind.OPERATION),
    /** Enqueue to engine-restore completion through host-staged io_uring reads. */
    SSD_RESTORE_ROUTE(SampleKind.ROUTE),
    /** Enqueue to engine-restore completion through cuFile GPU staging. */
    SSD_CUFILE_RESTORE_ROUTE(SampleKind.ROUTE),
    /** Seal to committed SSD extent, the payload copied into a staging buffer first (the default write path). */
    SSD_SAVE_STAGED_ROUTE(SampleKind.ROUTE),
    /** Seal to committed SSD extent, the payload written straight from its DRAM slot (image pinned meanwhile). */
    SSD_SAVE_DIRECT_ROUTE(SampleKind.ROUTE),
    /** Enqueue until the state is resident in local DRAM (host ready) from a local source. */
    HOST_READY_ROUTE(SampleKind.ROUTE),
    /** Enqueue until the state is resident in local DRAM (host ready) from a peer source. */
    PEER_HOST_READY_ROUTE(SampleKind.ROUTE),
    /**
     * Enqueue until the state is resident in local DRAM from a peer's SSD: the source stages its extent through its
     * own io_uring reads before the transfer, so it is kept apart from {@link #PEER_HOST_READY_ROUTE} (peer DRAM).
     */
    PEER_SSD_HOST_READY_ROUTE(SampleKind.ROUTE),
    /** One page copied by the Manager from its pool into an engine's registered destination (host region or device). */
    RESTORE_COPY(SampleKind.OPERATION),
    /** A Manager-executed restore, from execution to every copy terminal (completion target engine-restore). */
    ENGINE_RESTORE_ROUTE(SampleKind.ROUTE);

    private final SampleKind sampleKind;
    private final String label;

    CostPath(SampleKind sampleKind) {
        this.sampleKind = sampleKind;
        this.label = name().toLowerCase(Locale.ROOT);
    }

    public SampleKind sampleKind() {
        return sampleKind;
    }

    /** The metric label value. */
    public String label() {
        return label;
    }
}
