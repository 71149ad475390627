package io.orbitkv.model.plan;

import io.orbitkv.model.cost.CompletionTarget;
import io.orbitkv.model.cost.CostEstimateKey;
import io.orbitkv.model.cost.CostPath;
import io.orbitkv.model.cost.RepresentationFamily;
import io.orbitkv.model.cost.ResourceId;
import io.orbitkv.model.cost.ResourceKind;
import io.orbitkv.model.cost.SizeBucket;
import java.util.List;
import java.util.Optional;
import io.orbitkv.model.plan.Medium;
import io.orbitkv.model.plan.PeerOwner;
import io.orbitkv.model.plan.RouteResources;

/**
 * The implemented route templates, in the default order (declaration order): a page is taken from the first template
 * that is executable here, serves the demand's completion target and has eligible evidence for it.
 * <pre>
 *   LOCAL_DRAM            lease the resident image in place                       host-ready, engine-restore
 *   LOCAL_SSD_URING       deferred local SSD restoration: the restore role reads  engine-restore only
 *                         the exact extent through io_uring staging into the engine
 *   ── host materialization into local DRAM (then, for engine-restore, restored from there) ──
 *   HOST_FROM_PEER_DRAM   peer DRAM → transport → a local pool slot              host-ready, engine-restore
 *   HOST_FROM_LOCAL_SSD   exact-generation extent → io_uring → a local pool slot  host-ready, engine-restore
 *   HOST_FROM_PEER_SSD    the peer stages its extent (its io_uring) → transport  host-ready, engine-restore
 * </pre>
 * io_uring and cuFile over one SSD extent are separate routes, never a tier; staging is never advertised as a replica.
 * An explicitly requested template that cannot run here fails closed: it is never silently replaced by another
 * (an explicit local SSD path does not become host prefetch).
 */
public enum RouteTemplate {
    LOCAL_DRAM(Medium.LOCAL_DRAM, true),
    LOCAL_SSD_URING(Medium.LOCAL_SSD, false),
    HOST_FROM_PEER_DRAM(Medium.PEER_DRAM, true),
    HOST_FROM_LOCAL_SSD(Medium.LOCAL_SSD, true),
    HOST_FROM_PEER_SSD(Medium.PEER_SSD, true);

    /** The default order. */
    public static final List<RouteTemplate> DEFAULT_ORDER = List.of(values());

    private final Medium medium;
    private final boolean servesHostReady;

    RouteTemplate(Medium medium, boolean servesHostReady) {
        this.medium = medium;
        this.servesHostReady = servesHostReady;
    }

    /** The medium whose evidence this template reads. */
    public Medium medium() {
        return medium;
    }

    /** Whether the template can end at {@code target}: host-ready or engine-restore (nothing else is planned). */
    public boolean serves(CompletionTarget target) {
        return switch (target.intent()) {
            case HOST_READY -> servesHostReady;
            case ENGINE_RESTORE -> true;
            case OPERATION_COMPLETE, SAVE_COMPLETION -> false;
        };
    }

    /**
     * Whether reaching {@code target} moves payload. A local DRAM lease for a host-ready target moves nothing: its
     * time is the control round trip every candidate (recomputation included) pays alike, so the planner counts its
     * transfer time as exactly none rather than as an unknown. Every other combination moves bytes and needs a
     * measured estimate.
     */
    public boolean movesPayload(CompletionTarget target) {
        return !(this == LOCAL_DRAM && target.intent() == CompletionTarget.Intent.HOST_READY);
    }

    /**
     * The complete-route cost key of moving {@code pages} pages ({@code bytes} registered bytes) along this template to
     * {@code target}; empty when no key can describe it (an unknown representation stays unknown, never assumed RAW).
     * The path names the source side, the target the end: an engine restore through host DRAM keeps the host path
     * with an engine-restore target, so its samples never mix with host-ready ones.
     *
     * @param owner the peer owner for peer templates; ignored for local ones
     */
    public Optional<CostEstimateKey> costKey(RouteResources resources, Optional<PeerOwner> owner,
                                             Optional<RepresentationFamily> representation, long bytes, long pages,
                                             CompletionTarget target) {
        if (!movesPayload(target) || representation.isEmpty()) {
            return Optional.empty();
        }
        CostPath path = switch (this) {
            case LOCAL_DRAM, HOST_FROM_LOCAL_SSD -> CostPath.HOST_READY_ROUTE;
            case LOCAL_SSD_URING -> CostPath.SSD_RESTORE_ROUTE;
            case HOST_FROM_PEER_DRAM -> CostPath.PEER_HOST_READY_ROUTE;
            case HOST_FROM_PEER_SSD -> CostPath.PEER_SSD_HOST_READY_ROUTE;
        };
        ResourceId resource = switch (medium) {
            case LOCAL_DRAM -> resources.dramPool();
            case LOCAL_SSD -> resources.ssdStore();
            case PEER_DRAM, PEER_SSD -> {
                PeerOwner peer = owner.orElseThrow(() -> new IllegalArgumentException(this + " needs a peer owner"));
                yield new ResourceId(ResourceKind.PEER_MANAGER, peer.memberId(), peer.incarnation());
            }
        };
        return Optional.of(CostEstimateKey.route(path, resource, representation.get(), SizeBucket.of(bytes),
                SizeBucket.of(pages), target));
    }
}
