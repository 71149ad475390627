package io.orbitkv.engine;

import io.orbitkv.common.OrbitException;
import io.orbitkv.protocol.engine.BlockSpan;
import io.orbitkv.protocol.engine.Demand;
import io.orbitkv.protocol.engine.DestinationGroupLayout;
import io.orbitkv.protocol.engine.EngineRestore;
import io.orbitkv.protocol.engine.ErrorReason;
import io.orbitkv.protocol.engine.GroupDemand;
import io.orbitkv.protocol.engine.GroupDestinationPages;
import io.orbitkv.protocol.engine.GroupSpec;
import io.orbitkv.protocol.engine.RestoreDestination;
import io.orbitkv.protocol.engine.RestoreRoute;
import io.orbitkv.restore.RestoreCommands.DestinationKind;
import io.orbitkv.restore.RestoreCommands.DestinationSpec;
import io.orbitkv.restore.RestoreCommands.GroupLayout;
import io.orbitkv.restore.RestoreCommands;
import io.orbitkv.restore.RestoreProxy;
import io.orbitkv.model.plan.RestoreTarget;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Validation of restore destinations (at Register) and of a demand's engine-restore target against them, before
 * anything is registered, mapped or reserved. Pure: wire messages in, records or typed refusals out.
 *
 * <p>Design note (fail closed): a demand that names a route this Manager cannot execute now is refused with
 * ROUTE_UNAVAILABLE and the probe's cause; an unspecified route resolves to the destination's own route, which is
 * refused the same way when unavailable (a CUDA destination on a machine without a driver). No demand silently falls
 * back to another route.
 */
final class RestoreDestinations {
    /** Destinations one instance may register. */
    static final int MAX_DESTINATIONS = 64;

    private RestoreDestinations() {}

    static List<DestinationSpec> validate(List<RestoreDestination> wire, Map<Integer, GroupSpec> groups) {
        if (wire.size() > MAX_DESTINATIONS) {
            throw invalid(wire.size() + " restore destinations, at most " + MAX_DESTINATIONS);
        }
        Set<Integer> ids = new HashSet<>();
        List<DestinationSpec> specs = new ArrayList<>(wire.size());
        for (RestoreDestination d : wire) {
            if (d.getDestinationId() == 0 || !ids.add(d.getDestinationId())) {
                throw invalid("destination ids must be non-zero and unique, got " + Integer.toUnsignedString(d.getDestinationId()));
            }
            long size = WireNumbers.u64Within("size_bytes", d.getSizeBytes(), 1, Long.MAX_VALUE, ErrorReason.INVALID_DESTINATION);
            DestinationKind kind;
            String path = null;
            byte[] handle = null;
            int device = 0;
            switch (d.getMemoryCase()) {
                case HOST -> {
                    kind = DestinationKind.HOST_REGION;
                    path = d.getHost().getPath();
                    if (path.isEmpty() || path.length() > 4096 || path.indexOf('\0') >= 0) {
                        throw invalid("a host region needs a path of 1..4096 characters");
                    }
                }
                case CUDA -> {
                    kind = DestinationKind.CUDA_IPC;
                    handle = d.getCuda().getIpcHandle().toByteArray();
                    if (handle.length != 64) {
                        throw invalid("a CUDA IPC handle is 64 bytes, got " + handle.length);
                    }
                    device = (int) WireNumbers.u32AtMost("device", d.getCuda().getDevice(), 1023, ErrorReason.INVALID_DESTINATION);
                }
                default -> throw invalid("a destination is either a host region or a CUDA allocation");
            }
            if (d.getGroupsCount() == 0) {
                throw invalid("destination " + Integer.toUnsignedString(d.getDestinationId()) + " lays out no group");
            }
            Set<Integer> laidOut = new HashSet<>();
            List<GroupLayout> layouts = new ArrayList<>(d.getGroupsCount());
            for (DestinationGroupLayout g : d.getGroupsList()) {
                GroupSpec group = groups.get(g.getGroupId());
                if (group == null || !laidOut.add(g.getGroupId())) {
                    throw invalid("group " + Integer.toUnsignedString(g.getGroupId()) + " is not registered or laid out twice");
                }
                long pageBytes = group.getBytesPerPage();
                long base = WireNumbers.u64AtMost("base_offset", g.getBaseOffset(), size, ErrorReason.INVALID_DESTINATION);
                long stride = WireNumbers.u64Within("page_stride_bytes", g.getPageStrideBytes(), pageBytes, size,
                        ErrorReason.INVALID_DESTINATION);
                int count = (int) WireNumbers.u32Within("page_count", g.getPageCount(), 1, Integer.MAX_VALUE,
                        ErrorReason.INVALID_DESTINATION);
                try {
                    long end = Math.addExact(Math.addExact(base, Math.multiplyExact(count - 1L, stride)), pageBytes);
                    if (end > size) {
                        throw invalid("group " + g.getGroupId() + "'s pages end at " + end + ", past the destination's "
                                + size + " bytes");
                    }
                } catch (ArithmeticException overflow) {
                    throw invalid("group " + g.getGroupId() + "'s layout overflows");
                }
                layouts.add(new GroupLayout(g.getGroupId(), base, stride, count, pageBytes));
            }
            specs.add(new DestinationSpec(d.getDestinationId(), kind, path, handle, device, size, layouts));
        }
        return specs;
    }

