package io.orbitkv.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import com.google.protobuf.ByteString;
import io.orbitkv.common.OrbitException;
import io.orbitkv.protocol.engine.*;
import io.orbitkv.restore.RestoreCommands.DestinationKind;
import io.orbitkv.restore.RestoreCommands.DestinationSpec;
import io.orbitkv.model.plan.RestoreTarget;
import java.util.List;
import java.util.Map;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;

/** Destination and engine-restore target validation: every bad input a typed refusal, nothing half-accepted. */
class RestoreDestinationsTest {
    static final long PAGE = 4096;
    static final Map<Integer, GroupSpec> GROUPS = Map.of(0, GroupSpec.newBuilder().setGroupId(0)
            .setKind(GroupKind.FULL_ATTENTION).setBytesPerPage(PAGE).build());

    static RestoreDestination.Builder host() {
        return RestoreDestination.newBuilder().setDestinationId(3).setHost(HostRegion.newBuilder().setPath("/dev/shm/x"))
                .setSizeBytes(16 * PAGE).addGroups(DestinationGroupLayout.newBuilder().setGroupId(0)
                        .setBaseOffset(PAGE).setPageStrideBytes(PAGE).setPageCount(15));
    }

    static ErrorReason refusal(Runnable call) {
        OrbitException e = catchThrowableOfType(OrbitException.class, call::run);
        assertThat(e).as("refused").isNotNull();
        return e.reason();
    }

    static ErrorReason invalidDestination(UnaryOperator<RestoreDestination.Builder> change) {
        return refusal(() -> RestoreDestinations.validate(List.of(change.apply(host()).build()), GROUPS));
    }

    @Test
    void aValidHostRegionBecomesASpecWithItsLayout() {
        DestinationSpec spec = RestoreDestinations.validate(List.of(host().build()), GROUPS).getFirst();
        assertThat(spec.kind()).isEqualTo(DestinationKind.HOST_REGION);
        assertThat(spec.layout(0).offsetOf(14)).isEqualTo(15 * PAGE);
        assertThat(spec.layout(0).pageBytes()).isEqualTo(PAGE);
    }

    @Test
    void badDestinationsAreRefusedTyped() {
        assertThat(invalidDestination(b -> b.setDestinationId(0))).isEqualTo(ErrorReason.INVALID_DESTINATION);
        assertThat(invalidDestination(b -> b.clearHost())).isEqualTo(ErrorReason.INVALID_DESTINATION);
        assertThat(invalidDestination(b -> b.setHost(HostRegion.newBuilder().setPath(""))))
                .isEqualTo(ErrorReason.INVALID_DESTINATION);
        assertThat(invalidDestination(b -> b.setCuda(CudaAllocation.newBuilder().setIpcHandle(ByteString.copyFrom(new byte[63])))))
                .isEqualTo(ErrorReason.INVALID_DESTINATION);
        // One page past the end, a stride shorter than a page, an unknown group, a size of 2^63 + 1 (unsigned).
        assertThat(invalidDestination(b -> b.setGroups(0, b.getGroups(0).toBuilder().setPageCount(16))))
                .isEqualTo(ErrorReason.INVALID_DESTINATION);
        assertThat(invalidDestination(b -> b.setGroups(0, b.getGroups(0).toBuilder().setPageStrideBytes(PAGE - 1))))
                .isEqualTo(ErrorReason.INVALID_DESTINATION);
        assertThat(invalidDestination(b -> b.setGroups(0, b.getGroups(0).toBuilder().setGroupId(9))))
                .isEqualTo(ErrorReason.INVALID_DESTINATION);
        assertThat(invalidDestination(b -> b.setSizeBytes(Long.MIN_VALUE + 1))).isEqualTo(ErrorReason.INVALID_DESTINATION);
        assertThat(invalidDestination(b -> b.setGroups(0, b.getGroups(0).toBuilder().setPageStrideBytes(Long.MAX_VALUE / 2))))
                .isEqualTo(ErrorReason.INVALID_DESTINATION);
        assertThat(refusal(() -> RestoreDestinations.validate(List.of(host().build(), host().build()), GROUPS)))
                .as("duplicate ids").isEqualTo(ErrorReason.INVALID_DESTINATION);
    }

    static Demand.Builder demand(int... pageIndices) {
        GroupDestinationPages.Builder pages = GroupDestinationPages.newBuilder().setGroupId(0);
        for (int index : pageIndices) {
            pages.addPageIndices(index);
        }
        return Demand.newBuilder().addGroups(GroupDemand.newBuilder().setGroupId(0)
                        .addRanges(BlockSpan.newBuilder().setStart(2).setEnd(5)))
                .setEngineRestore(EngineRestore.newBuilder().setDestinationId(3).addPages(pages));
    }

    static final Map<Integer, DestinationSpec> MINE = Map.of(3, RestoreDestinations.validate(List.of(host().build()), GROUPS).getFirst());

    @Test
    void aTargetMapsEachDeclaredPositionToItsDestinationPage() {
        RestoreTarget target = RestoreDestinations.target(demand(14, 0, 7).build(), MINE);
        assertThat(target.route()).isEqualTo(RestoreRoute.HOST_REGION);
        assertThat(target.group(0).pageIndexOf(2)).isEqualTo(14);
        assertThat(target.group(0).pageIndexOf(4)).isEqualTo(7);
        assertThat(target.group(0).pageIndexOf(5)).isEqualTo(-1);
    }

    @Test
    void badTargetsAndUnavailableRoutesAreRefusedBeforeAnythingIsReserved() {
        assertThat(refusal(() -> RestoreDestinations.target(demand(0, 1).build(), MINE))).isEqualTo(ErrorReason.INVALID_DESTINATION);
        assertThat(refusal(() -> RestoreDestinations.target(demand(0, 1, 15).build(), MINE))).isEqualTo(ErrorReason.INVALID_DESTINATION);
        assertThat(refusal(() -> RestoreDestinations.target(demand(0, 1, 1).build(), MINE))).isEqualTo(ErrorReason.INVALID_DESTINATION);
        assertThat(refusal(() -> RestoreDestinations.target(demand(0, 1, 2).build(), Map.of()))).isEqualTo(ErrorReason.UNKNOWN_DESTINATION);
        assertThat(refusal(() -> RestoreDestinations.target(demand(0, 1, 2).setSpeculative(true).build(), MINE)))
                .isEqualTo(ErrorReason.INVALID_DEMAND);
        // cuFile has no executor (and no library here): an explicit request fails closed, whatever the destination.
        Demand.Builder cufile = demand(0, 1, 2);
        cufile.getEngineRestoreBuilder().setRoute(RestoreRoute.CUFILE);
        assertThat(refusal(() -> RestoreDestinations.target(cufile.build(), MINE))).isEqualTo(ErrorReason.ROUTE_UNAVAILABLE);
        if (!io.orbitkv.nativeio.cuda.CudaRuntime.isAvailable()) {
            Demand.Builder cuda = demand(0, 1, 2);
            cuda.getEngineRestoreBuilder().setRoute(RestoreRoute.CUDA_IPC);
            assertThat(refusal(() -> RestoreDestinations.target(cuda.build(), MINE))).isEqualTo(ErrorReason.ROUTE_UNAVAILABLE);
        }
    }
}