    /** The demand's engine-restore target, resolved and checked against the instance's destinations. */
    static RestoreTarget target(Demand demand, Map<Integer, DestinationSpec> destinations) {
        EngineRestore restore = demand.getEngineRestore();
        if (demand.getSpeculative()) {
            throw new OrbitException(ErrorReason.INVALID_DEMAND, "a speculative demand claims no engine pages: no engine_restore");
        }
        RestoreRoute requested = restore.getRoute();
        if (requested == RestoreRoute.UNRECOGNIZED) {
            throw new OrbitException(ErrorReason.MALFORMED_REQUEST, "unknown restore route");
        }
        if (requested != RestoreRoute.RESTORE_ROUTE_UNSPECIFIED) {
            requireAvailable(requested);
        }
        DestinationSpec spec = destinations == null ? null : destinations.get(restore.getDestinationId());
        if (spec == null) {
            throw new OrbitException(ErrorReason.UNKNOWN_DESTINATION, "no restore destination "
                    + Integer.toUnsignedString(restore.getDestinationId()) + " registered by this instance");
        }
        RestoreRoute route = requested == RestoreRoute.RESTORE_ROUTE_UNSPECIFIED ? spec.nativeRoute() : requested;
        requireAvailable(route);
        boolean fits = route == RestoreRoute.HOST_REGION ? spec.kind() == DestinationKind.HOST_REGION
                : spec.kind() == DestinationKind.CUDA_IPC;
        if (!fits) {
            throw invalid("route " + route + " cannot write a " + spec.kind() + " destination");
        }
        Map<Integer, GroupDestinationPages> pagesByGroup = new HashMap<>();
        for (GroupDestinationPages pages : restore.getPagesList()) {
            if (pagesByGroup.put(pages.getGroupId(), pages) != null) {
                throw invalid("group " + Integer.toUnsignedString(pages.getGroupId()) + " has two destination page lists");
            }
        }
        List<RestoreTarget.GroupPages> groups = new ArrayList<>();
        for (GroupDemand group : demand.getGroupsList()) {
            List<Integer> positions = new ArrayList<>();
            for (BlockSpan span : group.getRangesList()) {
                for (int p = span.getStart(); p < span.getEnd(); p++) {
                    positions.add(p);
                }
            }
            GroupDestinationPages pages = pagesByGroup.remove(group.getGroupId());
            if (positions.isEmpty()) {
                if (pages != null && pages.getPageIndicesCount() > 0) {
                    throw invalid("group " + group.getGroupId() + " declares no ranges but names destination pages");
                }
                continue;
            }
            GroupLayout layout = spec.layout(group.getGroupId());
            if (layout == null || pages == null || pages.getPageIndicesCount() != positions.size()) {
                throw invalid("group " + group.getGroupId() + " needs one destination page per declared position ("
                        + positions.size() + ") in a destination that lays it out");
            }
            BitSet used = new BitSet();
            List<Integer> indices = new ArrayList<>(positions.size());
            for (int index : pages.getPageIndicesList()) {
                if (Integer.compareUnsigned(index, layout.pageCount()) >= 0 || used.get(index)) {
                    throw invalid("destination page " + Integer.toUnsignedString(index) + " of group " + group.getGroupId()
                            + " is outside its " + layout.pageCount() + " pages or named twice");
                }
                used.set(index);
                indices.add(index);
            }
            groups.add(new RestoreTarget.GroupPages(group.getGroupId(), positions, indices));
        }
        if (!pagesByGroup.isEmpty()) {
            throw invalid("destination pages name a group the demand does not restore");
        }
        return new RestoreTarget(spec.id(), route, groups, spec.kind() == DestinationKind.CUDA_IPC ? spec.cudaDevice() : -1);
    }

    private static void requireAvailable(RestoreRoute route) {
        RestoreCommands.RouteStatus status = RestoreProxy.route(route);
        if (!status.available()) {
            throw new OrbitException(ErrorReason.ROUTE_UNAVAILABLE, route + " cannot run on this Manager: " + status.cause());
        }
    }

    private static OrbitException invalid(String why) {
        return new OrbitException(ErrorReason.INVALID_DESTINATION, why);
    }
}
